import Foundation
@testable import StockroomServer
import StockroomTestSupport
import Testing
@testable import StockroomKit

/// Each row of the README's outcome table, through the live server (and the mapping on its own).
@Suite struct OutcomeTests {
    @Test func anAppStoreOutageKeepsThePurchaseUnfinishedAndItIsDeliveredOnceTheStoreIsBack() async throws {
        try await KitFixture.run { fixture in
            let purchase = try await fixture.control.purchase(KitFixture.book).withReceipt()
            try await fixture.control.fault(["kind": "http-status", "status": 503, "count": 1000])
            let clock = TestClock()
            let events = EventLog()
            let delivery = try fixture.delivery(now: clock.now, events: events)

            let outcome = await delivery.deliver(purchase)
            guard case .retryLater(let after, let reason) = outcome else { Issue.record("\(outcome)"); return }
            #expect(reason.code == "upstream_unavailable")
            #expect(reason.status == 503)
            #expect(after >= .seconds(1))
            #expect(outcome.transactionAction == .keepUnfinishedAndRetry)
            #expect(fixture.contents(KitFixture.book) == nil)

            // Retry-After is honoured: before it, no request goes out, also from a relaunched client.
            let relaunched = try fixture.delivery(now: clock.now, events: events)
            #expect(await relaunched.deliver(purchase).transactionAction == .keepUnfinishedAndRetry)
            #expect(events.requests == ["POST 503"])

            try await fixture.clearFaults()
            clock.advance(after.timeInterval + 1)
            #expect(await relaunched.deliver(purchase).code == "delivered")
            let intact = fixture.holds(KitFixture.book, KitFixture.bookBytes)
            #expect(intact)
            #expect(try await fixture.state(purchase.transactionID) == .acknowledged)
        }
    }

    @Test func aPurchaseRevokedBeforeItsDownloadIsRevokedWithNoFileLeft() async throws {
        try await KitFixture.run { fixture in
            let bought = try await fixture.control.purchase(KitFixture.big)
            try await fixture.control.refund(bought.transactionId)
            let delivery = try fixture.delivery()
            let outcome = await delivery.deliver(bought.withReceipt())
            #expect(outcome.code == "revoked")
            guard case .revoked = outcome else { Issue.record("\(outcome)"); return }
            #expect(outcome.transactionAction == .finish, "finished, with no content")
            #expect(fixture.filesOnDisk().isEmpty, "no file, whole or partial")
        }
    }

    @Test func aPurchaseBoundToAnotherAccountIsTheAppsDecision() async throws {
        try await KitFixture.run { fixture in
            let bought = try await fixture.control.purchase(["productId": KitFixture.book, "appAccountToken": UUID().uuidString])
            let outcome = try await fixture.delivery().deliver(bought.withSignedTransaction(account: UUID()))
            #expect(outcome == .refused(OutcomeReason(code: "transaction_claimed", message: Self.message(outcome), status: 409)))
            #expect(outcome.transactionAction == .appDecides)
            #expect(fixture.filesOnDisk().isEmpty)
        }
    }

    @Test func aProofOfAnotherProductIsTheAppsDecision() async throws {
        try await KitFixture.run { fixture in
            let bought = try await fixture.control.purchase(KitFixture.book)
            var purchase = bought.withSignedTransaction()
            purchase.productID = KitFixture.big
            let outcome = try await fixture.delivery().deliver(purchase)
            #expect(outcome.code == "product_mismatch", "\(outcome)")
            #expect(outcome.transactionAction == .appDecides)
        }
    }

    @Test func aReceiptOfAnotherAppIsTheAppsDecision() async throws {
        try await KitFixture.run { fixture in
            let bought = try await fixture.control.purchase(["productId": KitFixture.book, "bundleId": "com.example.other"])
            let outcome = try await fixture.delivery().deliver(bought.withReceipt())
            #expect(outcome.code == "bundle_mismatch", "\(outcome)")
            #expect(outcome.transactionAction == .appDecides)
        }
    }

    @Test func aStaleReceiptIsRefreshedThenRetriedOnce() async throws {
        try await KitFixture.run { fixture in
            // The App Store answers with every purchase of the receipt's device: a receipt that
            // does not list the purchase is one from before it on another device.
            let first = try await fixture.control.purchase(["productId": KitFixture.book, "deviceId": "device-b"])
            let second = try await fixture.control.purchase(["productId": KitFixture.big, "deviceId": "device-a"])
            let delivery = try fixture.delivery()
            var stale = second.withReceipt()
            stale.proof = .appReceipt(Data(base64Encoded: first.receiptData, options: .ignoreUnknownCharacters)!)
            let outcome = await delivery.deliver(stale)
            #expect(outcome.code == "transaction_not_in_receipt", "\(outcome)")
            #expect(outcome.transactionAction == .refreshReceiptAndRetryOnce)
            // The refreshed receipt lists it.
            #expect(await delivery.deliver(second.withReceipt()).code == "delivered")
            let intact = fixture.holds(KitFixture.big, KitFixture.bigBytes)
            #expect(intact)

            // Once refreshed, a receipt that still lacks the purchase is the app's decision.
            let third = try await fixture.control.purchase(["productId": KitFixture.book, "deviceId": "device-c"])
            var staleAgain = third.withReceipt()
            staleAgain.proof = stale.proof
            #expect(await delivery.deliver(staleAgain).transactionAction == .refreshReceiptAndRetryOnce)
            let again = await delivery.deliver(staleAgain)
            #expect(again.transactionAction == .appDecides, "\(again)")
        }
    }

    @Test func aRateLimitKeepsThePurchaseUnfinishedForRetryAfterAlsoAfterARelaunch() async throws {
        try await KitFixture.run({ $0.upstreamRate = UpstreamRate(requests: 1, per: .seconds(3600)) }) { fixture in
            let first = try await fixture.control.purchase(KitFixture.book)
            let second = try await fixture.control.purchase(KitFixture.big)
            let events = EventLog()
            let delivery = try fixture.delivery(events: events)
            #expect(await delivery.deliver(first.withReceipt()).code == "delivered")
            let limited = await delivery.deliver(second.withReceipt())
            guard case .retryLater(let after, let reason) = limited else { Issue.record("\(limited)"); return }
            #expect(reason.code == "rate_limited")
            #expect(after > .seconds(60), "the server's Retry-After, not the client's backoff")
            let relaunched = try fixture.delivery(events: events)
            guard case .retryLater(let stillAfter, _) = await relaunched.deliver(second.withReceipt()) else {
                Issue.record("not waiting"); return
            }
            #expect(stillAfter <= after)
            #expect(events.requests.filter { $0.hasPrefix("POST") } == ["POST 200", "POST 429"], "no request before Retry-After")
        }
    }

    @Test func aServerOutOfReachKeepsThePurchaseUnfinished() async throws {
        try await KitFixture.run { fixture in
            let purchase = try await fixture.control.purchase(KitFixture.book).withReceipt()
            fixture.proxy.refuse(true)
            let outcome = try await fixture.delivery(maximumInterruptions: 1).deliver(purchase)
            #expect(outcome.code == "network")
            #expect(outcome.transactionAction == .keepUnfinishedAndRetry)
        }
    }

    static func message(_ outcome: DeliveryOutcome) -> String {
        if case .refused(let reason) = outcome { return reason.message }
        return ""
    }

    // MARK: The mapping on its own, row by row

    static func map(_ status: Int, _ code: String?, retryAfter: Duration? = nil, receipt: Bool = true, refreshed: Bool = false)
        -> DeliveryOutcome
    {
        ServerAnswer.outcome(
            status: status, code: code, message: "m", retryAfter: retryAfter, failures: 0, proofIsReceipt: receipt,
            receiptRefreshed: refreshed)
    }

    @Test func everyAnswerMapsToOneAction() {
        #expect(Self.map(403, "revoked").transactionAction == .finish)
        for (status, code) in [
            (503, "upstream_unavailable"), (429, "rate_limited"), (429, "too_many_downloads"), (500, nil), (502, nil),
            (503, "ledger_unavailable"), (503, "content_changing"),
        ] {
            #expect(Self.map(status, code).transactionAction == .keepUnfinishedAndRetry, "\(status) \(code ?? "")")
        }
        #expect(
            Self.map(503, "upstream_unavailable", retryAfter: .seconds(42))
                == .retryLater(after: .seconds(42), OutcomeReason(code: "upstream_unavailable", message: "m", status: 503)))
        #expect(
            Self.map(503, nil) == .retryLater(after: .seconds(2), OutcomeReason(code: "server_error", message: "m", status: 503)),
            "no Retry-After: the backoff")
        for code in ["receipt_malformed", "transaction_not_in_receipt", "product_not_in_receipt", "receipt_empty"] {
            #expect(Self.map(403, code).transactionAction == .refreshReceiptAndRetryOnce, "\(code)")
            #expect(Self.map(403, code, refreshed: true).transactionAction == .appDecides, "\(code) after a refresh")
            #expect(Self.map(403, code, receipt: false).transactionAction == .appDecides, "\(code) with a signed transaction")
        }
        for (status, code) in [
            (409, "transaction_claimed"), (403, "product_mismatch"), (403, "bundle_mismatch"), (403, "subscription_expired"),
            (403, "sandbox_not_allowed"),
            (403, "receipt_not_authentic"), (403, "jws_bad_chain"), (404, "unknown_product"), (400, "bad_request"), (413, "body_too_large"),
        ] {
            #expect(Self.map(status, code).transactionAction == .appDecides, "\(code)")
        }
    }

    @Test func retryAfterIsReadAsSecondsOrAnHTTPDate() {
        let now = Date(timeIntervalSince1970: 1_700_000_000)
        #expect(ServerAnswer.retryAfter("120", now: now) == .seconds(120))
        #expect(ServerAnswer.retryAfter("0", now: now) == .seconds(1))
        #expect(ServerAnswer.retryAfter("Tue, 14 Nov 2023 22:15:20 GMT", now: now) == .seconds(120))
        #expect(ServerAnswer.retryAfter("soon", now: now) == nil)
        #expect(Backoff.delay(afterFailures: 1) == .seconds(2))
        #expect(Backoff.delay(afterFailures: 4) == .seconds(16))
        #expect(Backoff.delay(afterFailures: 40) == .seconds(3600))
    }
}

extension Duration {
    var timeInterval: TimeInterval {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
