import Foundation

/// How many unverified proofs the ledger keeps, and for how long: an outage must not grow it
/// without bound, whoever sends proofs and however many.
///
/// Every status counts (a rejected proof still holds its place until it is purged), so
/// re-fulfilling or rejecting proofs frees no room for a flood. The rule is written once here;
/// each engine only counts and writes.
public struct PendingProofBounds: Sendable, Equatable {
    /// Proofs kept in all (`--max-pending-proofs`).
    public var total: Int
    /// Proofs kept from one client address (`--max-pending-proofs-per-client`).
    public var perClient: Int
    /// The longest proof kept, in bytes of its normalised text (`--max-pending-proof-size`).
    public var maximumProofBytes: Int
    /// How long a rejected proof stays for the operator to see before it is purged (`--rejected-proof-retention`).
    public var rejectedRetention: Duration
    /// Rejected proofs purged by one keep at most: the purge a request pays for stays small.
    public static let purgeBatch = 100

    public init(
        total: Int = 5_000, perClient: Int = 20, maximumProofBytes: Int = 128 * 1024, rejectedRetention: Duration = .seconds(30 * 24 * 3600)
    ) {
        self.total = max(1, total)
        self.perClient = max(1, perClient)
        self.maximumProofBytes = max(1, maximumProofBytes)
        self.rejectedRetention = rejectedRetention
    }

    /// Rejected proofs last changed before this are purged.
    public func purgeCutoff(now: Date) -> Date {
        let (seconds, attoseconds) = rejectedRetention.components
        return now.addingTimeInterval(-(Double(seconds) + Double(attoseconds) / 1e18))
    }

    /// Whether a new proof may be kept, given what is kept already (every status).
    public func admit(_ draft: PendingProofDraft, kept: PendingProofCounts) -> PendingProofKeeping {
        if draft.proof.utf8.count > maximumProofBytes { return .tooLarge }
        if kept.transaction >= PendingProof.perTransaction { return .transactionFull }
        if draft.client != nil, kept.client >= perClient { return .clientFull }
        if kept.total >= total { return .ledgerFull }
        return .kept
    }
}

extension PendingProofBounds {
    /// `admit(_:kept:)` on what the engine read of `LedgerStatement.pendingProofCounts`: exactly
    /// one row, or it throws. No row must never read as nothing kept, which would let every proof in.
    public func admit(_ draft: PendingProofDraft, counted rows: [PendingProofCounts]) throws -> PendingProofKeeping {
        guard rows.count == 1, let kept = rows.first else { throw LedgerRowError(column: "total", missing: true) }
        return admit(draft, kept: kept)
    }
}

/// The proofs already kept that a new one is counted with.
public struct PendingProofCounts: Sendable, Equatable {
    /// Under the same transaction ID.
    public var transaction: Int
    /// From the same client address (0 for a proof with no client: an operator's or a test's).
    public var client: Int
    /// In all.
    public var total: Int

    public init(transaction: Int, client: Int, total: Int) {
        self.transaction = transaction
        self.client = client
        self.total = total
    }
}

/// What keeping a proof came to.
public enum PendingProofKeeping: String, Sendable, Equatable {
    /// A new row.
    case kept
    /// The same proof was kept under this transaction already: its row was refreshed.
    case refreshed
    /// Longer than `maximumProofBytes`: not kept.
    case tooLarge = "too_large"
    /// `PendingProof.perTransaction` proofs are kept under this transaction already.
    case transactionFull = "transaction_full"
    /// This client's share is used up.
    case clientFull = "client_full"
    /// The ledger holds `total` proofs already.
    case ledgerFull = "ledger_full"

    /// Whether the proof is in the ledger now.
    public var isKept: Bool { self == .kept || self == .refreshed }
}
