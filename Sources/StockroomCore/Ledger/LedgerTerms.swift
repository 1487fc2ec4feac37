import Foundation

/// Which owed calls to list.
public struct ServerCallListQuery: Sendable, Equatable {
    public var kind: ServerCall.Kind?
    public var status: ServerCall.Status?
    public var transactionID: String?
    public var limit: Int

    public init(kind: ServerCall.Kind? = nil, status: ServerCall.Status? = nil, transactionID: String? = nil, limit: Int = 1000) {
        self.kind = kind
        self.status = status
        self.transactionID = transactionID
        self.limit = limit
    }
}

/// The terms a verified proof is recorded on: what the request asked for, besides the proof.
public struct ProofTerms: Sendable, Equatable {
    /// The product the request asked for; nil when an operator re-verifies (the proof decides).
    public var requestedProductID: String?
    /// The account the request names; ignored when `checksAccount` is false.
    public var appAccountToken: String?
    /// Whether the account binding is checked (downloads) or not (an operator's re-verification).
    public var checksAccount: Bool
    /// Whether this is a download request (counts an attempt).
    public var countsAttempt: Bool
    /// The customer's consent to share consumption data with Apple, when the app says; kept on an entitled row.
    public var customerConsented: Bool?
    /// Whether a restore (the App Store's transaction history) recorded it: its event says restored.
    public var restores = false

    public init(
        requestedProductID: String?, appAccountToken: String?, checksAccount: Bool, countsAttempt: Bool, customerConsented: Bool? = nil
    ) {
        self.requestedProductID = requestedProductID
        self.appAccountToken = appAccountToken?.lowercased()
        self.checksAccount = checksAccount
        self.countsAttempt = countsAttempt
        self.customerConsented = customerConsented
    }

    /// An operator's re-verification: no account, no attempt, Apple's product.
    public static let reverification = ProofTerms(requestedProductID: nil, appAccountToken: nil, checksAccount: false, countsAttempt: false)
}

/// What a ledger decision came to.
public enum LedgerDecision: Sendable, Equatable {
    /// Entitled: the row as recorded.
    case entitled(Fulfilment)
    case refused(Refusal)
}

/// During an outage, the request and the proof it carries.
public struct RecordedProofRequest: Sendable, Equatable {
    public var transactionID: String
    public var digest: String
    public var productID: String
    public var appAccountToken: String?

    public init(transactionID: String, digest: String, productID: String, appAccountToken: String?) {
        self.transactionID = transactionID
        self.digest = digest
        self.productID = productID
        self.appAccountToken = appAccountToken?.lowercased()
    }
}

/// A proof to keep while the App Store cannot be asked.
public struct PendingProofDraft: Sendable, Equatable {
    public var transactionID: String
    public var digest: String
    public var kind: Fulfilment.ProofKind
    public var proof: String
    public var requestedProductID: String
    public var appAccountToken: String?
    public var error: String
    /// The client's address, counted by the per-client bound; nil is counted with no client.
    public var client: String?

    public init(
        transactionID: String, digest: String, kind: Fulfilment.ProofKind, proof: String, requestedProductID: String,
        appAccountToken: String?, error: String, client: String? = nil
    ) {
        self.transactionID = transactionID
        self.digest = digest
        self.kind = kind
        self.proof = proof
        self.requestedProductID = requestedProductID
        self.appAccountToken = appAccountToken?.lowercased()
        self.error = error
        self.client = client
    }
}

/// A purchase to revoke: the transaction named, and its purchase (original transaction).
public struct RevokedPurchase: Sendable, Equatable {
    public var transactionID: String
    public var originalTransactionID: String
    /// Known from Apple's word (refunds); nil for an operator naming a transaction on record.
    public var productID: String?
    public var bundleID: String?
    public var environment: StoreEnvironment?
    /// The proof Apple's word came with, kept on a row recorded revoked.
    public var proofKind: Fulfilment.ProofKind = .receipt
    public var proof: String?
    public var proofDigest: String?

    public init(transactionID: String, originalTransactionID: String, productID: String?, bundleID: String?, environment: StoreEnvironment?)
    {
        self.transactionID = transactionID
        self.originalTransactionID = originalTransactionID
        self.productID = productID
        self.bundleID = bundleID
        self.environment = environment
    }
}

/// Who revoked a purchase; each cause is lifted only by its own counterpart.
public enum RevocationCause: String, Sendable, Equatable {
    /// An operator (`stockroom revoke`); lifted by `stockroom reinstate`.
    case operatorAction = "operator"
    /// Apple (refund, REVOKE, a cancellation date); lifted by `REFUND_REVERSED`.
    case refund
}

/// An App Store Server Notification V2 as the ledger keeps it: one row of `notifications`, the
/// UUID that makes notifications idempotent, what applying it did, and the payload verbatim.
/// https://developer.apple.com/documentation/appstoreservernotifications/responsebodyv2decodedpayload
public struct NotificationRecord: Sendable, Equatable, Codable {
    /// https://developer.apple.com/documentation/appstoreservernotifications/notificationuuid
    public var uuid: String
    public var type: String
    public var subtype: String?
    public var transactionID: String?
    public var originalTransactionID: String?
    /// The `signedPayload` as Apple sent it, kept verbatim for audit (nil on rows older than schema
    /// v6, and in the console's lists, which do not read it).
    public var signedPayload: String?
    /// How it arrived: `push` (Apple posted it) or `history` (`stockroom notifications sync`).
    public var source: String?
    /// What applying it did; set by `recordNotification`.
    public var outcome: String
    /// When it was recorded; set by `recordNotification`.
    public var receivedAt: Date

    public init(
        uuid: String, type: String, subtype: String?, transactionID: String?, originalTransactionID: String?, signedPayload: String? = nil,
        source: String? = nil, outcome: String = "", receivedAt: Date = Date(timeIntervalSince1970: 0)
    ) {
        self.uuid = uuid
        self.type = type
        self.subtype = subtype
        self.transactionID = transactionID
        self.originalTransactionID = originalTransactionID
        self.signedPayload = signedPayload
        self.source = source
        self.outcome = outcome
        self.receivedAt = receivedAt
    }

    /// The column names: the archive's keys, and the rows' on both engines.
    public enum CodingKeys: String, CodingKey, CaseIterable {
        case uuid = "notification_uuid", type = "notification_type", subtype, transactionID = "transaction_id"
        case originalTransactionID = "original_transaction_id", outcome, receivedAt = "received_at"
        case signedPayload = "signed_payload", source
    }
}

/// Which fulfilments to list.
public struct FulfilmentListQuery: Sendable, Equatable {
    public var states: Set<FulfilmentState>?
    public var productID: String?
    /// Only those updated at or after this time.
    public var since: Date?
    /// Only those with a finish call still queued (`fulfilments list --unfinished`).
    public var unfinished: Bool
    public var limit: Int

    public init(
        states: Set<FulfilmentState>? = nil, productID: String? = nil, since: Date? = nil, unfinished: Bool = false, limit: Int = 1000
    ) {
        self.states = states
        self.productID = productID
        self.since = since
        self.unfinished = unfinished
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
