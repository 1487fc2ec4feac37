import AppStoreSimulator
import Foundation
import StockroomTestSupport
import Testing
@testable import StockroomCore

/// iOS 6 transaction receipts: read locally (bounded, never trapping), verified through the
/// live simulator in Apple's legacy answer shape.
@Suite struct TransactionReceiptTests {
    /// The layout of a transaction receipt from Apple's sandbox (identifiers changed).
    static let purchaseInfo = #"""
        {
        	"original-purchase-date-pst" = "2012-04-30 08:05:55 America/Los_Angeles";
        	"unique-identifier" = "0000b0090000";
        	"original-transaction-id" = "1000000046178817";
        	"bvrs" = "20120427";
        	"transaction-id" = "1000000046178817";
        	"quantity" = "1";
        	"original-purchase-date-ms" = "1335798355868";
        	"product-id" = "com.example.stockroom.demo.book1";
        	"item-id" = "521129812";
        	"bid" = "com.example.stockroom.demo";
        	"purchase-date-ms" = "1335798355868";
        	"purchase-date" = "2012-04-30 15:05:55 Etc/GMT";
        	"purchase-date-pst" = "2012-04-30 08:05:55 America/Los_Angeles";
        	"original-purchase-date" = "2012-04-30 15:05:55 Etc/GMT";
        }
        """#

    static func outer(_ info: String, extra: String = "\t\"environment\" = \"Sandbox\";\n") -> String {
        let encoded = ByteEncoding.base64(Array(info.utf8))
        return
            """
            {\n\t\"signature\" = \"AoL5bAQx\";\n\t\"purchase-info\" = \"\(encoded)\";\n\(extra)\t\"pod\" = \
            \"100\";\n\t\"signing-status\" = \"0\";\n}
            """
    }

    @Test func applesLayoutIsReadWithoutTrustingIt() throws {
        let receipt = try #require(TransactionReceipt.parse(Array(Self.outer(Self.purchaseInfo).utf8)))
        #expect(receipt.environment == "Sandbox")
        #expect(receipt.claimedEnvironment == .sandbox)
        #expect(receipt.pod == "100")
        #expect(receipt.signingStatus == "0")
        #expect(receipt.purchase.transactionID == "1000000046178817")
        #expect(receipt.purchase.originalTransactionID == "1000000046178817")
        #expect(receipt.purchase.productID == "com.example.stockroom.demo.book1")
        #expect(receipt.purchase.bundleID == "com.example.stockroom.demo")
        #expect(receipt.purchase.bundleVersion == "20120427")
        #expect(receipt.purchase.purchaseDate == 1_335_798_355_868)
        #expect(receipt.purchase.itemID == "521129812")
        #expect(receipt.purchase.fields["purchase-date-pst"] == "2012-04-30 08:05:55 America/Los_Angeles")

        let proof = try #require(ReceiptProof.parse(ByteEncoding.base64(Array(Self.outer(Self.purchaseInfo).utf8))))
        #expect(proof.kind == .transactionReceipt)
        #expect(proof.claimedBundleID == "com.example.stockroom.demo")
        #expect(proof.claimedEnvironment == .sandbox)
        #expect(
            proof.claims == [
                ClaimedPurchase(
                    transactionID: "1000000046178817", originalTransactionID: "1000000046178817",
                    productID: "com.example.stockroom.demo.book1",
                    purchaseDate: Date(timeIntervalSince1970: 1_335_798_355.868))
            ])
    }

    @Test func aMinimalReceiptWithOnlyATransactionIDIsRead() throws {
        let minimal = "{\"purchase-info\"=\"\(ByteEncoding.base64(Array("{\"transaction-id\"=\"42\";}".utf8)))\";}"
        let receipt = try #require(TransactionReceipt.parse(Array(minimal.utf8)))
        #expect(receipt.purchase.transactionID == "42")
        #expect(receipt.purchase.productID == nil)
        #expect(receipt.claimedEnvironment == .production)
        let proof = try #require(ReceiptProof.parse(ByteEncoding.base64(Array(minimal.utf8))))
        #expect(proof.claims.map(\.originalTransactionID) == ["42"])
        #expect(proof.claimedBundleID == nil)
    }

    @Test func escapesCommentsBareWordsAndNestingAreUnderstood() throws {
        let info =
            #"""
            { /* a comment */ "transaction-id" = 1000000000000009; "product-id" = "a.\"b\"\\c\U00e9\101"; nested = { list = (x, "y", \#
            ); }; }
            """#
        let receipt = try #require(TransactionReceipt.parse(Array(Self.outer(info, extra: "").utf8)))
        #expect(receipt.purchase.transactionID == "1000000000000009")
        #expect(receipt.purchase.productID == "a.\"b\"\\cé" + "A")
        #expect(receipt.environment == nil)
    }

    @Test(arguments: [
        "{}", "{ \"purchase-info\" = \"garbage!\"; }", "{ \"purchase-info\" = \"\(ByteEncoding.base64(Array("{}".utf8)))\"; }",
        "{ \"purchase-info\" = \"\(ByteEncoding.base64(Array("{\"transaction-id\"=\"\";}".utf8)))\"; }",
        "{ \"purchase-info\" = \"\(ByteEncoding.base64(Array("{\"transaction-id\"=(1);}".utf8)))\"; }",
        "{ \"purchase-info\" = \"\(ByteEncoding.base64(Array("{\"transaction-id\"=\"1\"}".utf8)))\"; }",
        "{ \"purchase-info\" = \"unterminated; }", "{ \"a\" = \"b\" }", "( \"purchase-info\" )", "{ \"a\" = \"b\"; } trailing",
        "{ \"purchase-info\" = \"\\U\"; }", "{ \"purchase-info\" = \"\(ByteEncoding.base64(Array("{\"transaction-id\"=\"1\";}".utf8)))\"; ",
    ])
    func garbageInTheSameFormatIsRefused(text: String) {
        #expect(TransactionReceipt.parse(Array(text.utf8)) == nil)
        #expect(ReceiptProof.parse(ByteEncoding.base64(Array(text.utf8))) == nil)
    }

    @Test func nestingAndSizeAreBounded() {
        let deep = String(repeating: "{a=", count: 10_000) + "b" + String(repeating: ";}", count: 10_000)
        #expect(ASCIIPropertyList.parse(Array(deep.utf8)) == nil)
        let deepArrays = String(repeating: "(", count: 100_000)
        #expect(ASCIIPropertyList.parse(Array(deepArrays.utf8)) == nil)
        let wide = "(" + String(repeating: "a,", count: 5000) + ")"
        #expect(ASCIIPropertyList.parse(Array(wide.utf8)) == nil)
        #expect(ASCIIPropertyList.parse(Array(repeating: UInt8(ascii: " "), count: ASCIIPropertyList.maximumLength + 1)) == nil)
        #expect(ASCIIPropertyList.parse(Array("(a, b, c)".utf8)) == .array([.string("a"), .string("b"), .string("c")]))
    }

    /// 20,000 mutated and random receipts: refused or read, never a crash.
    @Test func mutatedAndRandomReceiptsNeverCrash() async {
        let valid = Array(Self.outer(Self.purchaseInfo).utf8)
        let alphabet = Array("{}();=\",\\/*ab01 \n\tU".utf8)
        var generator = SystemRandomNumberGenerator()
        var read = 0
        for round in 0..<20_000 {
            if round.isMultiple(of: 200) { await Task.yield() }
            var bytes =
                round % 2 == 0
                ? valid : (0..<Int.random(in: 0...200, using: &generator)).map { _ in alphabet.randomElement(using: &generator)! }
            for _ in 0..<Int.random(in: 0...4, using: &generator) where !bytes.isEmpty {
                let index = Int.random(in: 0..<bytes.count, using: &generator)
                switch Int.random(in: 0..<3, using: &generator) {
                case 0: bytes[index] = alphabet.randomElement(using: &generator)!
                case 1: bytes.remove(at: index)
                default: bytes.insert(UInt8.random(in: 0...255, using: &generator), at: index)
                }
            }
            if TransactionReceipt.parse(bytes) != nil { read += 1 }
            _ = ASCIIPropertyList.parse(bytes)
        }
        #expect(read > 0, "unharmed and harmlessly mutated receipts still read")
    }
}
