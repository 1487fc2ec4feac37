import Foundation
import StockroomCore
import GRDB

/// The `Ledger` on SQLite, through GRDB: each decision is one write transaction (SQLite's one
/// writer is the purchase's lock) that re-reads the rows it depends on, so a refund or an
/// operator's revocation that lands meanwhile is seen. Reads run on the reader pool, never the writer.
public struct SQLiteLedger: Ledger, LedgerStatementRunner {
    public let database: SQLiteDatabase
    /// When set, a transaction reaching this point is queued for Finish Transaction in the same write.
    public let finishOn: FinishTrigger?

    public init(database: SQLiteDatabase, finishOn: FinishTrigger? = nil) {
        self.database = database
        self.finishOn = finishOn
    }

    public var dialect: LedgerDialect { .sqlite }

    public func fetch<Record: LedgerRecord>(_ statement: LedgerStatement, as type: Record.Type) async throws -> [Record] {
        guard statement.isRead else { return try await database.writer.write { db in try Self.fetch(statement, as: type, db) } }
        return try await database.writer.read { db in try Self.fetch(statement, as: type, db) }
    }

    // MARK: Decisions

    public func decide<Value: Sendable>(_ scope: PurchaseScope, _ decision: @escaping @Sendable (inout PurchaseWork) throws -> Value)
        async throws
        -> Value
    {
        try await database.writer.write { db in
            var work = PurchaseWork(rows: try Self.read(db, scope))
            let value = try decision(&work)
            for statement in work.writes.statements { try Self.execute(statement, db) }
            return value
        }
    }

    /// The rows `scope` names (the write transaction holds SQLite's one write lock).
    private static func read(_ db: Database, _ scope: PurchaseScope) throws -> [Fulfilment] {
        switch scope {
        case .purchase(let transactionID, let originalTransactionID):
            return try fetch(.purchase(transactionID: transactionID, originalTransactionID: originalTransactionID), as: Fulfilment.self, db)
        case .purchaseOf(let transactionID):
            guard let row = try fetch(.fulfilment(transactionID), as: Fulfilment.self, db).first else { return [] }
            return try fetch(
                .purchase(transactionID: row.transactionID, originalTransactionID: row.originalTransactionID), as: Fulfilment.self, db)
        case .transaction(let transactionID):
            return try fetch(.fulfilment(transactionID), as: Fulfilment.self, db)
        }
    }

    // MARK: Proofs kept while the App Store cannot be asked

    public func keepPendingProof(_ draft: PendingProofDraft, bounds: PendingProofBounds, now: Date) async throws -> PendingProofKeeping {
        try await database.writer.write { db in
            let cutoff = bounds.purgeCutoff(now: now)
            try Self.execute(.purgeRejectedPendingProofs(before: cutoff, limit: PendingProofBounds.purgeBatch, .sqlite), db)
            if try Self.execute(.refresh(draft, now: now), db) > 0 { return .refreshed }
            let verdict = try bounds.admit(draft, counted: try Self.fetch(.pendingProofCounts(draft), as: PendingProofCounts.self, db))
            guard verdict == .kept else { return verdict }
            try Self.execute(.insert(PendingProof(draft, now: now)), db)
            return .kept
        }
    }

    // MARK: Statements
    // Every statement is prepared once per connection and kept: preparing (and GRDB's authorizer
    // pass) cost more than running the ones every download runs.

    /// Runs one of the ledger's shared statements in `db` and reads each row it returns as `Record`.
    public static func fetch<Record: LedgerRecord>(_ statement: LedgerStatement, as type: Record.Type, _ db: Database) throws -> [Record] {
        let prepared = try db.cachedStatement(sql: statement.sql)
        // A closure, not a key path: a key path here is instantiated on every call, half of binding's time.
        try prepared.setArguments(StatementArguments(statement.arguments.map { $0.databaseValue }))
        guard prepared.columnCount > 0 else {
            try prepared.execute()
            return []
        }
        let columns = SQLiteColumns(prepared)
        return try Array(Row.fetchCursor(prepared).map { try Record(row: SQLiteCells(row: $0, columns: columns)) })
    }

    /// Runs one of the ledger's shared statements in `db`; returns how many rows it returned (`RETURNING`).
    @discardableResult
    public static func execute(_ statement: LedgerStatement, _ db: Database) throws -> Int {
        try fetch(statement, as: ReturnedRow.self, db).count
    }
}
