/// A transaction receipt as verifyReceipt describes it (Apple's iOS 6 shape): the purchase at
/// the top level of `receipt`, with `bid` and `bvrs`, numbers and dates as strings, and a
/// subscription's `expires_date` in milliseconds.
///
/// See https://developer.apple.com/library/archive/releasenotes/General/ValidateAppStoreReceipt/Chapters/ValidateRemotely.html
struct LegacyReceipt: Encodable, Sendable {
    var bid: String
    var bvrs = "1"
    var productId: String
    var transactionId: String
    var originalTransactionId: String
    var quantity = "1"
    var purchaseDate: String
    var purchaseDateMs: String
    var originalPurchaseDate: String
    var originalPurchaseDateMs: String
    var itemId: String
    var uniqueIdentifier: String
    var expiresDate: String?
    var expiresDateFormatted: String?
    var cancellationDate: String?
    var cancellationDateMs: String?
    var cancellationReason: String?

    init(_ transaction: SimulatedTransaction) {
        bid = transaction.bundleID
        productId = transaction.productID
        transactionId = transaction.transactionID
        originalTransactionId = transaction.originalTransactionID
        purchaseDate = AppleDate.string(milliseconds: transaction.purchaseDateMilliseconds)
        purchaseDateMs = String(transaction.purchaseDateMilliseconds)
        originalPurchaseDate = AppleDate.string(milliseconds: transaction.originalPurchaseDateMilliseconds)
        originalPurchaseDateMs = String(transaction.originalPurchaseDateMilliseconds)
        itemId = Self.itemID(transaction.productID)
        uniqueIdentifier = transaction.deviceID
        if let expires = transaction.expiresDateMilliseconds {
            expiresDate = String(expires)  // milliseconds, as Apple writes it in this shape
            expiresDateFormatted = AppleDate.string(milliseconds: expires)
        }
        if let cancelled = transaction.cancellationDateMilliseconds {
            cancellationDate = AppleDate.string(milliseconds: cancelled)
            cancellationDateMs = String(cancelled)
            cancellationReason = transaction.cancellationReason
        }
    }

    /// A stable App Store item ID for a product: nine digits from its name.
    static func itemID(_ productID: String) -> String {
        let hash = productID.utf8.reduce(UInt32(2_166_136_261)) { ($0 ^ UInt32($1)) &* 16_777_619 }
        return String(100_000_000 + hash % 900_000_000)
    }

    enum CodingKeys: String, CodingKey {
        case bid, bvrs, quantity
        case productId = "product_id", transactionId = "transaction_id", originalTransactionId = "original_transaction_id"
        case purchaseDate = "purchase_date", purchaseDateMs = "purchase_date_ms"
        case originalPurchaseDate = "original_purchase_date", originalPurchaseDateMs = "original_purchase_date_ms"
        case itemId = "item_id", uniqueIdentifier = "unique_identifier"
        case expiresDate = "expires_date", expiresDateFormatted = "expires_date_formatted"
        case cancellationDate = "cancellation_date", cancellationDateMs = "cancellation_date_ms", cancellationReason = "cancellation_reason"
    }
}
