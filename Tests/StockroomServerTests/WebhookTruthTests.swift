import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import StockroomCore
import StockroomPostgresTestSupport
import StockroomTestSupport
import Testing
@testable import StockroomServer

/// What the backend hears is what happened: every change it acts on is an event, whatever the
/// state was before, and what it answers after a 2xx does not make it hear the same event again.
@Suite struct WebhookTruthTests {
    static func admin(_ fixture: DownloadFixture, _ action: String, _ transactionID: String, reason: String) async throws {
        let response = try await fixture.admin(
            .post, "fulfilments/\(transactionID)/\(action)", token: AdminTests.token, body: ["reason": reason])
        #expect(response.status == .ok, "\(action): \(String(buffer: response.body))")
    }

    /// An operator revokes, then Apple refunds; the operator lifts the revocation while the
    /// refund stands; Apple reverses the refund. Each is an event with its cause.
    @Test(arguments: LedgerEngine.allCases) func everyRevocationCauseSetOrLiftedReachesTheBackend(_ engine: LedgerEngine) async throws {
        let receiver = try WebhookReceiver(secrets: [WebhookTests.secret])
        defer { receiver.stop() }
        try await WebhookTests.run(
            engine: engine, receiver: receiver,
            {
                $0.finishOn = nil; $0.adminToken = AdminTests.token
            }
        ) { fixture in
            let (purchase, _) = try await LifecycleTests.buyAndDownload(fixture)
            let id = purchase.transactionId
            try await Self.admin(fixture, "revoke", id, reason: "chargeback on another card")
            let refund = try await LifecycleTests.mint(fixture, ["type": "REFUND", "transactionId": id, "revocationType": "REFUND_FULL"])
            #expect(try await LifecycleTests.deliver(fixture, refund).status == .ok)
            try await Self.admin(fixture, "reinstate", id, reason: "cleared")
            #expect(try await fixture.ledger.fulfilment(id)?.state == .revoked, "the refund stands")
            let reversed = try await LifecycleTests.mint(fixture, ["type": "REFUND_REVERSED", "transactionId": id])
            #expect(try await LifecycleTests.deliver(fixture, reversed).status == .ok)
            #expect(try await fixture.ledger.fulfilment(id)?.state == .verified)

            let expected = [
                "purchase.verified", "purchase.delivered", "purchase.revoked", "purchase.refunded", "purchase.revocation_lifted",
                "purchase.reinstated",
            ]
            #expect(try await fixture.eventually { WebhookTests.types(receiver, of: id).count == expected.count })
            #expect(WebhookTests.types(receiver, of: id) == expected)
            var causes: [Int: String] = [:]
            for received in receiver.delivered where received.json["transactionId"] as? String == id {
                causes[received.json["sequence"] as? Int ?? 0] = received.json["cause"] as? String ?? "-"
            }
            #expect(causes.keys.sorted().map { causes[$0]! } == ["-", "-", "operator", "refund", "operator", "refund"])
            WebhookTests.checkDeliveries(receiver)
        }
    }

    /// A receiver that answers 200 with a body past the 64 KiB the sender reads has received the
    /// event: it is sent once, and the transaction's later events follow (it was sent again and
    /// again, its later events held behind it).
    @Test(arguments: LedgerEngine.allCases) func a2xxIsReceivedWhateverBodyFollowsIt(_ engine: LedgerEngine) async throws {
        let receiver = try WebhookReceiver(secrets: [WebhookTests.secret], mode: .acceptWithBody(200 << 10))
        defer { receiver.stop() }
        try await WebhookTests.run(engine: engine, receiver: receiver, { $0.finishOn = nil }) { fixture in
            let (purchase, _) = try await LifecycleTests.buyAndDownload(fixture)
            let id = purchase.transactionId
            #expect(try await fixture.eventually { WebhookTests.types(receiver, of: id) == ["purchase.verified", "purchase.delivered"] })
            // Longer than the sender's first retry (100 ms) several times over: nothing is sent again.
            try await Task.sleep(for: .seconds(1))
            #expect(receiver.received.count == 2, "each event once")
            let deliveries = try await fixture.ledger.webhookDeliveries(WebhookDeliveryQuery(transactionID: id))
            #expect(deliveries.map(\.delivery.status) == [.sent, .sent])
            #expect(deliveries.allSatisfy { $0.delivery.lastStatus == 200 && $0.delivery.attempts == 0 })
        }
    }
}
