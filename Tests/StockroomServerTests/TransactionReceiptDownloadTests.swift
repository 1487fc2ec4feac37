import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import StockroomCore
import StockroomTestSupport
import Testing
@testable import StockroomServer

/// Issue 12: iOS 6 transaction receipts (`SKPaymentTransaction.transactionReceipt`) served
/// exactly as app receipts, through a live server and the simulator.
@Suite struct TransactionReceiptDownloadTests {
    static let adminToken = "admin-token-0123456789abcdef-0123456789"

    static func fields(_ purchase: SimulatorControl.Purchase, product: String) throws -> [String: String] {
        ["productId": product, "transactionId": purchase.transactionId, "receiptData": try #require(purchase.transactionReceipt)]
    }

    @Test func purchaseDownloadInterruptResumeAckAndRefulfil() async throws {
        try await DownloadFixture.run({ $0.adminToken = Self.adminToken }) { fixture in
            let purchase = try await fixture.control.transactionPurchase("com.example.big")
            let body = try JSONSerialization.data(withJSONObject: try Self.fields(purchase, product: "com.example.big"))
            // The connection breaks after 256 KiB.
            let impatient = CurlHTTPClient(configuration: .init(maximumResponseBytes: 256 * 1024))
            await #expect(throws: UpstreamError.responseTooLarge(limit: 256 * 1024)) {
                _ = try await impatient.send(
                    UpstreamRequest(method: .post, url: "http://127.0.0.1:\(fixture.client.port!)/v1/downloads", body: Array(body)))
            }
            #expect(try await fixture.eventually { try await !fixture.ledger.attempts(of: purchase.transactionId).isEmpty })
            let row = try #require(try await fixture.ledger.fulfilment(purchase.transactionId))
            #expect(row.state.isEntitled && row.productID == "com.example.big" && row.proofKind == .receipt)

            // The app POSTs again for a token, then resumes from the bytes it holds.
            let again = try await fixture.post(try Self.fields(purchase, product: "com.example.big"))
            let token = try #require(again.headers[.init("X-Download-Token")!])
            let held = 256 * 1024
            let rest = try await fixture.get(
                "/v1/downloads/\(purchase.transactionId)/content", token: token, headers: [.range: "bytes=\(held)-"])
            #expect(rest.status == .partialContent)
            #expect(Array(buffer: rest.body) == Array(ServerFixture.big[held...]))
            #expect(try await fixture.eventually { try await fixture.ledger.fulfilment(purchase.transactionId)?.state == .delivered })
            #expect(try await fixture.ack(purchase.transactionId, token: token).status == .ok)

            let refulfil = try await fixture.admin(.post, "fulfilments/\(purchase.transactionId)/refulfil", token: Self.adminToken)
            #expect(try DownloadFixture.json(refulfil)["outcome"] as? String == "verified", "the stored transaction receipt re-verifies")
            #expect(try await fixture.ledger.fulfilment(purchase.transactionId)?.state == .acknowledged)
        }
    }

    @Test func aSandboxTransactionReceiptFallsBackWithExactlyTwoUpstreamCalls() async throws {
        try await DownloadFixture.run { fixture in
            let purchase = try await fixture.control.transactionPurchase(DownloadFixture.book, environment: "Sandbox")
            let response = try await fixture.post(try Self.fields(purchase, product: DownloadFixture.book))
            #expect(response.status == .ok)
            #expect(Array(buffer: response.body) == ServerFixture.book)
            #expect(try await fixture.control.calls() == .init(production: 1, sandbox: 1, total: 2))
            #expect(try await fixture.ledger.fulfilment(purchase.transactionId)?.environment == .sandbox)
        }
    }

    @Test func aRefundedTransactionReceiptIsRefused() async throws {
        try await DownloadFixture.run { fixture in
            let purchase = try await fixture.control.transactionPurchase(DownloadFixture.book)
            try await fixture.control.refund(purchase.transactionId)
            let response = try await fixture.post(try Self.fields(purchase, product: DownloadFixture.book))
            #expect(response.status == .forbidden)
            #expect(try DownloadFixture.code(response) == "revoked")
            #expect(
                try await fixture.ledger.fulfilment(purchase.transactionId)?.state == .revoked,
                "recorded revoked, so the receipt cannot come back")
        }
    }

    @Test func anExpiredSubscriptionsTransactionReceiptIsRefused() async throws {
        try await DownloadFixture.run { fixture in
            let purchase = try await fixture.control.transactionPurchase(DownloadFixture.book, expiresInSeconds: -60)
            let response = try await fixture.post(try Self.fields(purchase, product: DownloadFixture.book))
            #expect(response.status == .forbidden)
            #expect(try DownloadFixture.code(response) == "subscription_expired")
            #expect(try await fixture.snapshot() == [])
        }
    }

    @Test func garbageInTheSameFormatIsRefusedWithoutAskingApple() async throws {
        try await DownloadFixture.run { fixture in
            let plists = [
                #"{ "signature" = "AAAA"; "purchase-info" = "not base64 at all"; "pod" = "100"; "signing-status" = "0"; }"#,
                #"{ "signature" = "AAAA"; "purchase-info" = "\#(ByteEncoding.base64(Array("{ \"bid\" = \"x\"; }".utf8)))"; }"#,
                #"{ "purchase-info" = "#,
                String(repeating: "{ \"a\" = ", count: 5000),
            ]
            for plist in plists {
                let response = try await fixture.post(
                    [
                        "productId": DownloadFixture.book, "transactionId": "2000000000000001",
                        "receiptData": ByteEncoding.base64(Array(plist.utf8)),
                    ])
                #expect(response.status == .forbidden)
                #expect(try DownloadFixture.code(response) == "receipt_malformed")
            }
            #expect(try await fixture.control.calls().total == 0)
            #expect(try await fixture.snapshot() == [])
        }
    }

    @Test func duringAnOutageATransactionReceiptIsKeptUnderItsOwnTransactionID() async throws {
        try await DownloadFixture.run { fixture in
            let purchase = try await fixture.control.transactionPurchase(DownloadFixture.book)
            try await fixture.control.fault(["kind": "http-status", "status": 503, "count": 100])
            let response = try await fixture.post([
                "productId": DownloadFixture.book, "receiptData": try #require(purchase.transactionReceipt),
            ])
            #expect(response.status == .serviceUnavailable)
            let kept = try await fixture.ledger.pendingProofs(status: .pending, limit: 10)
            #expect(kept.map(\.transactionID) == [purchase.transactionId])
            #expect(try await fixture.snapshot() == [])
        }
    }
}
