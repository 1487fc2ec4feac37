import AppStoreSimulator
import Foundation
import StockroomTestSupport
import Testing
@testable import StockroomCore

/// Subscriptions end: app receipts (`expires_date_ms`), transaction receipts (21006) and
/// StoreKit 2 (`expiresDate`), judged by an injectable clock.
@Suite struct ExpiryTests {
    static let book = VerifyReceiptClientTests.book

    /// The same upstream, judged at `offset` from now.
    static func verifier(_ base: AppStoreReceiptVerifier, judgedAt offset: TimeInterval) -> AppStoreReceiptVerifier {
        AppStoreReceiptVerifier(client: base.client, bundleID: base.bundleID, cacheInterval: .zero, now: { Date() + offset })
    }

    @Test func anAppReceiptSubscriptionIsValidUntilItsExpiryAndExpiredAfter() async throws {
        try await VerifyReceiptClientTests.withSimulator { control, verifier in
            let purchase = try await control.purchase(json: ["productId": Self.book, "expiresInSeconds": 3600])
            #expect(purchase.type == "Auto-Renewable Subscription")
            let expires = try #require(purchase.expiresDate)
            let request = VerificationRequest(receiptData: purchase.receiptData, productID: Self.book)
            guard case .valid(let receipt) = await verifier.verify(request, freshness: .upstreamOnly) else {
                Issue.record("not valid now"); return
            }
            #expect(receipt.transaction?.expiresDate == expires)

            let later = await Self.verifier(verifier, judgedAt: 7200).verify(request, freshness: .upstreamOnly)
            guard case .invalid(.expired(let transaction)) = later else { Issue.record("\(later)"); return }
            #expect(transaction.transactionID == purchase.transactionId)
        }
    }

    @Test func anAppReceiptWhoseSubscriptionHasEndedIsExpired() async throws {
        try await VerifyReceiptClientTests.withSimulator { control, verifier in
            let purchase = try await control.purchase(json: [
                "productId": Self.book, "type": "Non-Renewing Subscription", "expiresInSeconds": -1,
            ])
            let request = VerificationRequest(
                receiptData: purchase.receiptData, productID: Self.book, transactionID: purchase.transactionId)
            let verdict = await verifier.verify(request, freshness: .upstreamOnly)
            guard case .invalid(.expired) = verdict else { Issue.record("\(verdict)"); return }
            // The receipt itself carries the expiry (attribute 1708).
            let local = try #require(AppReceipt.readUntrusted(base64: purchase.receiptData))
            #expect(local.purchases.first?.expiresDate != nil)
        }
    }

    @Test func aRenewalIsChosenOverTheLapsedPeriodBeforeIt() {
        let now = Date()
        let lapsed = ReceiptTransaction(
            transactionID: "1", originalTransactionID: "1", productID: "p.q", purchaseDate: Milliseconds.of(now) - 2_000,
            expiresDate: Milliseconds.of(now) - 1_000)
        let renewal = ReceiptTransaction(
            transactionID: "2", originalTransactionID: "1", productID: "p.q", purchaseDate: Milliseconds.of(now) - 3_000,
            expiresDate: Milliseconds.of(now) + 60_000)
        let receipt = VerifyReceiptAnswer(environment: .production, bundleID: "a.b", inApp: [lapsed], latestReceiptInfo: [renewal])
        let verdict = AppStoreReceiptVerifier.check(
            receipt, VerificationRequest(receiptData: "", productID: "p.q"), bundleID: "a.b", now: now)
        guard case .valid(let verified) = verdict else { Issue.record("\(verdict)"); return }
        #expect(verified.transaction?.transactionID == "2")
        let named = AppStoreReceiptVerifier.check(
            receipt, VerificationRequest(receiptData: "", productID: "p.q", transactionID: "1"), bundleID: "a.b", now: now)
        #expect(named == .invalid(.expired(lapsed)))
    }

    @Test func the21006FlagIsExpiredWhateverOurClockSays() {
        let transaction = ReceiptTransaction(transactionID: "1", originalTransactionID: "1", productID: "p.q", purchaseDate: 0)
        var receipt = VerifyReceiptAnswer(environment: .production, bundleID: "a.b", inApp: [transaction], latestReceiptInfo: [])
        receipt.subscriptionExpired = true
        #expect(
            AppStoreReceiptVerifier.check(receipt, VerificationRequest(receiptData: ""), bundleID: "a.b") == .invalid(.expired(transaction))
        )
        #expect(
            AppStoreReceiptVerifier.check(receipt, VerificationRequest(receiptData: ""), bundleID: "x.y")
                == .invalid(.bundleMismatch(expected: "x.y", actual: "a.b")))
    }

    @Test func aStoreKit2SubscriptionCarriesItsTypeAndExpiry() async throws {
        try await VerifyReceiptClientTests.withSimulator { control, _ in
            let current = try await control.purchase(json: ["productId": Self.book, "expiresInSeconds": 600])
            let ended = try await control.purchase(json: ["productId": Self.book, "expiresInSeconds": -600])
            let pem = String(buffer: try await control.client.execute(uri: "/sim/root.pem", method: .get).body)
            let verifier = SignedTransactionVerifier(
                root: try Certificate(pem: pem), bundleID: VerifyReceiptClientTests.bundleID, environment: nil)
            let live = try verifier.verify(current.signedTransaction).get()
            #expect(live.type == "Auto-Renewable Subscription")
            #expect(live.expiresDate == current.expiresDate)
            #expect(!live.isExpired(at: Date()))
            #expect(live.isExpired(at: Date() + 601))
            #expect(try verifier.verify(ended.signedTransaction).get().isExpired(at: Date()))
        }
    }

    @Test(
        arguments: [
            ["productId": "com.example.stockroom.demo.book1", "expiresInSeconds": 60, "type": "Non-Consumable"],
            ["productId": "com.example.stockroom.demo.book1", "expiresInSeconds": 400_000_000],
            ["productId": "com.example.stockroom.demo.book1", "type": "Lifetime"],
            ["productId": "com.example.stockroom.demo.book1", "receiptStyle": "carbon-copy"],
        ] as [[String: any Sendable]])
    func theSimulatorRefusesImpossibleSubscriptions(fields: [String: any Sendable]) async throws {
        try await VerifyReceiptClientTests.withSimulator { control, _ in
            do {
                _ = try await control.purchase(json: fields)
                Issue.record("accepted \(fields)")
            } catch let error as SimulatorControlError {
                #expect(error.status == 400)
            }
        }
    }
}
