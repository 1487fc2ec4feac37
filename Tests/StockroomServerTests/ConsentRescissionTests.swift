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

/// RESCIND_CONSENT through a live server and the simulator: the notification names an app
/// download (`appData`, a signed app transaction), the ledger records it once, and no consumption
/// answer goes to Apple for a purchase made in that download again, queued or not; purchases of
/// another download are answered as before.
@Suite struct ConsentRescissionTests {
    /// Buys the book on `device` and downloads it with consent on record.
    static func buyWithConsent(_ fixture: DownloadFixture, device: String) async throws -> SimulatorControl.Purchase {
        let purchase = try await fixture.control.purchase(["productId": DownloadFixture.book, "deviceId": device])
        let body: [String: Any] = ["productId": DownloadFixture.book, "signedTransaction": purchase.signedTransaction, "consent": true]
        let response = try await fixture.client.execute(
            uri: "/v1/downloads", method: .post, body: ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: body)))
        #expect(response.status == .ok)
        #expect(try await fixture.eventually { try await fixture.ledger.fulfilment(purchase.transactionId)?.state == .delivered })
        return purchase
    }

    static func rescind(_ fixture: DownloadFixture, naming transactionID: String) async throws -> ByteBuffer {
        try await LifecycleTests.mint(fixture, ["type": "RESCIND_CONSENT", "transactionId": transactionID])
    }

    /// Every row, as `ledger export` reads them.
    static func archive(_ fixture: DownloadFixture) async throws -> LedgerArchive {
        try await #require(fixture.ledger as? any LedgerStatementRunner).archive()
    }

    static func answers(_ fixture: DownloadFixture, _ transactionID: String) async throws -> Int? {
        try await LifecycleTests.apple(fixture, transactionID)["consumptionAnswers"] as? Int
    }

    @Test(arguments: LedgerEngine.allCases) func aRescindedDownloadsPurchasesGetNoConsumptionAnswerAndOthersStillDo(
        _ engine: LedgerEngine
    ) async throws {
        try await DownloadFixture.run(engine: engine, { $0.adminToken = AdminTests.token }) { fixture in
            let child = try await Self.buyWithConsent(fixture, device: "child-iphone")
            let other = try await Self.buyWithConsent(fixture, device: "another-iphone")
            let childRow = try #require(try await fixture.ledger.fulfilment(child.transactionId))
            let app = try #require(childRow.appTransactionID)
            #expect(try await fixture.ledger.fulfilment(other.transactionId)?.appTransactionID != app)

            let notice = try await Self.rescind(fixture, naming: child.transactionId)
            let applied = try await LifecycleTests.deliver(fixture, notice)
            #expect(applied.status == .ok)
            #expect(String(buffer: applied.body).contains("recorded"))
            #expect(String(buffer: try await LifecycleTests.deliver(fixture, notice).body).contains("duplicate"))
            // Another RESCIND_CONSENT for the same download (a new UUID) changes nothing more.
            #expect(try await LifecycleTests.deliver(fixture, try await Self.rescind(fixture, naming: child.transactionId)).status == .ok)
            let archive = try await Self.archive(fixture)
            #expect(archive.consentRescissions.map(\.appTransactionID) == [app])
            #expect(archive.consentRescissions.first?.environment == .production)
            let outcomes = archive.notifications.filter { $0.type == "RESCIND_CONSENT" }.compactMap(\.outcome).sorted()
            #expect(outcomes.count == 2)
            #expect(outcomes.contains { $0.contains("consent rescinded for app transaction \(app): no consumption data") })
            #expect(outcomes.contains { $0.hasSuffix("before") })

            for purchase in [child, other] {
                let request = try await LifecycleTests.mint(
                    fixture, ["type": "CONSUMPTION_REQUEST", "transactionId": purchase.transactionId])
                #expect(try await LifecycleTests.deliver(fixture, request).status == .ok)
            }
            #expect(try await LifecycleTests.eventually { try await Self.answers(fixture, other.transactionId) == 1 })
            try await Task.sleep(for: .milliseconds(500))
            #expect(try await Self.answers(fixture, child.transactionId) == 0)
            let calls = try await fixture.ledger.serverCalls(ServerCallListQuery(kind: .consumption))
            let childCall = try #require(calls.first { $0.transactionID == child.transactionId })
            #expect(childCall.status == .skipped)
            #expect(childCall.lastError?.contains("consent was rescinded") == true)
            #expect(calls.first { $0.transactionID == other.transactionId }?.status == .sent)

            // The ledger shows it: the rescinded purchase's detail names its download and when.
            let shown = try DownloadFixture.json(try await AdminTests.admin(fixture, "/v1/admin/fulfilments/\(child.transactionId)"))
            #expect(shown["appTransactionId"] as? String == app)
            #expect(shown["consentRescindedAt"] is String)
            #expect(shown["customerConsented"] as? Bool == true)
            let untouched = try DownloadFixture.json(try await AdminTests.admin(fixture, "/v1/admin/fulfilments/\(other.transactionId)"))
            #expect(untouched["consentRescindedAt"] == nil)
            // The purchase itself stands: the rescission is about consumption data, not the content.
            #expect(try await fixture.ledger.fulfilment(child.transactionId)?.state == .delivered)
        }
    }

    @Test func anAnswerQueuedBeforeTheRescissionIsNotSentAfterIt() async throws {
        try await DownloadFixture.run { fixture in
            let child = try await Self.buyWithConsent(fixture, device: "child-ipad")
            // Apple is down when the refund request comes: the answer waits in the queue.
            try await fixture.control.fault(["kind": "http-status", "status": 503, "count": 1, "endpoint": "consumption"])
            let request = try await LifecycleTests.mint(fixture, ["type": "CONSUMPTION_REQUEST", "transactionId": child.transactionId])
            #expect(try await LifecycleTests.deliver(fixture, request).status == .ok)
            #expect(
                try await LifecycleTests.eventually {
                    try await fixture.ledger.serverCalls(ServerCallListQuery(kind: .consumption)).first?.attempts == 1
                })
            #expect(try await LifecycleTests.deliver(fixture, try await Self.rescind(fixture, naming: child.transactionId)).status == .ok)
            #expect(
                try await LifecycleTests.eventually(seconds: 30) {
                    try await fixture.ledger.serverCalls(ServerCallListQuery(kind: .consumption)).first?.status == .refused
                })
            let call = try #require(try await fixture.ledger.serverCalls(ServerCallListQuery(kind: .consumption)).first)
            #expect(call.lastError?.contains("consent was rescinded") == true)
            #expect(try await Self.answers(fixture, child.transactionId) == 0)
        }
    }

    /// A purchase proved by a receipt names no download on record; the refund request's own signed
    /// transaction does, and that is what is checked (and kept with the call for the sender).
    @Test(arguments: LedgerEngine.allCases) func aPurchaseProvedByAReceiptIsMatchedByTheRefundRequestsTransaction(
        _ engine: LedgerEngine
    ) async throws {
        try await DownloadFixture.run(engine: engine) { fixture in
            let purchase = try await fixture.control.purchase(["productId": DownloadFixture.book, "deviceId": "child-ipod"])
            let body: [String: Any] = ["productId": DownloadFixture.book, "receiptData": purchase.receiptData, "consent": true]
            let response = try await fixture.client.execute(
                uri: "/v1/downloads", method: .post, body: ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: body)))
            #expect(response.status == .ok)
            let row = try #require(try await fixture.ledger.fulfilment(purchase.transactionId))
            #expect(row.proofKind == .receipt && row.appTransactionID == nil && row.customerConsented == true)
            #expect(
                try await LifecycleTests.deliver(fixture, try await Self.rescind(fixture, naming: purchase.transactionId)).status == .ok)
            let request = try await LifecycleTests.mint(fixture, ["type": "CONSUMPTION_REQUEST", "transactionId": purchase.transactionId])
            #expect(try await LifecycleTests.deliver(fixture, request).status == .ok)
            try await Task.sleep(for: .milliseconds(500))
            #expect(try await Self.answers(fixture, purchase.transactionId) == 0)
            let call = try #require(try await fixture.ledger.serverCalls(ServerCallListQuery(kind: .consumption)).first)
            #expect(call.status == .skipped && call.lastError?.contains("consent was rescinded") == true)
            #expect(call.appTransactionID?.isEmpty == false)
        }
    }

    @Test func aRescissionForAnotherAppIsRefusedAndRecordsNothing() async throws {
        try await DownloadFixture.run { fixture in
            let stranger = try await fixture.control.purchase(["productId": DownloadFixture.book, "bundleId": "com.example.other"])
            let response = try await LifecycleTests.deliver(fixture, try await Self.rescind(fixture, naming: stranger.transactionId))
            #expect(response.status == .badRequest)
            #expect(String(buffer: response.body).contains("bundle_mismatch"))
            let archive = try await Self.archive(fixture)
            #expect(archive.consentRescissions.isEmpty)
            #expect(archive.notifications.isEmpty)
        }
    }
}
