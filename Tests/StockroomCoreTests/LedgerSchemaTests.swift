import Foundation
import GRDB
import PostgresNIO
import StockroomCore
import StockroomPostgres
import StockroomPostgresTestSupport
import StockroomSQLite
import StockroomTestSupport
import Testing

/// Both engines run `LedgerSchema`'s one text, each with its own spelling of a generated key, a
/// time and a 64-bit count: a fresh ledger has the same tables, columns (in order, with their
/// kind and NOT NULL) and indexes on SQLite as on PostgreSQL.
@Suite struct LedgerSchemaTests {
    /// One column as both engines can say it: its table, name, kind and nullability.
    struct Column: Hashable, CustomStringConvertible {
        let table: String
        let name: String
        let kind: String
        let notNull: Bool
        var description: String { "\(table).\(name) \(kind)\(notNull ? " NOT NULL" : "")" }
    }

    @Test func aFreshLedgerHasTheSameSchemaOnBothEngines() async throws {
        let folder = try TemporaryFolder()
        let sqlite = try SQLiteDatabase(path: folder.path + "/ledger.sqlite")
        let (sqliteColumns, sqliteIndexes) = try await sqlite.writer.read { db in
            let tables = try String.fetchAll(
                db,
                sql:
                    """
                    SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name != 'grdb_migrations' \
                    ORDER BY name
                    """
            )
            var columns: [Column] = []
            for table in tables {
                for row in try Row.fetchAll(
                    db, sql: "SELECT name, type, \"notnull\", pk FROM pragma_table_info(?) ORDER BY cid", arguments: [table])
                {
                    let type: String = row["type"]
                    let kind = ["DATETIME": "time", "TEXT": "text", "INTEGER": "integer", "BOOLEAN": "boolean"][type] ?? type
                    let notNull: Bool = row["notnull"] || (row["pk"] as Int > 0 && type == "INTEGER")
                    columns.append(Column(table: table, name: row["name"], kind: kind, notNull: notNull))
                }
            }
            let indexes = try String.fetchAll(
                db, sql: "SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL ORDER BY name")
            return (columns, indexes)
        }
        withExtendedLifetime(folder) {}
        let (postgresColumns, postgresIndexes) = try await ScratchPostgres.withDatabase { address in
            try await PostgresPool.migrate(address: address, logger: ScratchPostgres.quiet)
            return try await PostgresPool(address: address, poolSize: 1, checkoutTimeout: .seconds(30), logger: ScratchPostgres.quiet)
                .running { database in
                    var columns: [Column] = []
                    let rows = try await database.client.query(
                        """
                        SELECT table_name::text, column_name::text, data_type::text, is_nullable::text FROM information_schema.columns
                        WHERE table_schema = 'public' AND table_name != 'schema_migrations' ORDER BY table_name, ordinal_position
                        """)
                    for try await (table, name, type, nullable) in rows.decode((String, String, String, String).self) {
                        let kind =
                            [
                                "timestamp with time zone": "time", "text": "text", "bigint": "integer", "integer": "integer",
                                "boolean": "boolean",
                            ][type] ?? type
                        columns.append(Column(table: table, name: name, kind: kind, notNull: nullable == "NO"))
                    }
                    // The indexes CREATE INDEX made: not those of primary keys and UNIQUE constraints.
                    let indexes = try await database.client.query(
                        """
                        SELECT indexname::text FROM pg_indexes WHERE schemaname = 'public'
                          AND indexname NOT IN (SELECT conname FROM pg_constraint) ORDER BY indexname
                        """
                    ).decode(String.self).reduce(into: [String]()) { $0.append($1) }
                    return (columns, indexes)
                }
        }
        #expect(sqliteColumns.count == 103, "every column of every table")
        #expect(sqliteColumns == postgresColumns)
        // Each table's columns as its record declares them, once (its CodingKeys), in the schema's
        // order. Apart: the schema's marker table, a pending proof's lease, which only the
        // statements that lease and settle proofs write (a kept proof carries none), and a
        // delivery's place first in its line, which only the statements that change a line write.
        let records: [any LedgerRow.Type] = [
            Fulfilment.self, DownloadAttempt.self, PendingProof.self, NotificationRecord.self, ServerCall.self, LedgerEvent.self,
            WebhookDelivery.self, ConsentRescission.self,
        ]
        #expect(Set(records.map { $0.table } + ["stockroom_meta"]) == Set(sqliteColumns.map(\.table)), "every table has its record")
        for record in records {
            let apart = ["pending_proofs.leased_until", "webhook_deliveries.head_of_line"]
            let schema = sqliteColumns.filter { $0.table == record.table && !apart.contains("\($0.table).\($0.name)") }
            #expect(record.columnNames == schema.map(\.name), "\(record.table)")
        }
        #expect(sqliteIndexes.count == 16)
        #expect(sqliteIndexes == postgresIndexes)
    }

    /// Every column is read back as written, on both engines, through the one `init(row:)` each
    /// engine's cells feed: every kind of value, and NULL in every column that may hold it.
    @Test(arguments: LedgerEngine.allCases) func aFulfilmentReadsBackAsWrittenWithEveryColumnSetOrNone(_ engine: LedgerEngine) async throws
    {
        try await TestLedger.with(engine) { (test: TestLedger) async throws in
            let runner = try #require(test.ledger as? any LedgerStatementRunner)
            let at = { (seconds: Double) in Date(timeIntervalSince1970: 1_800_000_000 + seconds) }
            let full = Fulfilment(
                transactionID: "1", originalTransactionID: "0", productID: "com.example.book", bundleID: "com.example.app",
                environment: .sandbox,
                proofKind: .signedTransaction, proof: "a.b.c", proofDigest: "d1", appAccountToken: "3f1c0e4e-0000-4000-8000-000000000001",
                expiresAt: at(9.125), state: .revoked, verifiedAt: at(1.5), attempts: 3, bytesDelivered: 5_000_000_000,
                lastError: "refunded",
                createdAt: at(0.25), updatedAt: at(8), deliveredAt: at(2), acknowledgedAt: at(3), revokedAt: at(4),
                revokedByOperatorAt: at(5),
                revokedByRefundAt: at(6), finishedAt: at(7), customerConsented: false)
            let bare = Fulfilment(
                transactionID: "2", originalTransactionID: "2", productID: "com.example.book", bundleID: "com.example.app",
                environment: nil,
                proofKind: .receipt, proof: "cmVjZWlwdA==", proofDigest: nil, appAccountToken: nil, expiresAt: nil, state: .verified,
                verifiedAt: nil, attempts: 0, bytesDelivered: 0, lastError: nil, createdAt: at(0), updatedAt: at(0), deliveredAt: nil,
                acknowledgedAt: nil, revokedAt: nil, revokedByOperatorAt: nil, revokedByRefundAt: nil)
            for row in [full, bare] {
                try await runner.execute(.insert(row))
                #expect(try await test.ledger.fulfilment(row.transactionID) == row)
            }
            #expect(try await test.ledger.list(FulfilmentListQuery()).sorted { $0.transactionID < $1.transactionID } == [full, bare])
        }
    }
}
