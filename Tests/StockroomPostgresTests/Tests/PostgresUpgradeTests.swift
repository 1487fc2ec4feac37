import Foundation
import StockroomCore
import StockroomPostgres
import StockroomPostgresTestSupport
import Testing

/// A PostgreSQL ledger with rows, made by an older Stockroom, migrated by this one: nothing is
/// lost, and what the new migrations allow is allowed.
@Suite struct PostgresUpgradeTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    /// The database at `address` as a Stockroom whose newest migration is `version` left it.
    static func migrate(_ address: PostgresAddress, upTo version: Int) async throws {
        try await ScratchPostgres.admin(
            address,
            """
            CREATE TABLE schema_migrations (
              version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())
            """)
        for migration in LedgerSchema.migrations(.postgres) where migration.version <= version {
            for statement in migration.statements { try await ScratchPostgres.admin(address, statement) }
            try await ScratchPostgres.admin(address, "INSERT INTO schema_migrations (version, name) VALUES (\(migration.version), 'v')")
        }
    }

    /// v8 to v9 (the calls owed to Apple gain a kind): the calls on record keep their IDs and
    /// fields, the new kind is accepted, an unknown one is still refused, and IDs continue.
    @Test func aLedgerWithCallsOnRecordMigratesToSetAppAccountToken() async throws {
        try await ScratchPostgres.withDatabase { address in
            try await Self.migrate(address, upTo: 8)
            for (id, kind, status) in [(3, "finish", "sent"), (7, "consumption", "queued")] {
                try await ScratchPostgres.admin(
                    address,
                    """
                    INSERT INTO server_calls (id, kind, transaction_id, environment, status, attempts, due_at, body, requested_by,
                      created_at, updated_at)
                    VALUES (\(id), '\(kind)', 't\(id)', 'Production', '\(status)', 2, now(), 'b', 'u', now(), now())
                    """)
            }
            try await ScratchPostgres.admin(address, "SELECT setval(pg_get_serial_sequence('server_calls', 'id'), 7)")
            try await PostgresPool(address: address, poolSize: 2, checkoutTimeout: .seconds(30), logger: ScratchPostgres.quiet).running {
                database in
                let ledger = PostgresLedger(database: database)
                let kept = try await ledger.serverCalls(ServerCallListQuery())
                #expect(kept.map(\.id) == [7, 3])
                #expect(kept.map(\.kind) == [.consumption, .finish])
                #expect(kept.allSatisfy { $0.attempts == 2 && $0.body == "b" && $0.requestedBy == "u" })
                let call = ServerCall.appAccountToken(
                    "5a3b6c1e-0f4d-4b8a-9c2e-7d1f0a2b3c4d", originalTransactionID: "1", environment: .production, now: Self.now)
                #expect(try await ledger.execute(.queue(call)) == 1)
                #expect(try await ledger.serverCalls(ServerCallListQuery(kind: .appAccountToken)).map(\.id) == [8])
                await #expect(throws: (any Error).self) {
                    try await ScratchPostgres.admin(
                        address,
                        """
                        INSERT INTO server_calls (kind, transaction_id, environment, status, due_at, created_at, updated_at)
                          VALUES ('nonsense', 'x', 'Production', 'queued', now(), now(), now())
                        """)
                }
            }
        }
    }
}
