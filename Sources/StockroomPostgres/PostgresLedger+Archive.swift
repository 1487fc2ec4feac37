import Foundation
import PostgresNIO
import StockroomCore

/// Moving a ledger: every row out, in one consistent snapshot; every row in, into an empty
/// ledger, in one transaction.
extension PostgresLedger {
    /// Every row of every table, read in one repeatable-read transaction.
    public func archive() async throws -> LedgerArchive {
        try await database.transaction(bounded: false) { connection in
            try await connection.query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY", logger: logger).drain()
            func rows<Row: LedgerRow>(_ type: Row.Type, _ order: String) async throws -> [Row] {
                try await fetch(.everyRow(of: type, orderedBy: order), as: type, on: connection)
            }
            var archive = LedgerArchive()
            archive.fulfilments = try await rows(Fulfilment.self, LedgerDialect.postgres.bytewise("transaction_id"))
            archive.attempts = try await rows(DownloadAttempt.self, "id")
            archive.pendingProofs = try await rows(PendingProof.self, "id")
            archive.notifications = try await rows(NotificationRecord.self, LedgerDialect.postgres.bytewise("notification_uuid"))
            archive.serverCalls = try await rows(ServerCall.self, "id")
            return archive
        }
    }

    /// Writes every row of `archive` into this ledger, which must be empty; identities continue
    /// after the highest imported ID. Nothing is written when anything fails.
    public func restore(_ archive: LedgerArchive) async throws {
        try await database.transaction(bounded: false) { connection in
            for table in LedgerArchive.tables {
                guard try await execute(.anyRow(in: table), on: connection) == 0 else {
                    throw LedgerArchive.Malformed(description: "the target ledger is not empty: \(table) has rows")
                }
            }
            for statement in archive.insertions { try await execute(statement, on: connection) }
            for table in ["download_attempts", "pending_proofs", "server_calls"] {
                try await connection.query(
                    PostgresQuery(
                        unsafeSQL:
                            "SELECT setval(pg_get_serial_sequence('\(table)', 'id'), COALESCE((SELECT max(id) FROM \(table)), 0) + 1, false)"
                    ),
                    logger: logger
                ).drain()
            }
        }
    }
}
