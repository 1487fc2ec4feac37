/// One ledger decision's unit of work: the rows of one purchase (a transaction, its original and
/// every restore) as the decision reads them under the purchase's lock, in; the writes it makes,
/// out. Decisions are pure functions over it; an engine reads it and applies `writes`.
public struct PurchaseWork: Sendable {
    private var rows: [String: Fulfilment]
    private var insertedIDs: [String] = []
    private var changedIDs: Set<String> = []
    private var written = LedgerWrites()

    public init(rows: [Fulfilment]) {
        self.rows = Dictionary(rows.map { ($0.transactionID, $0) }, uniquingKeysWith: { first, _ in first })
    }

    /// Whether a restore is recording proofs: an entitlement it makes is reported restored.
    public var restoring = false

    public subscript(transactionID: String) -> Fulfilment? { rows[transactionID] }

    /// Every row, in transaction-ID order.
    public var all: [Fulfilment] { rows.values.sorted { $0.transactionID < $1.transactionID } }

    /// Whether any transaction of the purchase is revoked: then every one of them is.
    public var isRevoked: Bool { rows.values.contains { $0.state == .revoked } }

    /// The revocation causes standing on the purchase.
    public var standingRevocation: (byOperator: Date?, byRefund: Date?) {
        (rows.values.compactMap(\.revokedByOperatorAt).min(), rows.values.compactMap(\.revokedByRefundAt).min())
    }

    /// What the decision wrote, for the engine to apply in the same database transaction.
    public var writes: LedgerWrites {
        var writes = written
        writes.insertedRows = insertedIDs.compactMap { rows[$0] }
        writes.changedRows = changedIDs.subtracting(insertedIDs).sorted().compactMap { rows[$0] }
        return writes
    }

    /// Adds a row; returns it as stored (`numbered`).
    @discardableResult
    mutating func insert(_ row: Fulfilment) -> Fulfilment {
        precondition(rows[row.transactionID] == nil, "a row is inserted once")
        let stored = numbered(row, after: nil)
        rows[row.transactionID] = stored
        insertedIDs.append(row.transactionID)
        return stored
    }

    /// Changes a row; returns it as stored (`numbered`).
    @discardableResult
    mutating func update(_ row: Fulfilment) -> Fulfilment {
        guard let before = rows[row.transactionID] else { preconditionFailure("only a row read or inserted is updated") }
        let stored = numbered(row, after: before)
        rows[row.transactionID] = stored
        changedIDs.insert(row.transactionID)
        return stored
    }

    /// `row` with an event written for each step its state took since `before`
    /// (`LedgerEvent.changes`), each numbered next in its transaction's sequence.
    private mutating func numbered(_ row: Fulfilment, after before: Fulfilment?) -> Fulfilment {
        var row = row
        var sequence = before?.eventSequence ?? row.eventSequence ?? 0
        for change in LedgerEvent.changes(from: before, to: row, restoring: restoring) {
            sequence += 1
            row.eventSequence = sequence
            written.events.append(
                .about(row, type: change.type, sequence: sequence, detail: change.detail, cause: change.cause, now: row.updatedAt))
        }
        return row
    }

    /// Logs a download attempt of a transaction of the purchase.
    mutating func log(_ attempt: DownloadAttempt) {
        written.attempts.append(attempt)
    }

    /// A kept proof became an entitlement: it is no longer pending.
    mutating func settlePendingProof(transactionID: String, digest: String) {
        written.settledPendingProofs.append(PendingProofKey(transactionID: transactionID, digest: digest))
    }

    /// Queues a call owed to Apple, unless one of its kind is on record for its transaction.
    mutating func queue(_ call: ServerCall) {
        written.serverCalls.append(call)
    }
}

/// What one decision writes, applied by the engine in the decision's database transaction.
public struct LedgerWrites: Sendable, Equatable {
    /// Rows the decision added, in the order it added them.
    public var insertedRows: [Fulfilment] = []
    /// Rows that were there before and that it changed.
    public var changedRows: [Fulfilment] = []
    /// Download attempts to log; the log then keeps the newest `DownloadAttempt.keptPerTransaction` of each transaction.
    public var attempts: [DownloadAttempt] = []
    /// Kept proofs to delete: each became an entitlement.
    public var settledPendingProofs: [PendingProofKey] = []
    /// Calls owed to Apple, each inserted once per (kind, transaction).
    public var serverCalls: [ServerCall] = []
    /// What happened, for the event log and webhooks: written with the rows they report.
    public var events: [LedgerEvent] = []

    public init() {}
}

/// A kept proof, named by its transaction ID and digest (unique together).
public struct PendingProofKey: Sendable, Equatable {
    public var transactionID: String
    public var digest: String
}

/// Which rows a decision reads, under which lock.
public enum PurchaseScope: Sendable, Equatable {
    /// The rows of the purchase `originalTransactionID`, and of `transactionID` (which may be new),
    /// under the purchase's lock.
    case purchase(transactionID: String, originalTransactionID: String)
    /// The purchase of a transaction on record, whose row names it; no rows when it is not on record.
    case purchaseOf(transactionID: String)
    /// One transaction's row alone, locked; no rows when it is not on record.
    case transaction(String)
}

import Foundation
