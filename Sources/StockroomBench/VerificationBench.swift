import Foundation
import Logging
import StockroomCore

/// Times verifications through the real client (libcurl, keep-alive) against the simulator.
struct VerificationBench {
    let simulatorURL: String
    let count: Int

    func run() async throws {
        let transport = CurlHTTPClient()
        var logger = Logger(label: "bench")
        logger.logLevel = .critical
        let verifier = AppStoreReceiptVerifier(
            client: VerifyReceiptClient(transport: transport, endpoints: .base(simulatorURL), logger: logger),
            bundleID: "com.example.stockroom.demo")

        for (label, environment, freshness) in [
            ("production receipt, upstream each time", "Production", VerificationFreshness.upstreamOnly),
            ("sandbox receipt (21007 fallback), upstream each time", "Sandbox", .upstreamOnly),
            ("production receipt, cached verdict", "Production", .cachedAllowed),
        ] {
            let receipt = try await purchase(environment: environment, transport: transport)
            let request = VerificationRequest(receiptData: receipt, productID: "com.example.stockroom.demo.book1")
            _ = await verifier.verify(request, freshness: freshness)  // warm the connection
            let before = try await upstreamCalls(transport)
            var samples: [Duration] = []
            samples.reserveCapacity(count)
            for _ in 0..<count {
                let start = ContinuousClock.now
                guard case .valid = await verifier.verify(request, freshness: freshness) else {
                    throw BenchError("a verification was not valid")
                }
                samples.append(ContinuousClock.now - start)
            }
            let calls = try await upstreamCalls(transport) - before
            samples.sort()
            print(
                "\(label): \(count) verifications, p50 \(micros(samples[count / 2])) µs, "
                    + "p99 \(micros(samples[min(count - 1, count * 99 / 100)])) µs, "
                    + "upstream calls per verification \(String(format: "%.2f", Double(calls) / Double(count)))")
        }
    }

    private func purchase(environment: String, transport: CurlHTTPClient) async throws -> String {
        let body = Array(#"{"productId": "com.example.stockroom.demo.book1", "environment": "\#(environment)"}"#.utf8)
        let response = try await transport.send(UpstreamRequest(method: .post, url: simulatorURL + "/sim/purchases", body: body))
        guard let object = try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any],
            let receipt = object["receiptData"] as? String
        else { throw BenchError("the simulator did not sell: HTTP \(response.status)") }
        return receipt
    }

    private func upstreamCalls(_ transport: CurlHTTPClient) async throws -> Int {
        let response = try await transport.send(UpstreamRequest(method: .get, url: simulatorURL + "/sim/stats"))
        let object = try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any]
        return object?["total"] as? Int ?? 0
    }

    private func micros(_ duration: Duration) -> Int64 {
        duration.components.seconds * 1_000_000 + duration.components.attoseconds / 1_000_000_000_000
    }
}

struct BenchError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
