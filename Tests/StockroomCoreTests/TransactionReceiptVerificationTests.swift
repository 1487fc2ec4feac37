import AppStoreSimulator
import Foundation
import StockroomTestSupport
import Testing
@testable import StockroomCore

/// iOS 6 transaction receipts verified through real libcurl against the live simulator, which
/// answers them in Apple's legacy shape (no `in_app`, `bid`, single-object latest info).
@Suite struct TransactionReceiptVerificationTests {
    static let book = VerifyReceiptClientTests.book

    static func request(_ purchase: SimulatorControl.Purchase, product: String? = book, transaction: String? = nil) throws
        -> VerificationRequest
    {
        VerificationRequest(receiptData: try #require(purchase.transactionReceipt), productID: product, transactionID: transaction)
    }

    @Test func aProductionTransactionReceiptVerifiesWithOneCall() async throws {
        try await VerifyReceiptClientTests.withSimulator { control, verifier in
            let purchase = try await control.transactionPurchase()
            let transactionReceipt = try #require(purchase.transactionReceipt)
            let proof = try #require(ReceiptProof.parse(transactionReceipt))
            #expect(proof.kind == .transactionReceipt)
            #expect(proof.claims.map(\.transactionID) == [purchase.transactionId])
            let verdict = await verifier.verify(
                proof, productID: Self.book, transactionID: purchase.transactionId, freshness: .upstreamOnly)
            guard case .valid(let receipt) = verdict else { Issue.record("\(verdict)"); return }
            #expect(receipt.environment == .production)
            #expect(receipt.bundleID == VerifyReceiptClientTests.bundleID)
            #expect(receipt.transaction?.transactionID == purchase.transactionId)
            #expect(receipt.transaction?.productID == Self.book)
            let calls = try await control.calls()
            #expect(calls == .init(production: 1, sandbox: 0, total: 1))
        }
    }

    @Test func aSandboxTransactionReceiptFallsBackWithExactlyTwoCalls() async throws {
        try await VerifyReceiptClientTests.withSimulator { control, verifier in
            let purchase = try await control.transactionPurchase(environment: "Sandbox")
            #expect(ReceiptProof.parse(try #require(purchase.transactionReceipt))?.claimedEnvironment == .sandbox)
            let verdict = await verifier.verify(try Self.request(purchase), freshness: .upstreamOnly)
            guard case .valid(let receipt) = verdict else { Issue.record("\(verdict)"); return }
            #expect(receipt.environment == .sandbox)
            let calls = try await control.calls()
            #expect(calls == .init(production: 1, sandbox: 1, total: 2))
        }
    }

    @Test func aRefundedTransactionReceiptIsRevoked() async throws {
        try await VerifyReceiptClientTests.withSimulator { control, verifier in
            let purchase = try await control.transactionPurchase()
            try await control.refund(purchase.transactionId)
            let verdict = await verifier.verify(try Self.request(purchase), freshness: .upstreamOnly)
            guard case .invalid(.revoked(let transaction)) = verdict else { Issue.record("\(verdict)"); return }
            #expect(transaction.transactionID == purchase.transactionId)
        }
    }

    @Test func anExpiredSubscriptionReceiptIs21006AndExpired() async throws {
        try await VerifyReceiptClientTests.withSimulator { control, verifier in
            let purchase = try await control.transactionPurchase(expiresInSeconds: -60)
            let verdict = await verifier.verify(try Self.request(purchase), freshness: .upstreamOnly)
            guard case .invalid(.expired(let transaction)) = verdict else { Issue.record("\(verdict)"); return }
            #expect(transaction.transactionID == purchase.transactionId)
            #expect(transaction.expiresDate == purchase.expiresDate)
            #expect(RejectionReason.expired(transaction).code == "subscription_expired")
            let calls = try await control.calls().total
            #expect(calls == 1)
        }
    }

    @Test func aCurrentSubscriptionReceiptIsValidUntilItsExpiry() async throws {
        try await VerifyReceiptClientTests.withSimulator { control, verifier in
            let purchase = try await control.transactionPurchase(expiresInSeconds: 3600)
            let verdict = await verifier.verify(try Self.request(purchase), freshness: .upstreamOnly)
            guard case .valid(let receipt) = verdict else { Issue.record("\(verdict)"); return }
            #expect(receipt.transaction?.expiresDate == purchase.expiresDate)
        }
    }

    @Test func anAlteredTransactionReceiptIsNotAuthentic() async throws {
        try await VerifyReceiptClientTests.withSimulator { control, verifier in
            let purchase = try await control.transactionPurchase()
            let transactionReceipt = try #require(purchase.transactionReceipt)
            let receipt = try #require(TransactionReceipt.parse(base64: transactionReceipt))
            // Claim another product under the genuine signature.
            let info = String(decoding: try #require(ByteEncoding.decodeBase64(receipt.purchaseInfoText)), as: UTF8.self)
                .replacingOccurrences(of: Self.book, with: "com.example.stockroom.demo.level2")
            let forged = TransactionReceipt.write([
                ("signature", try #require(receipt.signature)), ("purchase-info", ByteEncoding.base64(Array(info.utf8))),
                ("pod", "100"), ("signing-status", "0"),
            ])
            let verdict = await verifier.verify(VerificationRequest(receiptData: ByteEncoding.base64(forged)), freshness: .upstreamOnly)
            #expect(verdict == .invalid(.notAuthentic))
            let calls = try await control.calls().total
            #expect(calls == 1)
        }
    }

    @Test func garbageInTheSameFormatIsRefusedWithNoUpstreamCall() async throws {
        try await VerifyReceiptClientTests.withSimulator { control, verifier in
            for text in ["{ \"purchase-info\" = \"AAAA\"; }", "{ \"signature\" = \"x\"; \"pod\" = \"100\"; }", "{ \"purchase-info\" = \""] {
                let verdict = await verifier.verify(
                    VerificationRequest(receiptData: ByteEncoding.base64(Array(text.utf8))), freshness: .upstreamOnly)
                #expect(verdict == .invalid(.malformedReceipt))
            }
            let calls = try await control.calls().total
            #expect(calls == 0)
        }
    }

    @Test func aValidTransactionReceiptIsCached() async throws {
        try await VerifyReceiptClientTests.withSimulator(cacheInterval: .seconds(60)) { control, verifier in
            let purchase = try await control.transactionPurchase()
            for _ in 0..<3 {
                guard case .valid = await verifier.verify(try Self.request(purchase), freshness: .cachedAllowed) else {
                    Issue.record("not valid"); return
                }
            }
            let calls = try await control.calls().total
            #expect(calls == 1)
        }
    }

    @Test func retriesWorkForTransactionReceipts() async throws {
        try await VerifyReceiptClientTests.withSimulator { control, verifier in
            let purchase = try await control.transactionPurchase()
            try await control.fault(["kind": "http-status", "status": 503, "count": 2])
            guard case .valid = await verifier.verify(try Self.request(purchase), freshness: .upstreamOnly) else {
                Issue.record("not valid"); return
            }
            let calls = try await control.calls().total
            #expect(calls == 3)
        }
    }
}
