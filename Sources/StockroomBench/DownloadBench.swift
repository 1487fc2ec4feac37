import Foundation
import NIOPosix
import StockroomCore

/// Verified downloads per second: COUNT distinct purchases (so every request is a first-time
/// verification), posted by CONCURRENCY clients through libcurl. Against a server on 127.0.0.1,
/// the clients connect from 16 loopback addresses (127.0.0.2 to 127.0.0.17), so that 128 of them
/// stay within the server's per-client cap (32 downloads at once) as 128 buyers would.
struct DownloadBench {
    /// What each download request carries.
    enum Proof: String {
        /// The app receipt: verified upstream (verifyReceipt).
        case receipt
        /// The StoreKit 2 signed transaction: verified in process (its chain, then its signature).
        case jws
    }

    let serverURL: String
    let simulatorURL: String
    let productID: String
    let count: Int
    let concurrency: Int
    let proof: Proof

    func run() async throws {
        let concurrency = self.concurrency
        let serverURL = self.serverURL
        let pool = NIOThreadPool(numberOfThreads: concurrency)
        pool.start()
        let client = CurlHTTPClient(threadPool: pool)
        var bodies: [[UInt8]] = []
        for _ in 0..<count {
            let response = try await client.send(
                UpstreamRequest(method: .post, url: simulatorURL + "/sim/purchases", body: Array(#"{"productId": "\#(productID)"}"#.utf8)))
            guard let purchase = try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any] else {
                throw BenchError("the simulator did not sell: HTTP \(response.status)")
            }
            let transactionID = purchase["transactionId"] as? String ?? ""
            let fields: [String: String] =
                switch proof {
                case .receipt:
                    ["productId": productID, "transactionId": transactionID, "receiptData": purchase["receiptData"] as? String ?? ""]
                case .jws: ["productId": productID, "signedTransaction": purchase["signedTransaction"] as? String ?? ""]
                }
            let body = try JSONSerialization.data(withJSONObject: fields)
            bodies.append(Array(body))
        }
        let requests = bodies
        let callsBefore = try await upstreamCalls(client)
        let start = ContinuousClock.now
        let samples = try await withThrowingTaskGroup(of: [Duration].self) { group in
            for worker in 0..<concurrency {
                let local = serverURL.hasPrefix("http://127.0.0.1:") ? "127.0.0.\(2 + worker % 16)" : nil
                group.addTask {
                    var samples: [Duration] = []
                    for index in stride(from: worker, to: requests.count, by: concurrency) {
                        let began = ContinuousClock.now
                        let response = try await client.send(
                            UpstreamRequest(method: .post, url: serverURL + "/v1/downloads", body: requests[index], localAddress: local))
                        // 200 with the body, or (content in a bucket, --content-delivery redirect) 303 to
                        // a presigned URL: the store would send the bytes.
                        let streamed = response.status == 200 && !response.body.isEmpty
                        let redirected = response.status == 303 && response.headers["location"]?.hasPrefix("http") == true
                        guard streamed || redirected else { throw BenchError("a download answered HTTP \(response.status)") }
                        samples.append(ContinuousClock.now - began)
                    }
                    return samples
                }
            }
            var all: [Duration] = []
            for try await part in group { all += part }
            return all.sorted()
        }
        let elapsed = ContinuousClock.now - start
        let calls = try await upstreamCalls(client) - callsBefore
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        print(
            "\(count) verified downloads of \(productID) (\(proof.rawValue)), \(concurrency) clients: \(Int(Double(count) / seconds))/s, "
                + "p50 \(milliseconds(samples[count / 2])) ms, p99 \(milliseconds(samples[min(count - 1, count * 99 / 100)])) ms, "
                + "upstream calls per download \(String(format: "%.2f", Double(calls) / Double(count)))")
        try await pool.shutdownGracefully()
    }

    private func upstreamCalls(_ client: CurlHTTPClient) async throws -> Int {
        let response = try await client.send(UpstreamRequest(method: .get, url: simulatorURL + "/sim/stats"))
        return (try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any])?["total"] as? Int ?? 0
    }

    private func milliseconds(_ duration: Duration) -> String {
        String(format: "%.1f", Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15)
    }
}
