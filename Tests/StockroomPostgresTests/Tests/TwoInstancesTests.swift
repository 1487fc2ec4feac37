import AppStoreSimulator
import Foundation
import Hummingbird
import HummingbirdTesting
import StockroomCore
import StockroomPostgres
import StockroomPostgresTestSupport
import StockroomTestSupport
import Testing

/// Two `stockroom serve` processes on one PostgreSQL ledger, as behind a load balancer: what one
/// decides, the other sees at once.
@Suite(.serialized) struct TwoInstancesTests {
    static let product = "com.example.stockroom.demo.book1"
    static let tokenSecret = "two-instances-token-secret-0123456789abcdef"

    /// A live simulator, a scratch database, and a folder with one product's catalogue, its
    /// content and the simulator's root (`root.pem`), for `stockroom` processes to share.
    static func withWorld(
        _ body: @Sendable @escaping (_ binary: String, SimulatorControl, PostgresAddress, TemporaryFolder) async throws -> Void
    ) async throws {
        let binary = try StockroomProcess.binary()
        var simulator = SimulatorConfiguration()
        simulator.port = 0
        try await buildSimulatorApplication(configuration: simulator).test(.live) { simulatorClient in
            let control = SimulatorControl(simulatorClient)
            try await ScratchPostgres.withDatabase { address in
                let folder = try TemporaryFolder()
                try folder.write("content/book.epub", sampleBytes(count: 50_000))
                try folder.write(
                    "catalog/products.json",
                    #"{"products": [{"productId": "\#(Self.product)", "title": "Book", "type": "non-consumable", "file": "book.epub"}]}"#)
                try folder.write("root.pem", String(buffer: try await control.client.execute(uri: "/sim/root.pem", method: .get).body))
                try await body(binary, control, address, folder)
                withExtendedLifetime(folder) {}
            }
        }
    }

    @Test func claimsSpreadOverTwoInstancesMakeOneEntitlementAndARefundOnOneStopsTheOther() async throws {
        try await Self.withWorld { binary, control, address, folder in
            var instances: [StockroomProcess] = []
            defer { for instance in instances { instance.stop() } }
            for name in ["a", "b"] {
                instances.append(
                    try StockroomProcess.serve(
                        binary, folder: try folder.folder(name), port: try StockroomProcess.freePort(),
                        arguments: [
                            "--catalog", folder.path + "/catalog", "--content", folder.path + "/content", "--upstream", control.baseURL,
                            "--trust-root", folder.path + "/root.pem", "--upstream-rate", "off", "--log-level", "error",
                            // Every claim holds a connection while it waits for the purchase's lock.
                            "--database-pool", "20", "--database-timeout", "30s",
                        ],
                        environment: ["STOCKROOM_DATABASE": address.url, "STOCKROOM_TOKEN_SECRET": Self.tokenSecret]))
            }
            for instance in instances { try await instance.waitUntilHealthy() }

            // 32 concurrent claims of one transaction, spread over both.
            let purchase = try await control.purchase(Self.product)
            let body = try JSONSerialization.data(withJSONObject: [
                "productId": Self.product, "transactionId": purchase.transactionId, "receiptData": purchase.receiptData,
            ])
            let answers = try await withThrowingTaskGroup(of: UpstreamResponse.self) { group in
                for index in 0..<32 {
                    let instance = instances[index % 2]
                    group.addTask { try await instance.send(.post, "/v1/downloads", body: Array(body)) }
                }
                return try await group.reduce(into: [UpstreamResponse]()) { $0.append($1) }
            }
            #expect(answers.map(\.status) == Array(repeating: 200, count: 32))
            try await PostgresPool(address: address, poolSize: 2, checkoutTimeout: .seconds(30), logger: ScratchPostgres.quiet).running {
                database in
                let rows = try await PostgresLedger(database: database).list(FulfilmentListQuery())
                #expect(rows.map(\.transactionID) == [purchase.transactionId], "one entitlement")
                #expect(rows.first?.attempts == 32, "every claim counted once")
            }

            // A token from one instance works on the other (one STOCKROOM_TOKEN_SECRET); a
            // refund received by one makes the other refuse the next range request.
            let token = try #require(answers.first?.headers["x-download-token"])
            let content = "/v1/downloads/\(purchase.transactionId)/content"
            let range = [("Authorization", "Bearer \(token)"), ("Range", "bytes=0-99")]
            #expect(try await instances[1].send(.get, content, headers: range).status == 206)
            let refund = try await control.client.execute(
                uri: "/sim/notifications", method: .post,
                body: ByteBuffer(
                    bytes: try JSONSerialization.data(withJSONObject: ["type": "REFUND", "transactionId": purchase.transactionId])))
            let received = try await instances[0].send(.post, "/v1/notifications/appstore", body: Array(buffer: refund.body))
            #expect(received.status == 200)
            let refused = try await instances[1].send(.get, content, headers: range)
            #expect(refused.status == 403)
            #expect(String(decoding: refused.body, as: UTF8.self).contains(#""code":"revoked""#))
        }
    }

    @Test func twoRefulfilPendingRunsAtOnceVerifyEachKeptReceiptOnce() async throws {
        try await Self.withWorld { binary, control, address, folder in
            let shared = [
                "--catalog", folder.path + "/catalog", "--content", folder.path + "/content", "--upstream", control.baseURL,
                "--trust-root", folder.path + "/root.pem", "--log-level", "error",
            ]
            let environment = ["STOCKROOM_DATABASE": address.url, "STOCKROOM_TOKEN_SECRET": Self.tokenSecret]
            let server = try StockroomProcess.serve(
                binary, folder: try folder.folder("a"), port: try StockroomProcess.freePort(),
                arguments: shared + ["--upstream-rate", "off"],
                environment: environment)
            defer { server.stop() }
            try await server.waitUntilHealthy()

            // Eight purchases whose downloads met an outage: eight kept receipts.
            var purchases: [SimulatorControl.Purchase] = []
            for _ in 0..<8 { purchases.append(try await control.purchase(Self.product)) }
            try await control.fault(["kind": "http-status", "status": 503, "count": 1000])
            for purchase in purchases {
                let body = try JSONSerialization.data(withJSONObject: [
                    "productId": Self.product, "transactionId": purchase.transactionId, "receiptData": purchase.receiptData,
                ])
                #expect(try await server.send(.post, "/v1/downloads", body: Array(body)).status == 503)
            }
            _ = try await control.client.execute(uri: "/sim/faults", method: .delete)

            // Two operators, as on two machines: `stockroom refulfil --pending` twice at once.
            let before = try await control.calls().total
            async let first = StockroomProcess.run(binary, ["refulfil", "--pending", "--json"] + shared, environment: environment)
            async let second = StockroomProcess.run(binary, ["refulfil", "--pending", "--json"] + shared, environment: environment)
            let outputs = try await [first, second]
            let results = try outputs.flatMap { output -> [[String: Any]] in
                let object = try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any]
                return object?["results"] as? [[String: Any]] ?? []
            }
            #expect(results.count == 8, "each kept receipt is verified by one run only: \(outputs)")
            #expect(Set(results.compactMap { $0["transactionId"] as? String }) == Set(purchases.map(\.transactionId)))
            #expect(results.allSatisfy { $0["outcome"] as? String == "verified" })
            #expect(try await control.calls().total - before == 8, "one verifyReceipt call per kept receipt")
        }
    }
}
