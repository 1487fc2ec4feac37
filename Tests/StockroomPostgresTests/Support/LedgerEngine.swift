import Foundation
import GRDB
import PostgresNIO
import StockroomCore
import StockroomSQLite
import StockroomPostgres
import StockroomTestSupport

/// The engines one behaviour is tested on: ledger and server suites take it as an argument
/// (`@Test(arguments: LedgerEngine.allCases)`), so each case runs on SQLite and on PostgreSQL.
public enum LedgerEngine: String, CaseIterable, Sendable, CustomStringConvertible {
    case sqlite
    case postgres

    public var description: String { rawValue }
}

/// A ledger on one engine for one test, with the engine's own SQL for what only the schema
/// can show (its CHECKs, a row changed behind the ledger's back).
public struct TestLedger: Sendable {
    public let engine: LedgerEngine
    public let ledger: any Ledger
    private let run: @Sendable (String) async throws -> Void

    /// Runs one SQL statement on the ledger's database directly.
    public func execute(_ sql: String) async throws {
        try await run(sql)
    }

    /// Whether `error` is the database refusing a write for a constraint (CHECK, NOT NULL, UNIQUE):
    /// SQLite's SQLITE_CONSTRAINT, PostgreSQL's SQLSTATE class 23.
    public static func isConstraintViolation(_ error: any Error) -> Bool {
        if let error = error as? DatabaseError { return error.resultCode == .SQLITE_CONSTRAINT }
        if let error = error as? PSQLError { return error.serverInfo?[.sqlState]?.hasPrefix("23") ?? false }
        return false
    }

    /// A fresh ledger on `engine` (a SQLite file in a temporary folder, or a PostgreSQL database
    /// of its own) for the duration of `body`.
    public static func with<Value: Sendable>(
        _ engine: LedgerEngine, finishOn: FinishTrigger? = nil, tellsAppleOfAccounts: Bool = false,
        _ body: @Sendable (TestLedger) async throws -> Value
    ) async throws -> Value {
        switch engine {
        case .sqlite:
            let folder = try TemporaryFolder()
            let ledger = SQLiteLedger(
                database: try SQLiteDatabase(path: folder.path + "/ledger.sqlite"), finishOn: finishOn,
                tellsAppleOfAccounts: tellsAppleOfAccounts)
            let value = try await body(
                TestLedger(engine: engine, ledger: ledger) { sql in
                    try await ledger.database.writer.write { db in try db.execute(sql: sql) }
                })
            withExtendedLifetime(folder) {}
            return value
        case .postgres:
            return try await ScratchPostgres.withLedger(finishOn: finishOn, tellsAppleOfAccounts: tellsAppleOfAccounts) { ledger in
                try await body(
                    TestLedger(engine: engine, ledger: ledger) { sql in
                        _ = try await ledger.database.client.query(PostgresQuery(unsafeSQL: sql)).collect()
                    })
            }
        }
    }

    /// A second ledger on the same database, as a second instance opens it (its own pool, or
    /// its own SQLite connection), for the duration of `body`.
    public func another<Value: Sendable>(_ body: @Sendable (any Ledger) async throws -> Value) async throws -> Value {
        switch ledger {
        case let sqlite as SQLiteLedger:
            return try await body(SQLiteLedger(database: try SQLiteDatabase(path: sqlite.database.writer.path)))
        case let postgres as PostgresLedger:
            let pool = PostgresPool(
                address: postgres.database.address, poolSize: 4, checkoutTimeout: .seconds(30), logger: ScratchPostgres.quiet)
            return try await pool.running { database in
                try await body(PostgresLedger(database: database))
            }
        default:
            throw ScratchPostgres.Unavailable(description: "a TestLedger is on SQLite or PostgreSQL")
        }
    }
}
