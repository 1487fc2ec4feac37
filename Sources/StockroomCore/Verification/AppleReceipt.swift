import Foundation

/// What verifyReceipt said about a valid receipt: the parts Stockroom's checks read.
public struct AppleReceipt: Sendable, Equatable {
    public var environment: StoreEnvironment
    public var bundleID: String?
    /// The purchases the receipt itself lists.
    public var inApp: [ReceiptTransaction]
    /// Apple's current view of the app's purchases (may include later ones and refunds).
    public var latestReceiptInfo: [ReceiptTransaction]
}

/// One in-app purchase as verifyReceipt reports it.
///
/// See https://developer.apple.com/documentation/appstorereceipts/responsebody/receipt/in_app
public struct ReceiptTransaction: Sendable, Equatable, Codable {
    public var transactionID: String
    public var originalTransactionID: String
    public var productID: String
    public var quantity: Int
    /// Milliseconds since 1970.
    public var purchaseDate: Int64
    /// Set when Apple refunded or revoked the purchase; milliseconds since 1970.
    public var cancellationDate: Int64?
    public var cancellationReason: String?

    public var isCancelled: Bool { cancellationDate != nil }

    enum CodingKeys: String, CodingKey {
        case transactionID = "transaction_id", originalTransactionID = "original_transaction_id"
        case productID = "product_id", quantity, purchaseDate = "purchase_date_ms"
        case cancellationDate = "cancellation_date_ms", cancellationReason = "cancellation_reason"
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        transactionID = try container.decodeLenientString(.transactionID)
        originalTransactionID = (try? container.decodeLenientString(.originalTransactionID)) ?? transactionID
        productID = try container.decode(String.self, forKey: .productID)
        quantity = Int(try container.decodeLenientInteger(.quantity, default: 1))
        purchaseDate = try container.decodeLenientInteger(.purchaseDate, default: 0)
        cancellationDate = container.contains(.cancellationDate) ? try container.decodeLenientInteger(.cancellationDate, default: 0) : nil
        cancellationReason = try? container.decodeLenientString(.cancellationReason)
    }
}

/// verifyReceipt's response body, read leniently: numbers as strings or numbers, unknown
/// fields ignored, `is-retryable` or `is_retryable`.
struct VerifyReceiptResponse: Decodable {
    var status: Int
    var environment: StoreEnvironment?
    var isRetryable: Bool
    var receipt: Receipt?
    var latestReceiptInfo: [ReceiptTransaction]?

    struct Receipt: Decodable {
        var bundleID: String?
        var inApp: [ReceiptTransaction]?

        enum CodingKeys: String, CodingKey {
            case bundleID = "bundle_id", inApp = "in_app"
        }
    }

    enum CodingKeys: String, CodingKey {
        case status, environment, receipt, latestReceiptInfo = "latest_receipt_info"
        case isRetryableHyphen = "is-retryable", isRetryableUnderscore = "is_retryable"
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        status = Int(try container.decodeLenientInteger(.status, default: -1))
        environment = (try? container.decode(String.self, forKey: .environment)).flatMap(StoreEnvironment.init(rawValue:))
        isRetryable = container.decodeLenientBool(.isRetryableHyphen) || container.decodeLenientBool(.isRetryableUnderscore)
        receipt = try? container.decodeIfPresent(Receipt.self, forKey: .receipt)
        latestReceiptInfo = try? container.decodeIfPresent([ReceiptTransaction].self, forKey: .latestReceiptInfo)
    }
}

extension KeyedDecodingContainer {
    /// An integer sent as a JSON number or a string of digits.
    func decodeLenientInteger(_ key: Key, default fallback: Int64) throws -> Int64 {
        guard contains(key), (try? decodeNil(forKey: key)) == false else { return fallback }
        if let number = try? decode(Int64.self, forKey: key) { return number }
        let text = try decode(String.self, forKey: key)
        guard let number = Int64(text.trimmingCharacters(in: .whitespaces)) else {
            throw DecodingError.dataCorruptedError(forKey: key, in: self, debugDescription: "\"\(text)\" is not an integer")
        }
        return number
    }

    /// A string, or a number written as one.
    func decodeLenientString(_ key: Key) throws -> String {
        if let text = try? decode(String.self, forKey: key) { return text }
        return String(try decode(Int64.self, forKey: key))
    }

    /// true, "true", 1 or "1"; anything else (or absent) is false.
    func decodeLenientBool(_ key: Key) -> Bool {
        if let flag = try? decode(Bool.self, forKey: key) { return flag }
        if let number = try? decode(Int.self, forKey: key) { return number != 0 }
        if let text = try? decode(String.self, forKey: key) { return text == "true" || text == "1" }
        return false
    }
}
