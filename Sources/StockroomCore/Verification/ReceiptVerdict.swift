/// What verification concluded: a value, never a thrown error (faults are not verdicts).
public enum ReceiptVerdict: Sendable, Equatable {
    /// Apple vouches for the receipt and every requested check holds.
    case valid(VerifiedReceipt)
    /// Apple, or a business check, says no; the reason has a stable code.
    case invalid(RejectionReason)
    /// No answer could be had; the receipt is worth keeping and trying again after `retryAfter`.
    case unavailable(reason: String, retryAfter: Duration)
}

/// A receipt that verified, and the transaction the request was about.
public struct VerifiedReceipt: Sendable, Equatable {
    public var environment: StoreEnvironment
    public var bundleID: String
    /// The transaction matched by product and/or transaction ID; nil when the request named neither.
    public var transaction: ReceiptTransaction?
    /// Every purchase Apple reported for the receipt, without duplicates.
    public var transactions: [ReceiptTransaction]
}

/// Why a receipt was refused. Each has a stable `code` the download API returns (with 403).
public enum RejectionReason: Sendable, Equatable, CustomStringConvertible {
    /// Not a receipt: refused locally before any upstream call, or 21002 twice from Apple.
    case malformedReceipt
    /// 21003: Apple could not authenticate the receipt.
    case notAuthentic
    /// 21007 and 21008 both: neither environment accepts it.
    case environmentMismatch
    /// The receipt belongs to another app.
    case bundleMismatch(expected: String, actual: String?)
    /// The receipt lists no in-app purchase at all.
    case emptyReceipt
    /// No purchase of the requested product.
    case productNotInReceipt(String)
    /// No purchase with the requested transaction ID.
    case transactionNotInReceipt(String)
    /// The named transaction bought another product.
    case productMismatch(transactionID: String, productID: String)
    /// Refunded or revoked (`cancellation_date` set).
    case revoked(ReceiptTransaction)
    /// A subscription whose expiry has passed (or Apple's 21006); HTTP 403 at the edge.
    case expired(ReceiptTransaction)
    /// Another verifyReceipt status that means no.
    case upstreamStatus(Int)

    public var code: String {
        switch self {
        case .malformedReceipt: "receipt_malformed"
        case .notAuthentic: "receipt_not_authentic"
        case .environmentMismatch: "receipt_environment_mismatch"
        case .bundleMismatch: "bundle_mismatch"
        case .emptyReceipt: "receipt_empty"
        case .productNotInReceipt: "product_not_in_receipt"
        case .transactionNotInReceipt: "transaction_not_in_receipt"
        case .productMismatch: "product_mismatch"
        case .revoked: "revoked"
        case .expired: "subscription_expired"
        case .upstreamStatus: "receipt_rejected"
        }
    }

    public var description: String {
        switch self {
        case .malformedReceipt: "the data is not an app receipt or a transaction receipt (refused locally, or 21002 from the App Store)"
        case .notAuthentic: "the App Store could not authenticate the receipt (21003)"
        case .environmentMismatch: "neither the production nor the sandbox App Store accepts the receipt (21007/21008)"
        case .bundleMismatch(let expected, let actual): "the receipt is for bundle \(actual ?? "(none)"), not \(expected)"
        case .emptyReceipt: "the receipt lists no in-app purchases"
        case .productNotInReceipt(let product): "the receipt has no purchase of \(product)"
        case .transactionNotInReceipt(let id): "the receipt has no transaction \(id)"
        case .productMismatch(let id, let product): "transaction \(id) is not a purchase of \(product)"
        case .revoked(let transaction): "transaction \(transaction.transactionID) was refunded or revoked"
        case .expired(let transaction): "the subscription of transaction \(transaction.transactionID) has expired"
        case .upstreamStatus(let status): "the App Store refused the receipt with status \(status)"
        }
    }
}
