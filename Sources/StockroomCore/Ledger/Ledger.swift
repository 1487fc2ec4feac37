import Foundation

/// The fulfilment ledger: one row per App Store transaction, every download attempt logged.
///
/// A protocol so that a PostgreSQL ledger can serve several instances; SQLite is the default.
public protocol Ledger: Sendable {
    func fulfilment(_ transactionID: String) async throws -> Fulfilment?
    /// Whether any transaction of this purchase (the original and its restores) is revoked.
    func isRevoked(originalTransactionID: String) async throws -> Bool
    /// Records a verified transaction, inserting it or moving it to `verified`; `countAttempt`
    /// adds one to its attempts (a download request, not an operator's re-verification).
    func recordVerified(_ record: VerifiedRecord, countAttempt: Bool) async throws -> Fulfilment
    /// Keeps the proof of a transaction whose verification could not be had (upstream down).
    func recordPending(_ record: VerifiedRecord, error: String) async throws -> Fulfilment
    /// One more download request for a transaction that needs no new verification.
    func countAttempt(_ transactionID: String) async throws
    /// Moves a transaction to `state`; throws `LedgerError.illegalTransition` for a move the
    /// state machine does not allow. Moving to the current state changes nothing.
    func transition(_ transactionID: String, to state: FulfilmentState, error: String?) async throws -> Fulfilment
    /// Revokes a purchase Apple reported refunded, recording the transaction as revoked when the
    /// ledger has never seen it (so its old proof cannot download it later).
    func recordRevoked(_ record: VerifiedRecord, reason: String) async throws
    /// Revokes every transaction of a purchase; returns those that changed.
    func revokePurchase(originalTransactionID: String, reason: String) async throws -> [Fulfilment]
    /// Logs a download attempt and its bytes; a complete body reaching the file's end makes a
    /// verified transaction `delivered`.
    func recordDelivery(_ transactionID: String, report: DeliveryReport, fileSize: Int64) async throws
    /// Records an App Store notification and applies its effect in one transaction; false when
    /// a notification with this UUID was recorded before (nothing changes then).
    func applyNotification(_ notification: NotificationRecord, effect: NotificationEffect) async throws -> Bool
    func list(_ filter: FulfilmentFilter) async throws -> [Fulfilment]
    func attempts(of transactionID: String) async throws -> [DownloadAttempt]
}

/// What a verification learned about a transaction, to be recorded.
public struct VerifiedRecord: Sendable, Equatable {
    public var transactionID: String
    public var originalTransactionID: String
    public var productID: String
    public var bundleID: String
    public var environment: StoreEnvironment?
    public var proofKind: Fulfilment.ProofKind
    public var proof: String

    public init(
        transactionID: String, originalTransactionID: String, productID: String, bundleID: String,
        environment: StoreEnvironment?, proofKind: Fulfilment.ProofKind, proof: String
    ) {
        self.transactionID = transactionID
        self.originalTransactionID = originalTransactionID
        self.productID = productID
        self.bundleID = bundleID
        self.environment = environment
        self.proofKind = proofKind
        self.proof = proof
    }
}

/// An App Store Server Notification V2, as kept in the ledger.
public struct NotificationRecord: Sendable, Equatable {
    public var uuid: String
    public var type: String
    public var subtype: String?
    public var transactionID: String?
    public var originalTransactionID: String?

    public init(uuid: String, type: String, subtype: String?, transactionID: String?, originalTransactionID: String?) {
        self.uuid = uuid
        self.type = type
        self.subtype = subtype
        self.transactionID = transactionID
        self.originalTransactionID = originalTransactionID
    }
}

/// What a notification does to the ledger.
public enum NotificationEffect: Sendable, Equatable {
    /// Revoke the purchase; a transaction never seen is recorded as revoked, so its old proof
    /// cannot download it later.
    case revoke(VerifiedRecord, reason: String)
    /// A refund reversed: revoked transactions of the purchase become verified again.
    case reinstate(originalTransactionID: String)
    /// Recorded and acknowledged, nothing else.
    case none
}

/// Which fulfilments to list.
public struct FulfilmentFilter: Sendable, Equatable {
    public var states: Set<FulfilmentState>?
    public var productID: String?
    /// Only those updated at or after this time.
    public var since: Date?
    public var limit: Int

    public init(states: Set<FulfilmentState>? = nil, productID: String? = nil, since: Date? = nil, limit: Int = 1000) {
        self.states = states
        self.productID = productID
        self.since = since
        self.limit = limit
    }
}

/// Why the ledger refused a change.
public enum LedgerError: Error, Equatable, CustomStringConvertible {
    case unknownTransaction(String)
    case illegalTransition(transactionID: String, from: FulfilmentState, to: FulfilmentState)

    public var description: String {
        switch self {
        case .unknownTransaction(let id): "no transaction \(id) in the ledger"
        case .illegalTransition(let id, let from, let to): "transaction \(id) cannot move from \(from.rawValue) to \(to.rawValue)"
        }
    }
}
