/// verifyReceipt's answer, in Apple's format: numbers and dates as JSON strings.
///
/// See https://developer.apple.com/documentation/appstorereceipts/responsebody
struct VerifyReceiptBody: Encodable, Sendable {
    var status: Int
    var environment: String?
    var receipt: Receipt?
    var latestReceiptInfo: [InApp]?
    var latestReceipt: String?
    /// A transaction receipt's answer (Apple's legacy shape): `receipt`, and one object, not an
    /// array, in `latest_receipt_info` or (21006) `latest_expired_receipt_info`.
    var legacyReceipt: LegacyReceipt?
    var legacyLatestReceiptInfo: LegacyReceipt?
    var legacyLatestExpiredReceiptInfo: LegacyReceipt?
    var isRetryable: Bool?
    var retryableField = "is-retryable"

    struct Receipt: Encodable, Sendable {
        var receiptType: String
        var bundleId: String
        var applicationVersion = "1"
        var originalApplicationVersion = "1.0"
        var receiptCreationDate: String
        var receiptCreationDateMs: String
        var requestDate: String
        var requestDateMs: String
        var inApp: [InApp]

        enum CodingKeys: String, CodingKey {
            case receiptType = "receipt_type", bundleId = "bundle_id", applicationVersion = "application_version"
            case originalApplicationVersion = "original_application_version"
            case receiptCreationDate = "receipt_creation_date", receiptCreationDateMs = "receipt_creation_date_ms"
            case requestDate = "request_date", requestDateMs = "request_date_ms", inApp = "in_app"
        }
    }

    /// https://developer.apple.com/documentation/appstorereceipts/responsebody/receipt/in_app
    struct InApp: Encodable, Sendable {
        var quantity = "1"
        var productId: String
        var transactionId: String
        var originalTransactionId: String
        var purchaseDate: String
        var purchaseDateMs: String
        var originalPurchaseDate: String
        var originalPurchaseDateMs: String
        var isTrialPeriod = "false"
        var inAppOwnershipType = "PURCHASED"
        var cancellationDate: String?
        var cancellationDateMs: String?
        var cancellationReason: String?
        var expiresDate: String?
        var expiresDateMs: String?

        init(_ transaction: SimulatedTransaction) {
            productId = transaction.productID
            transactionId = transaction.transactionID
            originalTransactionId = transaction.originalTransactionID
            purchaseDate = AppleDate.string(milliseconds: transaction.purchaseDateMilliseconds)
            purchaseDateMs = String(transaction.purchaseDateMilliseconds)
            originalPurchaseDate = AppleDate.string(milliseconds: transaction.originalPurchaseDateMilliseconds)
            originalPurchaseDateMs = String(transaction.originalPurchaseDateMilliseconds)
            if let cancelled = transaction.cancellationDateMilliseconds {
                cancellationDate = AppleDate.string(milliseconds: cancelled)
                cancellationDateMs = String(cancelled)
                cancellationReason = transaction.cancellationReason
            }
            if let expires = transaction.expiresDateMilliseconds {
                expiresDate = AppleDate.string(milliseconds: expires)
                expiresDateMs = String(expires)
            }
        }

        enum CodingKeys: String, CodingKey {
            case quantity, productId = "product_id", transactionId = "transaction_id"
            case originalTransactionId = "original_transaction_id", purchaseDate = "purchase_date"
            case purchaseDateMs = "purchase_date_ms", originalPurchaseDate = "original_purchase_date"
            case originalPurchaseDateMs = "original_purchase_date_ms", isTrialPeriod = "is_trial_period"
            case inAppOwnershipType = "in_app_ownership_type", cancellationDate = "cancellation_date"
            case cancellationDateMs = "cancellation_date_ms", cancellationReason = "cancellation_reason"
            case expiresDate = "expires_date", expiresDateMs = "expires_date_ms"
        }
    }

    private struct Key: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(_ string: String) { stringValue = string }
        init?(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Key.self)
        try container.encode(status, forKey: Key("status"))
        try container.encodeIfPresent(environment, forKey: Key("environment"))
        try container.encodeIfPresent(receipt, forKey: Key("receipt"))
        try container.encodeIfPresent(legacyReceipt, forKey: Key("receipt"))
        try container.encodeIfPresent(latestReceiptInfo, forKey: Key("latest_receipt_info"))
        try container.encodeIfPresent(legacyLatestReceiptInfo, forKey: Key("latest_receipt_info"))
        try container.encodeIfPresent(legacyLatestExpiredReceiptInfo, forKey: Key("latest_expired_receipt_info"))
        try container.encodeIfPresent(latestReceipt, forKey: Key("latest_receipt"))
        try container.encodeIfPresent(isRetryable, forKey: Key(retryableField))
    }
}
