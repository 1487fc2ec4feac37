import Logging
import PostgresNIO
import StockroomCore

/// The ledger's tables on PostgreSQL: `LedgerSchema`'s migrations, the SQLite ledger's too,
/// recorded in `schema_migrations`.
///
/// Migrations run under a session advisory lock, so instances that start together migrate once:
/// the second waits, then finds nothing left to do. A shipped migration never changes.
enum PostgresSchema {
    /// The advisory lock of migrations, in the two-key space (decisions use the one-key space).
    static let lock: (Int32, Int32) = (0x5354_4B52, 1)  // "STKR"

    /// A ledger migrated by a newer Stockroom: this one must not write to it.
    struct NewerSchema: Error, CustomStringConvertible {
        let version: Int
        var description: String {
            "the ledger's schema is at version \(version), newer than this Stockroom knows (\(PostgresSchema.newest))"
        }
    }

    static let migrations = LedgerSchema.migrations(.postgres)
    /// The newest version this Stockroom knows (versions are numbered, not counted: one may be
    /// another branch's, merged in between).
    static let newest = migrations.map(\.version).max() ?? 0

    /// Applies every migration `connection`'s database lacks, holding the lock meanwhile;
    /// returns the versions applied.
    static func migrate(_ connection: PostgresConnection, logger: Logger) async throws -> [Int] {
        try await connection.query("SELECT pg_advisory_lock(\(lock.0), \(lock.1))", logger: logger).drain()
        do {
            let applied = try await pending(connection, logger: logger)
            try await connection.query("SELECT pg_advisory_unlock(\(lock.0), \(lock.1))", logger: logger).drain()
            return applied
        } catch {
            // A broken connection releases the lock by itself; a live one is unlocked here.
            _ = try? await connection.query("SELECT pg_advisory_unlock(\(lock.0), \(lock.1))", logger: logger).drain()
            throw error
        }
    }

    private static func pending(_ connection: PostgresConnection, logger: Logger) async throws -> [Int] {
        try await connection.query(
            """
            CREATE TABLE IF NOT EXISTS schema_migrations (
              version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())
            """, logger: logger
        ).drain()
        var known = Set<Int>()
        for try await version in try await connection.query("SELECT version FROM schema_migrations", logger: logger).decode(Int.self) {
            known.insert(version)
        }
        if let version = known.max(), version > newest { throw NewerSchema(version: version) }
        var applied: [Int] = []
        for migration in migrations where !known.contains(migration.version) {
            try await connection.withTransaction(logger: logger) { connection in
                for statement in migration.statements {
                    try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger).drain()
                }
                try await connection.query(
                    "INSERT INTO schema_migrations (version, name) VALUES (\(migration.version), \(migration.name))", logger: logger
                ).drain()
            }
            logger.notice("ledger migrated", metadata: ["migration": .string(migration.name)])
            applied.append(migration.version)
        }
        return applied
    }
}

extension PostgresRowSequence {
    /// Reads every row the statement sends, so the connection is free for the next one.
    func drain() async throws {
        for try await _ in self {}
    }
}
