import Foundation
import StockroomCore
import GRDB

/// The `Ledger` on SQLite, through GRDB: each decision is one write transaction (SQLite's one
/// writer is the purchase's lock) that re-reads the rows it depends on, so a refund or an
/// operator's revocation that lands meanwhile is seen. Reads run on the reader pool, never the
/// writer. The flows themselves are the shared ones (`LedgerTransaction`).
public struct SQLiteLedger: Ledger, LedgerStatementRunner {
    public let database: SQLiteDatabase
    /// When set, a transaction reaching this point is queued for Finish Transaction in the same write.
    public let finishOn: FinishTrigger?

    /// Whether binding a purchase Apple holds without an account queues Set App Account Token.
    public let tellsAppleOfAccounts: Bool

    public init(database: SQLiteDatabase, finishOn: FinishTrigger? = nil, tellsAppleOfAccounts: Bool = false) {
        self.database = database
        self.finishOn = finishOn
        self.tellsAppleOfAccounts = tellsAppleOfAccounts
    }

    public var dialect: LedgerDialect { .sqlite }

    public func fetch<Record: LedgerRecord>(_ statement: LedgerStatement, as type: Record.Type) async throws -> [Record] {
        guard statement.isRead else { return try await database.writer.write { db in try Self.fetch(statement, as: type, db) } }
        return try await database.writer.read { db in try Self.fetch(statement, as: type, db) }
    }

    // MARK: Transactions

    /// A write transaction (SQLite's one writer is the purchase's lock, and every other lock), or
    /// for a snapshot a read transaction on the reader pool.
    public func transaction<Value: Sendable>(
        _ kind: LedgerTransactionKind, _ body: @escaping @Sendable (any LedgerTransaction) throws -> Value
    ) async throws -> Value {
        switch kind {
        case .snapshot: try await database.writer.read { db in try body(Transaction(db: db)) }
        case .write, .bulk: try await database.writer.write { db in try body(Transaction(db: db)) }
        }
    }

    private struct Transaction: LedgerTransaction {
        let db: Database

        func fetch<Record: LedgerRecord>(_ statement: LedgerStatement, as type: Record.Type, locking: Bool) throws -> [Record] {
            try SQLiteLedger.fetch(statement, as: type, db)
        }

        func lock(_ key: String, shared: Bool) throws {}
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
