import Foundation

/// How one delivery ended, and so what the app does with the StoreKit transaction.
///
/// Each of Stockroom's answers maps to exactly one case (`ServerAnswer`); the README's table
/// lists them.
public enum DeliveryOutcome: Sendable, Equatable {
    /// The file is at `file`, checked against `Repr-Digest` and acknowledged: finish the transaction.
    case delivered(file: URL)
    /// Refunded or revoked: finish the transaction; there is no content and none is left on disk.
    case revoked(OutcomeReason)
    /// Not delivered yet, but it can be: keep the transaction unfinished and deliver again after
    /// `after` (the server's `Retry-After`, or a growing backoff). The journal keeps the date, so a
    /// relaunch waits too.
    case retryLater(after: Duration, OutcomeReason)
    /// The receipt is stale or malformed: refresh it (`SKReceiptRefreshRequest`), then deliver
    /// again once with the new one.
    case refreshReceipt(OutcomeReason)
    /// Stockroom refused for a reason only the app can weigh (`transaction_claimed`,
    /// `product_mismatch`, `bundle_mismatch`, …): the transaction stays unfinished until the app decides.
    case refused(OutcomeReason)

    /// What the app does with the StoreKit transaction after this outcome.
    public var transactionAction: TransactionAction {
        switch self {
        case .delivered, .revoked: .finish
        case .retryLater: .keepUnfinishedAndRetry
        case .refreshReceipt: .refreshReceiptAndRetryOnce
        case .refused: .appDecides
        }
    }

    /// The stable code: `delivered`, or the server's (or the client's) reason.
    public var code: String {
        switch self {
        case .delivered: "delivered"
        case .revoked(let reason), .retryLater(_, let reason), .refreshReceipt(let reason), .refused(let reason): reason.code
        }
    }
}

/// What to do with a StoreKit transaction.
public enum TransactionAction: String, Sendable, Equatable {
    /// `finish()` / `finishTransaction(_:)`: the content is safe, or can never be delivered.
    case finish
    /// Leave it unfinished; StoreKit hands it over again at the next launch.
    case keepUnfinishedAndRetry = "keep_unfinished_retry"
    /// Refresh the app receipt, then deliver again once; leave it unfinished meanwhile.
    case refreshReceiptAndRetryOnce = "refresh_receipt_retry_once"
    /// Leave it unfinished and let the app decide (ask the user, sign in to the other account, …).
    case appDecides = "app_decides"
}

/// Why a delivery ended as it did: the server's stable error code and message, or the client's own.
public struct OutcomeReason: Sendable, Equatable, CustomStringConvertible {
    /// `revoked`, `upstream_unavailable`, `transaction_claimed`, … or a client code such as
    /// `network`, `digest_mismatch`.
    public var code: String
    public var message: String
    /// The HTTP status, when the server answered.
    public var status: Int?

    public init(code: String, message: String, status: Int? = nil) {
        self.code = code
        self.message = message
        self.status = status
    }

    public var description: String { status.map { "\(code) (\($0)): \(message)" } ?? "\(code): \(message)" }
}
