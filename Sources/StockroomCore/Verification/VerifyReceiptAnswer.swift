import Foundation

/// What verifyReceipt said about a valid receipt: the parts Stockroom's checks read.
public struct VerifyReceiptAnswer: Sendable, Equatable {
    public var environment: StoreEnvironment
    public var bundleID: String?
    /// The purchases the receipt itself lists (for a transaction receipt: its one transaction).
    public var inApp: [ReceiptTransaction]
    /// Apple's current view of the app's purchases (may include later ones and refunds).
    public var latestReceiptInfo: [ReceiptTransaction]
    /// Apple answered 21006: the receipt is genuine but its subscription has expired.
    public var subscriptionExpired: Bool = false
}

/// One in-app purchase as verifyReceipt reports it, from an app receipt's `in_app` /
/// `latest_receipt_info` or from a transaction receipt's top-level `receipt`.
///
/// See https://developer.apple.com/documentation/appstorereceipts/responsebody/receipt/in_app
public struct ReceiptTransaction: Sendable, Equatable, Decodable {
    public var transactionID: String
    public var originalTransactionID: String
    public var productID: String
    public var quantity: Int
    /// Milliseconds since 1970.
    public var purchaseDate: Int64
    /// Set when Apple refunded or revoked the purchase; milliseconds since 1970.
    public var cancellationDate: Int64?
    public var cancellationReason: String?
    /// When a subscription ends; milliseconds since 1970 (`expires_date_ms`, or a transaction
    /// receipt's `expires_date`, which is milliseconds in a string there).
    public var expiresDate: Int64?

    public var isCancelled: Bool { cancellationDate != nil }

    /// Whether a subscription has ended at `now`; purchases without expiry never do.
    public func isExpired(at now: Date) -> Bool {
        guard let expiresDate else { return false }
        return expiresDate <= Milliseconds.of(now)
    }

    public init(
        transactionID: String, originalTransactionID: String, productID: String, quantity: Int = 1, purchaseDate: Int64,
        cancellationDate: Int64? = nil, cancellationReason: String? = nil, expiresDate: Int64? = nil
    ) {
        self.transactionID = transactionID
        self.originalTransactionID = originalTransactionID
        self.productID = productID
        self.quantity = quantity
        self.purchaseDate = purchaseDate
        self.cancellationDate = cancellationDate
        self.cancellationReason = cancellationReason
        self.expiresDate = expiresDate
    }

    /// Apple's names, `_ms` and formatted spellings alike: one container per transaction (each
    /// container indexes the object's keys again).
    enum CodingKeys: String, CodingKey {
        case transactionID = "transaction_id", originalTransactionID = "original_transaction_id"
        case productID = "product_id", quantity, purchaseDate = "purchase_date_ms"
        case cancellationDate = "cancellation_date_ms", cancellationReason = "cancellation_reason"
        case expiresDate = "expires_date_ms"
        case expiresDateText = "expires_date", cancellationDateText = "cancellation_date"
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        transactionID = try container.decodeLenientString(.transactionID)
        originalTransactionID = (try? container.decodeLenientString(.originalTransactionID)) ?? transactionID
        productID = try container.decode(String.self, forKey: .productID)
        let count = try container.decodeLenientInteger(.quantity, default: 1, usually: .string)
        guard (0...1_000_000).contains(count) else {
            throw DecodingError.dataCorruptedError(forKey: .quantity, in: container, debugDescription: "quantity out of range")
        }
        quantity = Int(count)
        purchaseDate = try container.decodeMilliseconds(.purchaseDate, usually: .string) ?? 0
        cancellationReason = container.contains(.cancellationReason) ? try? container.decodeLenientString(.cancellationReason) : nil
        cancellationDate = try container.decodeMilliseconds(.cancellationDate, usually: .string)
        if cancellationDate == nil, container.contains(.cancellationDateText),
            let text = try? container.decode(String.self, forKey: .cancellationDateText),
            !text.isEmpty
        {
            // Present means cancelled, whatever its spelling: fail safe.
            cancellationDate = Milliseconds.parse(text) ?? AppleDateText.milliseconds(text) ?? 0
        }
        expiresDate = try container.decodeMilliseconds(.expiresDate, usually: .string)
        if expiresDate == nil, container.contains(.expiresDateText) {
            // Milliseconds in a transaction receipt's answer, a date string in an app receipt's.
            if let text = try? container.decode(String.self, forKey: .expiresDateText) {
                guard let milliseconds = Milliseconds.parse(text) ?? AppleDateText.milliseconds(text) else {
                    throw DecodingError.dataCorruptedError(
                        forKey: .expiresDateText, in: container, debugDescription: "expires_date is not a date")
                }
                expiresDate = milliseconds
            } else {
                expiresDate = try container.decodeMilliseconds(.expiresDateText)
            }
        }
    }
}

/// verifyReceipt's response body, read leniently: numbers as strings or numbers, unknown
/// fields ignored, `is-retryable` or `is_retryable`; both shapes of `receipt` (an app
/// receipt's `bundle_id` + `in_app`, a transaction receipt's `bid` + its one transaction) and of
/// `latest_receipt_info` / `latest_expired_receipt_info` (an array, or one object).
struct VerifyReceiptResponse: Decodable {
    var status: Int
    var environment: StoreEnvironment?
    var isRetryable: Bool
    var receipt: Receipt?
    var latestReceiptInfo: [ReceiptTransaction]?
    var latestExpiredReceiptInfo: [ReceiptTransaction]?

    struct Receipt: Decodable {
        var bundleID: String?
        var inApp: [ReceiptTransaction]?

        enum CodingKeys: String, CodingKey {
            case bundleID = "bundle_id", bid, inApp = "in_app", transactionID = "transaction_id"
        }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            bundleID = (try? container.decode(String.self, forKey: .bundleID)) ?? (try? container.decode(String.self, forKey: .bid))
            if container.contains(.inApp) {
                inApp = try container.decode([ReceiptTransaction].self, forKey: .inApp)
            } else if container.contains(.transactionID) {
                inApp = [try ReceiptTransaction(from: decoder)]  // a transaction receipt: the receipt is the transaction
            }
        }
    }

    enum CodingKeys: String, CodingKey {
        case status, environment, receipt, latestReceiptInfo = "latest_receipt_info"
        case latestExpiredReceiptInfo = "latest_expired_receipt_info"
        case isRetryableHyphen = "is-retryable", isRetryableUnderscore = "is_retryable"
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let code = try container.decodeLenientInteger(.status, default: -1)
        status = (-1...99_999).contains(code) ? Int(code) : -1
        environment = (try? container.decode(String.self, forKey: .environment)).flatMap(StoreEnvironment.init(rawValue:))
        isRetryable = container.decodeLenientBool(.isRetryableHyphen) || container.decodeLenientBool(.isRetryableUnderscore)
        receipt = try? container.decodeIfPresent(Receipt.self, forKey: .receipt)
        latestReceiptInfo = Self.transactions(container, .latestReceiptInfo)
        latestExpiredReceiptInfo = Self.transactions(container, .latestExpiredReceiptInfo)
    }

    /// An array of transactions, or one transaction object; nil when absent or unreadable.
    private static func transactions(_ container: KeyedDecodingContainer<CodingKeys>, _ key: CodingKeys) -> [ReceiptTransaction]? {
        if let list = try? container.decodeIfPresent([ReceiptTransaction].self, forKey: key) { return list }
        return (try? container.decodeIfPresent(ReceiptTransaction.self, forKey: key)).map { [$0] }
    }
}
