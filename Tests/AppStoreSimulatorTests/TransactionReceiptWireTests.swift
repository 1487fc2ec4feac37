import Foundation
import Hummingbird
import HummingbirdTesting
import StockroomCore
import StockroomTestSupport
import Testing
@testable import AppStoreSimulator

/// The simulator's iOS 6 transaction receipts and its answers for them in Apple's legacy shape.
@Suite struct TransactionReceiptWireTests {
    static let book = "com.example.stockroom.demo.book1"

    @Test func aTransactionReceiptIsApplesPropertyListSignedByTheSimulator() async throws {
        try await VerifyReceiptWireTests.live { control in
            let purchase = try await control.transactionPurchase()
            #expect(!purchase.receiptData.isEmpty, "the app receipt is still there")
            let transactionReceipt = try #require(purchase.transactionReceipt)
            let text = String(decoding: try #require(ByteEncoding.decodeBase64(transactionReceipt)), as: UTF8.self)
            #expect(text.hasPrefix("{\n\t\"signature\" = \""))
            #expect(text.contains("\"signing-status\" = \"0\";"))
            #expect(!text.contains("\"environment\""), "production receipts do not say")
            let receipt = try #require(TransactionReceipt.parse(base64: transactionReceipt))
            #expect(receipt.purchase.transactionID == purchase.transactionId)
            #expect(receipt.purchase.productID == Self.book)
            #expect(receipt.purchase.bundleID == "com.example.stockroom.demo")
            #expect(receipt.purchase.uniqueIdentifier == purchase.deviceId)
        }
    }

    @Test func itIsAnsweredInTheLegacyShape() async throws {
        try await VerifyReceiptWireTests.live { control in
            let purchase = try await control.transactionPurchase()
            let (status, body) = try await VerifyReceiptWireTests.verify(
                control, ["receipt-data": try #require(purchase.transactionReceipt)])
            #expect(status == .ok)
            #expect(body["status"] as? Int == 0)
            let receipt = try #require(body["receipt"] as? [String: Any])
            #expect(receipt["in_app"] == nil)
            #expect(receipt["bundle_id"] == nil)
            #expect(receipt["bid"] as? String == "com.example.stockroom.demo")
            #expect(receipt["bvrs"] as? String == "1")
            #expect(receipt["transaction_id"] as? String == purchase.transactionId)
            #expect(receipt["original_transaction_id"] as? String == purchase.originalTransactionId)
            #expect(receipt["product_id"] as? String == Self.book)
            #expect(receipt["quantity"] as? String == "1")
            #expect(Int64(receipt["purchase_date_ms"] as? String ?? "") != nil)
            #expect((receipt["item_id"] as? String)?.count == 9)
            #expect(receipt["unique_identifier"] as? String == purchase.deviceId)
        }
    }

    @Test func aSandboxOneIs21007AtProduction() async throws {
        try await VerifyReceiptWireTests.live { control in
            let purchase = try await control.transactionPurchase(environment: "Sandbox")
            let data = try #require(purchase.transactionReceipt)
            #expect(try await VerifyReceiptWireTests.verify(control, ["receipt-data": data]).1["status"] as? Int == 21007)
            #expect(
                try await VerifyReceiptWireTests.verify(control, path: "/sandbox/verifyReceipt", ["receipt-data": data]).1["status"] as? Int
                    == 0)
        }
    }

    @Test func alteredIs21003AndGarbageIs21002() async throws {
        try await VerifyReceiptWireTests.live { control in
            let purchase = try await control.transactionPurchase()
            let transactionReceipt = try #require(purchase.transactionReceipt)
            let text = String(decoding: try #require(ByteEncoding.decodeBase64(transactionReceipt)), as: UTF8.self)
            let altered = text.replacingOccurrences(of: "\"pod\" = \"100\";", with: "\"environment\" = \"Sandbox\";\n\t\"pod\" = \"100\";")
            #expect(altered != text)
            let (_, forged) = try await VerifyReceiptWireTests.verify(control, ["receipt-data": ByteEncoding.base64(Array(altered.utf8))])
            #expect(forged["status"] as? Int == 21003)
            let (_, garbage) = try await VerifyReceiptWireTests.verify(
                control, ["receipt-data": ByteEncoding.base64(Array("{ \"purchase-info\" = \"x\"; }".utf8))])
            #expect(garbage["status"] as? Int == 21002)
        }
    }

    @Test func aRefundShowsTheCancellation() async throws {
        try await VerifyReceiptWireTests.live { control in
            let purchase = try await control.transactionPurchase()
            try await control.refund(purchase.transactionId)
            let (_, body) = try await VerifyReceiptWireTests.verify(control, ["receipt-data": try #require(purchase.transactionReceipt)])
            let receipt = try #require(body["receipt"] as? [String: Any])
            #expect(Int64(receipt["cancellation_date_ms"] as? String ?? "") != nil)
            #expect((receipt["cancellation_date"] as? String)?.hasSuffix(" Etc/GMT") == true)
        }
    }

    @Test func anExpiredSubscriptionIs21006WithTheLatestExpiredInfo() async throws {
        try await VerifyReceiptWireTests.live { control in
            let purchase = try await control.transactionPurchase(expiresInSeconds: -5)
            let (_, body) = try await VerifyReceiptWireTests.verify(control, ["receipt-data": try #require(purchase.transactionReceipt)])
            #expect(body["status"] as? Int == 21006)
            let expired = try #require(body["latest_expired_receipt_info"] as? [String: Any], "one object, not an array")
            #expect(expired["expires_date"] as? String == purchase.expiresDate.map { String($0) })
            #expect(body["latest_receipt_info"] == nil)
            #expect((body["receipt"] as? [String: Any])?["transaction_id"] as? String == purchase.transactionId)
        }
    }

    @Test func aCurrentSubscriptionHasLatestReceiptInfoAsOneObject() async throws {
        try await VerifyReceiptWireTests.live { control in
            let purchase = try await control.transactionPurchase(expiresInSeconds: 600)
            let (_, body) = try await VerifyReceiptWireTests.verify(control, ["receipt-data": try #require(purchase.transactionReceipt)])
            #expect(body["status"] as? Int == 0)
            let latest = try #require(body["latest_receipt_info"] as? [String: Any])
            #expect(latest["transaction_id"] as? String == purchase.transactionId)
            #expect(body["latest_receipt"] as? String != nil)
        }
    }

    @Test func anAppReceiptCarriesExpiryInItsAnswer() async throws {
        try await VerifyReceiptWireTests.live { control in
            let purchase = try await control.purchase(json: ["productId": Self.book, "expiresInSeconds": 600])
            let (_, body) = try await VerifyReceiptWireTests.verify(control, ["receipt-data": purchase.receiptData])
            let inApp = try #require(((body["receipt"] as? [String: Any])?["in_app"] as? [[String: Any]])?.first)
            #expect(inApp["expires_date_ms"] as? String == purchase.expiresDate.map { String($0) })
            #expect((inApp["expires_date"] as? String)?.hasSuffix(" Etc/GMT") == true)
        }
    }
}
