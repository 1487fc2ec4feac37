import Foundation

/// The fulfilment ledger: entitlements made only from verified proofs, pending proofs kept apart,
/// every download attempt logged, the calls owed to Apple, the notifications applied.
///
/// One protocol per role, each small: the decisions (written once, over an engine's `decide`),
/// the proofs kept while the App Store cannot be asked, the queue of calls owed to Apple, the
/// notification log, and the operator's reads. SQLite (`SQLiteLedger`) is the default engine;
/// PostgreSQL (`PostgresLedger`) serves several instances.
public protocol Ledger: LedgerDecisions, PendingProofQueue, ServerCallQueue, NotificationLog, LedgerViews, EventOutbox {}

/// What an operator reads of the ledger (the CLI, the admin API, the console, `/metrics`): rows,
/// attempts and counts, and the console's aggregates. Nothing decides on them; they only show.
public protocol LedgerViews: Sendable {
    /// One transaction's row.
    func fulfilment(_ transactionID: String) async throws -> Fulfilment?
    /// Rows matching `filter`, last changed first.
    func list(_ filter: FulfilmentListQuery) async throws -> [Fulfilment]
    /// A transaction's logged download attempts, oldest first.
    func attempts(of transactionID: String) async throws -> [DownloadAttempt]
    /// How many fulfilments are in each state (states with none are absent): for `/metrics`.
    func stateCounts() async throws -> [FulfilmentState: Int]
    /// Download attempts per hour since `since`, oldest first; hours without any are absent.
    func deliveriesPerHour(since: Date) async throws -> [HourlyDeliveries]
    /// The `limit` products with most fulfilments, with the ledger's totals.
    func productTallies(limit: Int) async throws -> ProductTallies
    /// One page of fulfilments matching `query`, newest first (created, then transaction ID).
    func fulfilmentPage(_ query: FulfilmentPageQuery) async throws -> FulfilmentPage
    /// Notifications naming the transaction or its purchase, newest first, at most `limit`.
    func notifications(transactionID: String, originalTransactionID: String, limit: Int) async throws -> [NotificationRecord]
}

/// Proofs kept while the App Store could not be asked: apart from entitlements, bounded, and
/// re-verified later by one holder at a time.
public protocol PendingProofQueue: Sendable {
    /// Kept proofs, oldest first; `status` nil lists every one.
    func pendingProofs(status: PendingProof.Status?, limit: Int) async throws -> [PendingProof]
    /// Proofs kept for one transaction, oldest first, at most `limit`.
    func pendingProofs(keptUnder transactionID: String, limit: Int) async throws -> [PendingProof]
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
}

/// Calls owed to the App Store Server API: a durable queue, leased to one sender at a time.
public protocol ServerCallQueue: Sendable {
    /// A refund request (CONSUMPTION_REQUEST) for `transactionID`, whose signed transaction names
    /// the app download `appTransactionID`: queues one consumption answer per transaction, or
    /// records that none is sent because no consent is on record or it was rescinded.
    func queueConsumptionAnswer(
        _ transactionID: String, environment: StoreEnvironment, appTransactionID: String?, requestedBy uuid: String, now: Date
    ) async throws -> ConsumptionQueueing
    /// Up to `limit` queued calls that are due and that no other sender holds, oldest first,
    /// now held by the caller until `until`.
    func leaseServerCalls(limit: Int, until: Date, now: Date) async throws -> [ServerCall]
    /// Settles a leased call; a sent finish stamps its transaction's `finished_at`.
    func completeServerCall(_ id: Int64, _ result: ServerCallResult, now: Date) async throws
    /// Calls on record, newest first.
    func serverCalls(_ filter: ServerCallListQuery) async throws -> [ServerCall]
}

/// The App Store Server Notifications applied, once per UUID, kept verbatim for audit.
public protocol NotificationLog: Sendable {
    /// Whether a notification with this UUID was recorded.
    func notificationSeen(_ uuid: String) async throws -> Bool
    /// Records a notification's UUID; false when it was recorded before.
    func recordNotification(_ notification: NotificationRecord, outcome: String, now: Date) async throws -> Bool
    /// A notification as recorded, with its signed payload verbatim.
    func storedNotification(_ uuid: String) async throws -> NotificationRecord?
    /// Records RESCIND_CONSENT for an app download; false when it was recorded before.
    func recordConsentRescission(_ rescission: ConsentRescission) async throws -> Bool
    /// The rescission recorded for the app download `appTransactionID` in `environment`, if any.
    func consentRescission(of appTransactionID: String, environment: StoreEnvironment) async throws -> ConsentRescission?
}

extension ServerCallQueue {
    /// A refund request whose transaction names no app download.
    public func queueConsumptionAnswer(_ transactionID: String, environment: StoreEnvironment, requestedBy uuid: String, now: Date)
        async throws -> ConsumptionQueueing
    {
        try await queueConsumptionAnswer(transactionID, environment: environment, appTransactionID: nil, requestedBy: uuid, now: now)
    }
}

extension PendingProofQueue {
    /// Keeps a proof within the default bounds; false when one of them is reached.
    public func keepPendingProof(_ proof: PendingProofDraft, now: Date) async throws -> Bool {
        try await keepPendingProof(proof, bounds: PendingProofBounds(), now: now).isKept
    }

    /// Leases pending proofs of any transaction.
    public func leasePendingProofs(limit: Int, until: Date, now: Date) async throws -> [PendingProof] {
        try await leasePendingProofs(of: nil, limit: limit, until: until, now: now)
    }
}
