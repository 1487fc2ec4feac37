import AppStoreSimulator
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import StockroomCore
import StockroomEntitlement
import StockroomPostgresTestSupport
import StockroomTestSupport
import Testing
@testable import StockroomServer

/// Apple's purchase lifecycle through a live server and the simulator: the server finishes
/// transactions, answers refund requests once, records one-time charges, and reconciles.
@Suite struct LifecycleTests {
    /// What the simulator (Apple) knows of a transaction: `finished`, `consumption`, `consumptionAnswers`.
    static func apple(_ fixture: DownloadFixture, _ transactionID: String) async throws -> [String: Any] {
        let response = try await fixture.control.client.execute(uri: "/sim/transactions/\(transactionID)", method: .get)
        return try JSONSerialization.jsonObject(with: Data(buffer: response.body)) as? [String: Any] ?? [:]
    }

    /// Waits up to `seconds` for `condition`.
    static func eventually(seconds: Int = 10, _ condition: @Sendable () async throws -> Bool) async throws -> Bool {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while ContinuousClock.now < deadline {
            if try await condition() { return true }
            try await Task.sleep(for: .milliseconds(50))
        }
        return try await condition()
    }

    /// Buys the book and downloads it whole (with `consent` when given); returns the purchase and its token.
    static func buyAndDownload(_ fixture: DownloadFixture, consent: Bool? = nil) async throws -> (SimulatorControl.Purchase, String) {
        let purchase = try await fixture.control.purchase(DownloadFixture.book)
        var body: [String: Any] = ["productId": DownloadFixture.book, "signedTransaction": purchase.signedTransaction]
        if let consent { body["consent"] = consent }
        let response = try await fixture.client.execute(
            uri: "/v1/downloads", method: .post, body: ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: body)))
        #expect(response.status == .ok)
        let token = try #require(response.headers[.init("X-Download-Token")!])
        #expect(try await fixture.eventually { try await fixture.ledger.fulfilment(purchase.transactionId)?.state == .delivered })
        return (purchase, token)
    }

    static func mint(_ fixture: DownloadFixture, _ fields: [String: any Sendable]) async throws -> ByteBuffer {
        let response = try await fixture.control.client.execute(
            uri: "/sim/notifications", method: .post, body: ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: fields)))
        #expect(response.status == .created)
        return response.body
    }

    static func deliver(_ fixture: DownloadFixture, _ body: ByteBuffer) async throws -> TestResponse {
        try await fixture.client.execute(uri: "/v1/notifications/appstore", method: .post, body: body)
    }

    // MARK: Finish

    @Test(arguments: LedgerEngine.allCases) func anAcknowledgedTransactionIsFinishedByTheServer(_ engine: LedgerEngine) async throws {
        try await DownloadFixture.run(engine: engine) { fixture in
            let (purchase, token) = try await Self.buyAndDownload(fixture)
            #expect(try await Self.apple(fixture, purchase.transactionId)["finished"] as? Bool == false)
            let ack = try await fixture.ack(purchase.transactionId, token: token)
            #expect(ack.status == .ok)
            #expect(try await Self.eventually { try await Self.apple(fixture, purchase.transactionId)["finished"] as? Bool == true })
            #expect(try await Self.eventually { try await fixture.ledger.fulfilment(purchase.transactionId)?.finishedAt != nil })
            let status = try DownloadFixture.json(try await fixture.get("/v1/downloads/\(purchase.transactionId)", token: token))
            #expect(status["finishedByServer"] as? Bool == true)
            let calls = try await fixture.ledger.serverCalls(ServerCallListQuery(kind: .finish, transactionID: purchase.transactionId))
            #expect(calls.map(\.status) == [.sent])
        }
    }

    @Test func aDeliveredTransactionIsNotFinishedBeforeItsAcknowledgementByDefault() async throws {
        try await DownloadFixture.run { fixture in
            let (purchase, token) = try await Self.buyAndDownload(fixture)
            try await Task.sleep(for: .milliseconds(500))
            #expect(try await Self.apple(fixture, purchase.transactionId)["finished"] as? Bool == false)
            #expect(try await fixture.ledger.serverCalls(ServerCallListQuery(kind: .finish)).isEmpty)
            let status = try DownloadFixture.json(try await fixture.get("/v1/downloads/\(purchase.transactionId)", token: token))
            #expect(status["finishedByServer"] as? Bool == false)
        }
    }

    @Test func finishOnDeliveredFinishesOnceTheWholeCopyWentOut() async throws {
        try await DownloadFixture.run({ $0.finishOn = .delivered }) { fixture in
            let (purchase, token) = try await Self.buyAndDownload(fixture)
            #expect(try await Self.eventually { try await Self.apple(fixture, purchase.transactionId)["finished"] as? Bool == true })
            // The acknowledgement afterwards queues nothing new: one finish per transaction.
            #expect(try await fixture.ack(purchase.transactionId, token: token).status == .ok)
            try await Task.sleep(for: .milliseconds(300))
            #expect(try await fixture.ledger.serverCalls(ServerCallListQuery(kind: .finish)).count == 1)
        }
    }

    @Test func withFinishOffNothingIsQueued() async throws {
        try await DownloadFixture.run({ $0.finishOn = nil }) { fixture in
            let (purchase, token) = try await Self.buyAndDownload(fixture)
            #expect(try await fixture.ack(purchase.transactionId, token: token).status == .ok)
            try await Task.sleep(for: .milliseconds(300))
            #expect(try await fixture.ledger.serverCalls(ServerCallListQuery()).isEmpty)
            #expect(try await Self.apple(fixture, purchase.transactionId)["finished"] as? Bool == false)
        }
    }

    @Test func aFinishThatAppleRateLimitsWaitsForRetryAfterAndIsSentAgain() async throws {
        try await DownloadFixture.run { fixture in
            let (purchase, token) = try await Self.buyAndDownload(fixture)
            try await fixture.control.fault([
                "kind": "http-status", "status": 429, "retryAfterSeconds": 1, "count": 1, "endpoint": "finish",
            ])
            #expect(try await fixture.ack(purchase.transactionId, token: token).status == .ok)
            #expect(
                try await Self.eventually { try await fixture.ledger.serverCalls(ServerCallListQuery(kind: .finish)).first?.attempts == 1 })
            let waiting = try #require(try await fixture.ledger.serverCalls(ServerCallListQuery(kind: .finish)).first)
            #expect(waiting.status == .queued)
            #expect(waiting.lastError?.contains("429") == true)
            #expect(try await Self.eventually { try await Self.apple(fixture, purchase.transactionId)["finished"] as? Bool == true })
            #expect(try await fixture.ledger.serverCalls(ServerCallListQuery(kind: .finish)).first?.status == .sent)
        }
    }

    // MARK: Consumption

    @Test(arguments: LedgerEngine.allCases) func twoConsumptionRequestsForOneTransactionMakeOnePut(_ engine: LedgerEngine) async throws {
        try await DownloadFixture.run(engine: engine, { $0.refundPreference = .decline }) { fixture in
            let (purchase, _) = try await Self.buyAndDownload(fixture, consent: true)
            for _ in 0..<2 {
                let request = try await Self.mint(fixture, ["type": "CONSUMPTION_REQUEST", "transactionId": purchase.transactionId])
                #expect(try await Self.deliver(fixture, request).status == .ok)
            }
            #expect(try await Self.eventually { try await Self.apple(fixture, purchase.transactionId)["consumptionAnswers"] as? Int == 1 })
            try await Task.sleep(for: .milliseconds(500))
            let apple = try await Self.apple(fixture, purchase.transactionId)
            #expect(apple["consumptionAnswers"] as? Int == 1)
            let body = try #require(apple["consumption"] as? [String: Any])
            #expect(body["deliveryStatus"] as? String == "DELIVERED")
            #expect(body["customerConsented"] as? Bool == true)
            #expect(body["sampleContentProvided"] as? Bool == false)
            #expect(body["refundPreference"] as? String == "DECLINE")
            let calls = try await fixture.ledger.serverCalls(ServerCallListQuery(kind: .consumption))
            #expect(calls.count == 1)
            #expect(calls.first?.status == .sent)
            #expect(calls.first?.body?.contains("\"DELIVERED\"") == true)
        }
    }

    @Test func withoutConsentNoConsumptionAnswerIsSentAndThatIsRecorded() async throws {
        try await DownloadFixture.run { fixture in
            let (purchase, _) = try await Self.buyAndDownload(fixture)
            let request = try await Self.mint(fixture, ["type": "CONSUMPTION_REQUEST", "transactionId": purchase.transactionId])
            #expect(try await Self.deliver(fixture, request).status == .ok)
            try await Task.sleep(for: .milliseconds(500))
            #expect(try await Self.apple(fixture, purchase.transactionId)["consumptionAnswers"] as? Int == 0)
            let calls = try await fixture.ledger.serverCalls(ServerCallListQuery(kind: .consumption))
            #expect(calls.map(\.status) == [.skipped])
            #expect(calls.first?.lastError?.contains("consent") == true)
        }
    }

    @Test func aConsentedButUndeliveredPurchaseIsAnsweredAsNotDeliveredWithNoConsumption() async throws {
        try await DownloadFixture.run { fixture in
            // Entitled by Apple's ONE_TIME_CHARGE, never downloaded; the app's consent is on record
            // (as a download request with "consent": true records it, see above).
            let purchase = try await fixture.control.purchase(DownloadFixture.book)
            let charge = try await Self.mint(fixture, ["type": "ONE_TIME_CHARGE", "transactionId": purchase.transactionId])
            #expect(try await Self.deliver(fixture, charge).status == .ok)
            #expect(try await fixture.ledger.fulfilment(purchase.transactionId)?.state == .verified)
            try await fixture.ledger.recordConsent(purchase.transactionId, consented: true, now: Date())
            let request = try await Self.mint(fixture, ["type": "CONSUMPTION_REQUEST", "transactionId": purchase.transactionId])
            #expect(try await Self.deliver(fixture, request).status == .ok)
            #expect(try await Self.eventually { try await Self.apple(fixture, purchase.transactionId)["consumptionAnswers"] as? Int == 1 })
            let answer = try #require(try await Self.apple(fixture, purchase.transactionId)["consumption"] as? [String: Any])
            #expect(answer["deliveryStatus"] as? String == "UNDELIVERED_OTHER")
            #expect(answer["consumptionPercentage"] as? Int == 0)
            #expect(answer["refundPreference"] == nil)
        }
    }

    // MARK: Notifications

    @Test(arguments: LedgerEngine.allCases) func aOneTimeChargeEntitlesBeforeTheAppAsksSoTheFirstDownloadCallsNobody(_ engine: LedgerEngine)
        async throws
    {
        try await DownloadFixture.run(engine: engine) { fixture in
            let url = #"{"url": "http://127.0.0.1:\#(fixture.client.port!)/v1/notifications/appstore"}"#
            _ = try await fixture.control.client.execute(uri: "/sim/notification-url", method: .put, body: ByteBuffer(string: url))
            let purchase = try await fixture.control.purchase(DownloadFixture.book)
            let row = try #require(try await fixture.ledger.fulfilment(purchase.transactionId))
            #expect(row.state == .verified)
            #expect(row.attempts == 0)
            let before = try await fixture.control.serverAPICalls()
            let response = try await fixture.post(["productId": DownloadFixture.book, "signedTransaction": purchase.signedTransaction])
            #expect(response.status == .ok)
            #expect(Array(buffer: response.body) == ServerFixture.book)
            #expect(try await fixture.control.serverAPICalls() == before)
        }
    }

    @Test(arguments: LedgerEngine.allCases) func everyNotificationIsKeptVerbatim(_ engine: LedgerEngine) async throws {
        try await DownloadFixture.run(engine: engine) { fixture in
            let (purchase, _) = try await Self.buyAndDownload(fixture)
            let declined = try await Self.mint(fixture, ["type": "REFUND_DECLINED", "transactionId": purchase.transactionId])
            #expect(try await Self.deliver(fixture, declined).status == .ok)
            let object = try JSONSerialization.jsonObject(with: Data(buffer: declined)) as? [String: String]
            let payload = try #require(object?["signedPayload"])
            let uuid = try #require(Self.notificationUUID(of: payload))
            let stored = try #require(try await fixture.ledger.storedNotification(uuid))
            #expect(stored.signedPayload == payload)
            #expect(stored.type == "REFUND_DECLINED")
            #expect(stored.source == "push")
            #expect(stored.outcome == "refund declined")
            #expect(try await fixture.ledger.fulfilment(purchase.transactionId)?.state == .delivered)
        }
    }

    @Test func aProratedRefundRevokesByDefault() async throws {
        try await DownloadFixture.run { fixture in
            let (purchase, _) = try await Self.buyAndDownload(fixture)
            let refund = try await Self.mint(
                fixture,
                [
                    "type": "REFUND", "transactionId": purchase.transactionId, "revocationType": "REFUND_PRORATED",
                    "revocationPercentage": 50_000,
                ])
            #expect(try await Self.deliver(fixture, refund).status == .ok)
            #expect(try await fixture.ledger.fulfilment(purchase.transactionId)?.state == .revoked)
        }
    }

    @Test func aProratedRefundKeepsTheContentUnderKeepEvenWhenReverified() async throws {
        try await DownloadFixture.run({
            $0.proratedRefund = .keep; $0.reverifyInterval = .zero
        }) { fixture in
            let (purchase, _) = try await Self.buyAndDownload(fixture)
            let refund = try await Self.mint(
                fixture,
                [
                    "type": "REFUND", "transactionId": purchase.transactionId, "revocationType": "REFUND_PRORATED",
                    "revocationPercentage": 50_000,
                ])
            #expect(try await Self.deliver(fixture, refund).status == .ok)
            #expect(try await fixture.ledger.fulfilment(purchase.transactionId)?.state == .delivered)
            // Apple's current view shows the revocation; under keep, a fresh download still goes out.
            let again = try await fixture.post(["productId": DownloadFixture.book, "signedTransaction": purchase.signedTransaction])
            #expect(again.status == .ok)
            // A full refund still revokes.
            let full = try await Self.mint(
                fixture, ["type": "REFUND", "transactionId": purchase.transactionId, "revocationType": "REFUND_FULL"])
            #expect(try await Self.deliver(fixture, full).status == .ok)
            #expect(try await fixture.ledger.fulfilment(purchase.transactionId)?.state == .revoked)
        }
    }

    @Test func aFamilyRevocationRevokes() async throws {
        try await DownloadFixture.run { fixture in
            let (purchase, token) = try await Self.buyAndDownload(fixture)
            let revoke = try await Self.mint(
                fixture, ["type": "REVOKE", "transactionId": purchase.transactionId, "revocationType": "FAMILY_REVOKE"])
            #expect(try await Self.deliver(fixture, revoke).status == .ok)
            #expect(try await fixture.ledger.fulfilment(purchase.transactionId)?.state == .revoked)
            #expect(
                try DownloadFixture.code(try await fixture.get("/v1/downloads/\(purchase.transactionId)/content", token: token))
                    == "revoked")
        }
    }

    // MARK: Reconcile

    @Test(arguments: LedgerEngine.allCases) func afterMissedNotificationsAHistorySyncMakesTheLedgerConverge(_ engine: LedgerEngine)
        async throws
    {
        try await DownloadFixture.run(engine: engine) { fixture in
            let (kept, _) = try await Self.buyAndDownload(fixture)
            let (refunded, _) = try await Self.buyAndDownload(fixture)
            // The server is unreachable for Apple: every notification fails and stays in Apple's history.
            _ = try await fixture.control.client.execute(
                uri: "/sim/notification-url", method: .put,
                body: ByteBuffer(string: #"{"url": "http://127.0.0.1:9/v1/notifications/appstore"}"#))
            try await fixture.control.refund(refunded.transactionId)
            let charged = try await fixture.control.purchase(DownloadFixture.book)
            #expect(try await fixture.ledger.fulfilment(refunded.transactionId)?.state == .delivered)
            #expect(try await fixture.ledger.fulfilment(charged.transactionId) == nil)

            let sync = try await Self.sync(fixture)
            let first = try await sync.run(
                NotificationHistoryQuery(start: Date().addingTimeInterval(-3600), end: Date()), environment: .production)
            // Every purchase's ONE_TIME_CHARGE (never delivered either) and the refund, oldest first.
            #expect(first.applied == 4)
            #expect(first.effects["revoked"] == 1)
            #expect(first.effects["entitled"] == 3)
            #expect(try await fixture.ledger.fulfilment(refunded.transactionId)?.state == .revoked)
            #expect(try await fixture.ledger.fulfilment(charged.transactionId)?.state == .verified)
            #expect(try await fixture.ledger.fulfilment(kept.transactionId)?.state == .delivered)

            // Idempotent: a second sync applies nothing and changes nothing.
            let before = try await fixture.settledSnapshot()
            let second = try await sync.run(
                NotificationHistoryQuery(start: Date().addingTimeInterval(-3600), end: Date()), environment: .production)
            #expect(second.applied == 0)
            #expect(second.duplicates == first.seen)
            #expect(try await fixture.snapshot() == before)
        }
    }

    /// The reconcile as `stockroom notifications sync` runs it, against the fixture's simulator.
    static func sync(_ fixture: DownloadFixture) async throws -> NotificationSync {
        let trust = try await fixture.control.trust(bundleID: "com.example.stockroom.demo")
        let client = AppStoreServerAPIClient(
            credentials: trust.credentials, endpoints: .base(fixture.control.baseURL), transport: CurlHTTPClient(),
            policy: RetryPolicy(
                maximumAttempts: 2, initialBackoff: .milliseconds(5), maximumBackoff: .milliseconds(20), totalBudget: .seconds(60)),
            cacheInterval: .zero)
        let entitlements = Entitlements(
            ledger: fixture.ledger, receipts: UnusedReceiptVerifier(),
            signedTransactions: SignedTransactionVerifier(root: trust.root, bundleID: "com.example.stockroom.demo", environment: nil),
            serverAPI: client, tokens: DownloadTokenSigner(key: Array(ServerFixture.tokenSecret.utf8)))
        return NotificationSync(entitlements: entitlements, client: client)
    }

    static func notificationUUID(of payload: String) -> String? {
        let parts = payload.split(separator: ".")
        var text = String(parts.count == 3 ? parts[1] : "").replacingOccurrences(of: "-", with: "+").replacingOccurrences(
            of: "_", with: "/")
        while text.count % 4 != 0 { text += "=" }
        guard parts.count == 3, let bytes = Data(base64Encoded: text),
            let object = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any]
        else { return nil }
        return object["notificationUUID"] as? String
    }
}

/// A sync verifies no receipts: this fails loudly if it is ever asked to.
struct UnusedReceiptVerifier: ReceiptVerifier {
    func verify(_ request: VerificationRequest, freshness: VerificationFreshness) async -> ReceiptVerdict {
        Issue.record("a notification sync verified a receipt")
        return .unavailable(reason: "unused", retryAfter: .seconds(1))
    }
}
