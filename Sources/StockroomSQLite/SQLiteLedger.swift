import Foundation
import StockroomCore
import GRDB

/// The `Ledger` on SQLite, through GRDB: each decision is one write transaction (SQLite's one
/// writer is the purchase's lock) that re-reads the rows it depends on, so a refund or an
/// operator's revocation that lands meanwhile is seen.
public struct SQLiteLedger: Ledger, LedgerStatementRunner {
    public let database: AppDatabase
    /// When set, a transaction reaching this point is queued for Finish Transaction in the same write.
    public let finishOn: FinishTrigger?

    public init(database: AppDatabase, finishOn: FinishTrigger? = nil) {
        self.database = database
        self.finishOn = finishOn
    }

    // MARK: Reads

    public func fulfilment(_ transactionID: String) async throws -> Fulfilment? {
        try await database.writer.read { db in try Self.row(db, transactionID) }
    }

    public func list(_ filter: FulfilmentFilter) async throws -> [Fulfilment] {
        try await database.writer.read { db in
            var request = Fulfilment.all()
            if let states = filter.states { request = request.filter(states.map(\.rawValue).contains(FulfilmentColumn.state)) }
            if let product = filter.productID { request = request.filter(FulfilmentColumn.productID == product) }
            if let since = filter.since { request = request.filter(FulfilmentColumn.updatedAt >= since) }
            if filter.unfinished {
                request = request.filter(
                    sql: "transaction_id IN (SELECT transaction_id FROM server_calls WHERE kind = 'finish' AND status = 'queued')")
            }
            return try request.order(FulfilmentColumn.updatedAt.desc).limit(filter.limit).fetchAll(db)
        }
    }

    public func attempts(of transactionID: String) async throws -> [DownloadAttempt] {
        try await database.writer.read { db in
            try DownloadAttempt.filter(Column("transaction_id") == transactionID).order(Column("id")).fetchAll(db)
        }
    }

    public func pendingProofs(status: PendingProof.Status?, limit: Int) async throws -> [PendingProof] {
        try await database.writer.read { db in
            var request = PendingProof.all()
            if let status { request = request.filter(Column("status") == status.rawValue) }
            return try request.order(Column("id")).limit(limit).fetchAll(db)
        }
    }

    public func stateCounts() async throws -> [FulfilmentState: Int] {
        try await database.writer.read { db in
            var counts: [FulfilmentState: Int] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT state, COUNT(*) AS count FROM fulfilments GROUP BY state") {
                if let state = FulfilmentState(rawValue: row["state"]) { counts[state] = row["count"] }
            }
            return counts
        }
    }

    public func execute(_ statement: LedgerStatement) async throws -> Int {
        try await database.writer.write { db in try Self.execute(statement, db) }
    }

    // MARK: Decisions

    public func decide<Value: Sendable>(_ scope: PurchaseScope, _ decision: @escaping @Sendable (inout PurchaseWork) throws -> Value) async throws
        -> Value
    {
        try await database.writer.write { db in
            var work = try Self.read(db, scope)
            let value = try decision(&work)
            try Self.apply(work.writes, db)
            return value
        }
    }

    /// The rows `scope` names (the write transaction holds SQLite's one write lock).
    private static func read(_ db: Database, _ scope: PurchaseScope) throws -> PurchaseWork {
        switch scope {
        case .purchase(let transactionID, let originalTransactionID):
            return try purchase(db, transactionID: transactionID, originalTransactionID: originalTransactionID)
        case .purchaseOf(let transactionID):
            guard let row = try row(db, transactionID) else { return PurchaseWork(rows: []) }
            return try purchase(db, transactionID: row.transactionID, originalTransactionID: row.originalTransactionID)
        case .transaction(let transactionID):
            return PurchaseWork(rows: try row(db, transactionID).map { [$0] } ?? [])
        }
    }

    /// Writes what a decision wrote.
    private static func apply(_ writes: LedgerWrites, _ db: Database) throws {
        for statement in writes.statements { try execute(statement, db) }
    }

    // MARK: Proofs kept while the App Store cannot be asked

    public func keepPendingProof(_ draft: PendingProofDraft, bounds: PendingProofBounds, now: Date) async throws -> PendingProofKeeping {
        try await database.writer.write { db in
            try Self.purgeRejected(db, before: bounds.purgeCutoff(now: now), limit: PendingProofBounds.purgeBatch)
            if try Self.execute(.refresh(draft, now: now), db) > 0 { return .refreshed }
            let count = { (sql: String, arguments: StatementArguments) in try Int.fetchOne(db.cachedStatement(sql: sql), arguments: arguments) ?? 0 }
            let kept = PendingProofCounts(
                transaction: try count("SELECT COUNT(*) FROM pending_proofs WHERE transaction_id = ?", [draft.transactionID]),
                client: try draft.client.map { try count("SELECT COUNT(*) FROM pending_proofs WHERE client = ?", [$0]) } ?? 0,
                total: try count("SELECT COUNT(*) FROM pending_proofs", []))
            let verdict = bounds.admit(draft, kept: kept)
            guard verdict == .kept else { return verdict }
            try Self.execute(.insert(PendingProof(draft, now: now)), db)
            return .kept
        }
    }

    public func purgeRejectedPendingProofs(before: Date, limit: Int) async throws -> Int {
        try await database.writer.write { db in try Self.purgeRejected(db, before: before, limit: limit) }
    }

    /// Deletes up to `limit` rejected proofs last changed before `before`.
    @discardableResult
    private static func purgeRejected(_ db: Database, before: Date, limit: Int) throws -> Int {
        try db.cachedStatement(
            sql: """
                DELETE FROM pending_proofs WHERE id IN
                  (SELECT id FROM pending_proofs WHERE status = 'rejected' AND updated_at < ? ORDER BY updated_at LIMIT ?)
                """
        ).execute(arguments: [before, max(0, limit)])
        return db.changesCount
    }

    public func leasePendingProofs(of transactionID: String?, limit: Int, until: Date, now: Date) async throws -> [PendingProof] {
        try await database.writer.write { db in
            try PendingProof.fetchAll(
                db,
                sql: """
                    UPDATE pending_proofs SET leased_until = ? WHERE id IN
                      (SELECT id FROM pending_proofs WHERE status = 'pending' AND (leased_until IS NULL OR leased_until <= ?)
                       AND (? IS NULL OR transaction_id = ?) ORDER BY id LIMIT ?)
                    RETURNING *
                    """,
                arguments: [until, now, transactionID, transactionID, limit]
            ).sorted { ($0.id ?? 0) < ($1.id ?? 0) }
        }
    }

    // MARK: Rows
    // The statements every download runs are prepared once per connection and kept: preparing
    // (and GRDB's authorizer pass) cost more than running them.

    /// One transaction's row.
    static func row(_ db: Database, _ transactionID: String) throws -> Fulfilment? {
        try Fulfilment.fetchOne(db.cachedStatement(sql: "SELECT * FROM fulfilments WHERE transaction_id = ?"), arguments: [transactionID])
    }

    /// The transaction's row and every row of its purchase (restores), as the rules see them.
    private static func purchase(_ db: Database, transactionID: String, originalTransactionID: String) throws -> PurchaseWork {
        let statement = try db.cachedStatement(
            sql: "SELECT * FROM fulfilments WHERE original_transaction_id = ? OR transaction_id = ? OR transaction_id = ?")
        let rows = try Fulfilment.fetchAll(statement, arguments: [originalTransactionID, transactionID, originalTransactionID])
        return PurchaseWork(rows: rows)
    }
}
