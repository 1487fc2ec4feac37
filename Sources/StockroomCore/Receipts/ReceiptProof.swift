import Foundation

/// The kind of receipt a client sent.
public enum ReceiptKind: String, Sendable, Codable {
    /// A PKCS#7 app receipt (`Bundle.main.appStoreReceiptURL`).
    case appReceipt
    /// An iOS 6 transaction receipt (`SKPaymentTransaction.transactionReceipt`).
    case transactionReceipt
}

/// A purchase a receipt claims, read without verification: never authorises anything.
public struct ClaimedPurchase: Sendable, Equatable {
    public var transactionID: String
    public var originalTransactionID: String
    public var productID: String
    public var purchaseDate: Date?

    public init(transactionID: String, originalTransactionID: String, productID: String, purchaseDate: Date?) {
        self.transactionID = transactionID
        self.originalTransactionID = originalTransactionID
        self.productID = productID
        self.purchaseDate = purchaseDate
    }
}

/// A receipt as a client sent it, normalised and classified locally, trusted for nothing.
///
/// Normalising first means whitespace or base64url variants of one receipt share one digest,
/// hence one cache entry and one upstream call; classifying first means bytes that are no
/// receipt at all are refused without asking Apple.
public struct ReceiptProof: Sendable, Equatable {
    /// An app receipt or a transaction receipt, by its structure (not by anything it claims).
    public let kind: ReceiptKind
    /// Canonical base64 (whitespace removed, standard alphabet, padded): what is hashed,
    /// stored and sent upstream.
    public let text: String
    /// Hex SHA-256 of `text`: keys caches, single flight and the ledger's pending proofs.
    public let digest: String
    /// What the receipt claims, read without verification: never authorises anything.
    public let claims: [ClaimedPurchase]
    /// The bundle ID the receipt names (attribute 2, or `bid`), unverified.
    public let claimedBundleID: String?
    /// nil when the receipt does not say.
    public let claimedEnvironment: StoreEnvironment?

    /// The longest receipt text accepted (whitespace included): 1 MiB.
    public static let maximumLength = 1 << 20

    /// nil when `text` is not base64 of a PKCS#7 SignedData app receipt or of an old-style
    /// transaction receipt: such input is refused locally, never sent to Apple.
    public static func parse(_ text: String) -> ReceiptProof? {
        guard let bytes = decode(text) else { return nil }
        let canonical = ByteEncoding.base64(bytes)
        let digest = ByteEncoding.hex(SHA256.hash(Array(canonical.utf8)))
        if let payload = SignedData.claimedContent(of: bytes), let receipt = AppReceipt.decode(payload: payload) {
            return ReceiptProof(
                kind: .appReceipt, text: canonical, digest: digest,
                claims: receipt.purchases.map { purchase in
                    ClaimedPurchase(
                        transactionID: purchase.transactionID, originalTransactionID: purchase.originalTransactionID,
                        productID: purchase.productID, purchaseDate: purchase.purchaseDate == .distantPast ? nil : purchase.purchaseDate)
                },
                claimedBundleID: receipt.bundleID, claimedEnvironment: environment(receiptType: receipt.receiptType))
        }
        if let receipt = TransactionReceipt.parse(bytes) {
            let purchase = receipt.purchase
            return ReceiptProof(
                kind: .transactionReceipt, text: canonical, digest: digest,
                claims: [
                    ClaimedPurchase(
                        transactionID: purchase.transactionID,
                        originalTransactionID: purchase.originalTransactionID ?? purchase.transactionID,
                        productID: purchase.productID ?? "", purchaseDate: purchase.purchaseDate.map(Milliseconds.date))
                ],
                claimedBundleID: purchase.bundleID, claimedEnvironment: receipt.claimedEnvironment)
        }
        return nil
    }

    /// The receipt's bytes: base64 or base64url, with or without padding, ASCII whitespace
    /// anywhere; nil for anything else, for nothing, or for more than `maximumLength`.
    static func decode(_ text: String) -> [UInt8]? {
        guard text.utf8.count <= maximumLength else { return nil }
        guard let bytes = ByteEncoding.decodeBase64(text), !bytes.isEmpty else { return nil }
        return bytes
    }

    /// Attribute 0 of an app receipt: `Production`, `ProductionSandbox`, `ProductionVPPSandbox`, ….
    static func environment(receiptType: String?) -> StoreEnvironment? {
        guard let receiptType else { return nil }
        if receiptType.hasSuffix("Sandbox") { return .sandbox }
        if receiptType.hasPrefix("Production") { return .production }
        return nil
    }

    /// The most recent claimed purchase of `productID`.
    public func latestClaim(of productID: String) -> ClaimedPurchase? {
        claims.filter { $0.productID == productID }.max { ($0.purchaseDate ?? .distantPast) < ($1.purchaseDate ?? .distantPast) }
    }
}
