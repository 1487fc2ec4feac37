import AppStoreSimulator
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import StockroomCore
import StockroomPostgresTestSupport
import StockroomTestSupport
import Testing
@testable import StockroomServer

/// The finish queue is durable: a call Apple could not take survives the server's restart.
@Suite struct LifecycleRestartTests {
    @Test(arguments: LedgerEngine.allCases) func aFinishQueuedWhileAppleIsDownSurvivesARestartAndIsSentAfterwards(_ engine: LedgerEngine)
        async throws
    {
        var simulator = SimulatorConfiguration()
        simulator.port = 0
        simulator.bundleID = "com.example.stockroom.demo"
        try await buildSimulatorApplication(configuration: simulator).test(.live) { simulatorClient in
            let control = SimulatorControl(simulatorClient)
            let trust = try await control.trust(bundleID: "com.example.stockroom.demo")
            try await ServerFixture.on(engine) { fixture in
                var server = fixture
                server.configuration.upstream = .url(control.baseURL)
                server.configuration.trustedRoots = [trust.root]
                server.configuration.serverAPICredentials = trust.credentials
                server.configuration.serverCallInterval = .milliseconds(100)
                let configured = server
                let purchase = try await control.purchase(DownloadFixture.book)

                // Apple's finish endpoint is down for good while the first server runs.
                try await control.fault(["kind": "http-status", "status": 503, "count": 1000, "endpoint": "finish"])
                try await configured.application().test(.live) { client in
                    let body = try JSONSerialization.data(withJSONObject: [
                        "productId": DownloadFixture.book, "signedTransaction": purchase.signedTransaction,
                    ])
                    let download = try await client.execute(uri: "/v1/downloads", method: .post, body: ByteBuffer(bytes: body))
                    #expect(download.status == .ok)
                    let token = try #require(download.headers[.init("X-Download-Token")!])
                    try await configured.withLedger { ledger in
                        #expect(
                            try await LifecycleTests.eventually { try await ledger.fulfilment(purchase.transactionId)?.state == .delivered }
                        )
                        let ack = try await client.execute(
                            uri: "/v1/downloads/\(purchase.transactionId)/ack", method: .post, headers: [.authorization: "Bearer \(token)"])
                        #expect(ack.status == .ok)
                        #expect(
                            try await LifecycleTests.eventually {
                                try await ledger.serverCalls(ServerCallListQuery(kind: .finish)).first?.attempts ?? 0 >= 1
                            })
                        let waiting = try await ledger.list(FulfilmentListQuery(unfinished: true))
                        #expect(waiting.map(\.transactionID) == [purchase.transactionId])
                    }
                }
                // Stopped with the call queued; Apple comes back; a new server starts on the same ledger.
                _ = try await control.client.execute(uri: "/sim/faults", method: .delete)
                try await configured.withLedger { ledger in
                    let call = try #require(try await ledger.serverCalls(ServerCallListQuery(kind: .finish)).first)
                    #expect(call.status == .queued)
                    #expect(try await ledger.fulfilment(purchase.transactionId)?.finishedAt == nil)
                }
                try await configured.application().test(.live) { _ in
                    try await configured.withLedger { ledger in
                        let finished = try await LifecycleTests.eventually(seconds: 20) {
                            try await ledger.fulfilment(purchase.transactionId)?.finishedAt != nil
                        }
                        #expect(finished)
                        let unfinished = try await ledger.list(FulfilmentListQuery(unfinished: true))
                        #expect(unfinished.isEmpty)
                        let calls = try await ledger.serverCalls(ServerCallListQuery(kind: .finish))
                        #expect(calls.first?.status == .sent)
                    }
                }
                let apple =
                    try JSONSerialization.jsonObject(
                        with: Data(
                            buffer: try await control.client.execute(uri: "/sim/transactions/\(purchase.transactionId)", method: .get).body)
                    ) as? [String: Any]
                #expect(apple?["finished"] as? Bool == true)
            }
        }
    }
}
