import Foundation

/// The fulfilment ledger: entitlements made only from verified proofs, pending proofs kept apart,
/// every download attempt logged.
///
/// Each decision is one method and one database transaction that re-reads the rows, applies
/// the rules and writes. The API has no way to record an entitlement without a `VerifiedProof`,
/// to let a pending proof authorise bytes, or to lift a revocation except through `reinstate`
/// (an operator's) and `reverseRefund` (Apple's). A protocol so that a PostgreSQL ledger can
/// serve several instances; SQLite is the default.
public protocol Ledger: Sendable {
    // MARK: Reads
    func fulfilment(_ transactionID: String) async throws -> Fulfilment?
    func list(_ filter: FulfilmentFilter) async throws -> [Fulfilment]
    func attempts(of transactionID: String) async throws -> [DownloadAttempt]
    /// Kept proofs, oldest first; `status` nil lists every one.
    func pendingProofs(status: PendingProof.Status?, limit: Int) async throws -> [PendingProof]

    /// How many fulfilments are in each state (states with none are absent): for `/metrics`.
    func stateCounts() async throws -> [FulfilmentState: Int]

    // MARK: Decisions
    /// Records what `proof` says and decides whether it entitles the claim: refunds revoke the
    /// whole purchase, a revoked purchase stays revoked, the product must be the one asked for,
    /// a bound account must match, an expired subscription is refused.
    func claim(_ proof: VerifiedProof, terms: ClaimTerms, now: Date) async throws -> LedgerDecision
    /// During an outage: serves only an entitled, unexpired, unrevoked transaction whose proof on
    /// record has this digest; nil when it does not qualify (nothing changes then).
    func serveRecordedProof(_ request: RecordedProofRequest, now: Date) async throws -> Fulfilment?
    /// Keeps a proof that could not be verified, within `bounds` (per transaction, per client and
    /// in total, every status counted); first purges a bounded batch of rejected proofs older
    /// than the retention. The same proof again only refreshes its row.
    func keepPendingProof(_ proof: PendingProofDraft, bounds: PendingProofBounds, now: Date) async throws -> PendingProofKeeping
    /// Deletes up to `limit` rejected proofs last changed before `before`; returns how many.
    func purgeRejectedPendingProofs(before: Date, limit: Int) async throws -> Int
    /// Up to `limit` pending proofs (only those kept under `transactionID` when given) that no
    /// other re-verification holds, oldest first, now held by the caller until `until`: two
    /// `refulfil --pending` runs at once (on one machine or several sharing a ledger) verify
    /// each proof once. Rejecting or noting a proof releases it.
    func leasePendingProofs(of transactionID: String?, limit: Int, until: Date, now: Date) async throws -> [PendingProof]
    /// Marks a pending proof rejected by the App Store.
    func rejectPendingProof(id: Int64, reason: String, now: Date) async throws
    /// Notes a failed re-verification attempt of a pending proof.
    func notePendingProof(id: Int64, error: String, now: Date) async throws
    /// A resume authorised by a download token for `productID`: counts the attempt when entitled.
    func resume(_ transactionID: String, productID: String, now: Date) async throws -> LedgerDecision
    /// The client has the whole file: delivered → acknowledged.
    func acknowledge(_ transactionID: String, productID: String, now: Date) async throws -> LedgerDecision
    /// A re-verification of the stored proof said no: entitled → rejected, only while the
    /// stored proof is still the one with `digest`.
    func reject(_ transactionID: String, digest: String?, reason: String, now: Date) async throws -> Fulfilment?
    /// Notes why a re-verification could not be had.
    func noteError(_ transactionID: String, _ error: String, now: Date) async throws
    /// Revokes every transaction of a purchase for `cause`; a transaction never seen is
    /// recorded revoked so that its proof cannot download later. Returns those that changed.
    func revoke(_ purchase: RevokedPurchase, cause: RevocationCause, reason: String, now: Date) async throws -> [Fulfilment]
    /// Lifts an operator's revocation of the purchase `transactionID` belongs to; a refund's
    /// stays. Returns the transactions that became entitled again.
    func reinstate(_ transactionID: String, reason: String, now: Date) async throws -> [Fulfilment]
    /// Apple reversed a refund (`REFUND_REVERSED`): lifts the refund's revocation; an
    /// operator's stays. Returns the transactions that became entitled again.
    func reverseRefund(originalTransactionID: String, now: Date) async throws -> [Fulfilment]
    /// Logs a download attempt and its bytes; a complete body reaching the file's end makes a
    /// verified transaction `delivered`. The attempts log stays bounded per transaction.
    func recordDelivery(_ transactionID: String, report: DeliveryReport, fileSize: Int64) async throws
    /// Whether a notification with this UUID was recorded.
    func notificationSeen(_ uuid: String) async throws -> Bool
    /// Records a notification's UUID; false when it was recorded before.
    func recordNotification(_ notification: NotificationRecord, outcome: String, now: Date) async throws -> Bool
    /// A notification as recorded, with its signed payload verbatim.
    func storedNotification(_ uuid: String) async throws -> StoredNotification?

    // MARK: Calls owed to the App Store Server API (a durable queue)
    /// A refund request (CONSUMPTION_REQUEST) for `transactionID`: queues one consumption
    /// answer per transaction, or records that none is sent because no consent is on record.
    func queueConsumptionAnswer(_ transactionID: String, environment: StoreEnvironment, requestedBy uuid: String, now: Date) async throws
        -> ConsumptionQueueing
    /// Up to `limit` queued calls that are due and that no other sender holds, oldest first,
    /// now held by the caller until `until`.
    func leaseServerCalls(limit: Int, until: Date, now: Date) async throws -> [ServerCall]
    /// Settles a leased call; a sent finish stamps its transaction's `finished_at`.
    func completeServerCall(_ id: Int64, _ result: ServerCallResult, now: Date) async throws
    /// Calls on record, newest first.
    func serverCalls(_ filter: ServerCallFilter) async throws -> [ServerCall]
    /// Keeps the customer's consent to share consumption data on an entitled transaction.
    func recordConsent(_ transactionID: String, consented: Bool, now: Date) async throws
}

extension Ledger {
    /// Keeps a proof within the default bounds; false when one of them is reached.
    public func keepPendingProof(_ proof: PendingProofDraft, now: Date) async throws -> Bool {
        try await keepPendingProof(proof, bounds: PendingProofBounds(), now: now).isKept
    }

    /// Leases pending proofs of any transaction.
    public func leasePendingProofs(limit: Int, until: Date, now: Date) async throws -> [PendingProof] {
        try await leasePendingProofs(of: nil, limit: limit, until: until, now: now)
    }
}

/// Which owed calls to list.
public struct ServerCallFilter: Sendable, Equatable {
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

/// A notification as the ledger keeps it for audit.
public struct StoredNotification: Sendable, Equatable {
    public var record: NotificationRecord
    /// What applying it did.
    public var outcome: String
    public var receivedAt: Date

    public init(record: NotificationRecord, outcome: String, receivedAt: Date) {
        self.record = record
        self.outcome = outcome
        self.receivedAt = receivedAt
    }
}

/// The terms a claim is made on, besides the proof.
public struct ClaimTerms: Sendable, Equatable {
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

    public init(requestedProductID: String?, appAccountToken: String?, checksAccount: Bool, countsAttempt: Bool, customerConsented: Bool? = nil) {
        self.requestedProductID = requestedProductID
        self.appAccountToken = appAccountToken?.lowercased()
        self.checksAccount = checksAccount
        self.countsAttempt = countsAttempt
        self.customerConsented = customerConsented
    }

    /// An operator's re-verification: no account, no attempt, Apple's product.
    public static let reverification = ClaimTerms(requestedProductID: nil, appAccountToken: nil, checksAccount: false, countsAttempt: false)
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

    public init(transactionID: String, originalTransactionID: String, productID: String?, bundleID: String?, environment: StoreEnvironment?) {
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

/// An App Store Server Notification V2, as kept in the ledger.
public struct NotificationRecord: Sendable, Equatable {
    public var uuid: String
    public var type: String
    public var subtype: String?
    public var transactionID: String?
    public var originalTransactionID: String?
    /// The `signedPayload` as Apple sent it, kept verbatim for audit (nil on rows older than schema v6).
    public var signedPayload: String?
    /// How it arrived: `push` (Apple posted it) or `history` (`stockroom notifications sync`).
    public var source: String?

    public init(
        uuid: String, type: String, subtype: String?, transactionID: String?, originalTransactionID: String?, signedPayload: String? = nil,
        source: String? = nil
    ) {
        self.uuid = uuid
        self.type = type
        self.subtype = subtype
        self.transactionID = transactionID
        self.originalTransactionID = originalTransactionID
        self.signedPayload = signedPayload
        self.source = source
    }
}

/// Which fulfilments to list.
public struct FulfilmentFilter: Sendable, Equatable {
    public var states: Set<FulfilmentState>?
    public var productID: String?
    /// Only those updated at or after this time.
    public var since: Date?
    /// Only those with a finish call still queued (`fulfilments list --unfinished`).
    public var unfinished: Bool
    public var limit: Int

    public init(states: Set<FulfilmentState>? = nil, productID: String? = nil, since: Date? = nil, unfinished: Bool = false, limit: Int = 1000) {
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
