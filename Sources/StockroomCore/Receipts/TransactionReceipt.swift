import Foundation

/// An iOS 6 *transaction receipt* (`SKPaymentTransaction.transactionReceipt`), read locally
/// without trusting it: an ASCII property list whose `purchase-info` is base64 of another one.
///
/// Only the App Store can verify it (its `signature` is Apple's); what it says is a claim.
/// See https://developer.apple.com/library/archive/releasenotes/General/ValidateAppStoreReceipt/Chapters/ValidateRemotely.html
public struct TransactionReceipt: Sendable, Equatable {
    /// `signature`: base64 of the store's signature, as sent.
    public var signature: String?
    /// `purchase-info`: base64 of the purchase's own property list, as sent.
    public var purchaseInfoText: String
    /// `environment`: `Sandbox` when present; production receipts leave it out.
    public var environment: String?
    /// `pod` and `signing-status`: Apple's bookkeeping, shown by `receipt inspect`, never checked.
    public var pod: String?
    public var signingStatus: String?
    /// The purchase `purchase-info` describes.
    public var purchase: PurchaseInfo

    /// The fields of `purchase-info` Stockroom reads; `fields` keeps every string field.
    public struct PurchaseInfo: Sendable, Equatable {
        public var transactionID: String
        public var originalTransactionID: String?
        public var productID: String?
        /// `bid`: the app's bundle ID.
        public var bundleID: String?
        /// `bvrs`: the app's version.
        public var bundleVersion: String?
        public var purchaseDate: Int64?
        public var expiresDate: Int64?
        public var quantity: String?
        public var itemID: String?
        public var uniqueIdentifier: String?
        public var fields: [String: String]

        init?(_ list: ASCIIPropertyList) {
            guard case .dictionary(let entries) = list, let transactionID = list["transaction-id"], Self.isIdentifier(transactionID) else {
                return nil
            }
            self.transactionID = transactionID
            originalTransactionID = list["original-transaction-id"].flatMap { Self.isIdentifier($0) ? $0 : nil }
            productID = list["product-id"]
            bundleID = list["bid"]
            bundleVersion = list["bvrs"]
            purchaseDate = list["purchase-date-ms"].flatMap { Milliseconds.parse($0) }
            expiresDate = (list["expires-date"] ?? list["expires-date-ms"]).flatMap { Milliseconds.parse($0) }
            quantity = list["quantity"]
            itemID = list["item-id"]
            uniqueIdentifier = list["unique-identifier"]
            fields = entries.compactMapValues { value in
                if case .string(let text) = value { return text }
                return nil
            }
        }

        /// Transaction IDs are short runs of visible ASCII (Apple's are digits).
        static func isIdentifier(_ text: String) -> Bool {
            (1...64).contains(text.utf8.count) && text.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F }
        }
    }

    /// The receipt in `bytes` (the base64-decoded text a client sent); nil unless it is a
    /// property list with a `purchase-info` that decodes to a list holding a `transaction-id`.
    public static func parse(_ bytes: [UInt8]) -> TransactionReceipt? {
        // Cheap refusal first: a property list's first non-blank byte is "{".
        guard let first = bytes.first(where: { !(0x09...0x0D).contains($0) && $0 != 0x20 }), first == UInt8(ascii: "{"),
            let outer = ASCIIPropertyList.parse(bytes), let infoText = outer["purchase-info"],
            let infoBytes = ByteEncoding.decodeBase64(infoText), let info = ASCIIPropertyList.parse(infoBytes),
            let purchase = PurchaseInfo(info)
        else { return nil }
        return TransactionReceipt(
            signature: outer["signature"], purchaseInfoText: infoText, environment: outer["environment"], pod: outer["pod"],
            signingStatus: outer["signing-status"], purchase: purchase)
    }

    /// The receipt in base64 `text`, as a client sends it.
    public static func parse(base64 text: String) -> TransactionReceipt? {
        guard text.utf8.count <= ReceiptProof.maximumLength, let bytes = ByteEncoding.decodeBase64(text) else { return nil }
        return parse(bytes)
    }

    /// The environment the receipt claims: `Sandbox`, or production when it does not say.
    public var claimedEnvironment: StoreEnvironment {
        environment?.lowercased() == "sandbox" ? .sandbox : .production
    }

    /// The bytes the store signs: the environment and the purchase info exactly as sent.
    public static func signedBytes(purchaseInfoText: String, environment: String?) -> [UInt8] {
        Array("environment=\(environment ?? "");purchase-info=\(purchaseInfoText)".utf8)
    }

    /// Writes `fields` as an ASCII property list, Apple's layout: one `"key" = "value";` a line.
    public static func write(_ fields: [(String, String)]) -> [UInt8] {
        var text = "{\n"
        for (key, value) in fields { text += "\t\(quote(key)) = \(quote(value));\n" }
        text += "}"
        return Array(text.utf8)
    }

    private static func quote(_ text: String) -> String {
        var out = "\""
        for character in text {
            switch character {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            default: out.append(character)
            }
        }
        return out + "\""
    }
}
