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
            var archive = LedgerArchive()
            archive.fulfilments = try await LedgerRows.decode(
                Fulfilment.self,
                try await connection.query("SELECT \(unescaped: LedgerRows.fulfilment) FROM fulfilments f ORDER BY f.transaction_id", logger: logger))
            archive.attempts = try await LedgerRows.decode(
                DownloadAttempt.self, try await connection.query("SELECT \(unescaped: LedgerRows.attempt) FROM download_attempts a ORDER BY a.id", logger: logger))
            archive.pendingProofs = try await LedgerRows.decode(
                PendingProof.self, try await connection.query("SELECT \(unescaped: LedgerRows.pendingProof) FROM pending_proofs p ORDER BY p.id", logger: logger))
            archive.notifications = try await LedgerRows.decode(
                NotificationRecord.self,
                try await connection.query(
                    "SELECT \(unescaped: LedgerRows.json("n", times: ["received_at"])) FROM notifications n ORDER BY n.notification_uuid", logger: logger))
            archive.serverCalls = try await LedgerRows.decode(
                ServerCall.self, try await connection.query("SELECT \(unescaped: LedgerRows.serverCall) FROM server_calls c ORDER BY c.id", logger: logger))
            return archive
        }
    }

    /// Writes every row of `archive` into this ledger, which must be empty; identities continue
    /// after the highest imported ID. Nothing is written when anything fails.
    public func restore(_ archive: LedgerArchive) async throws {
        try await database.transaction(bounded: false) { connection in
            for table in ["fulfilments", "download_attempts", "pending_proofs", "notifications", "server_calls"] {
                let rows = try await connection.query(PostgresQuery(unsafeSQL: "SELECT 1 FROM \(table) LIMIT 1"), logger: logger).collect()
                guard rows.isEmpty else { throw LedgerArchive.Malformed(description: "the target ledger is not empty: \(table) has rows") }
            }
            for statement in archive.insertions { try await execute(statement, on: connection) }
            for table in ["download_attempts", "pending_proofs", "server_calls"] {
                try await connection.query(
                    PostgresQuery(
                        unsafeSQL: "SELECT setval(pg_get_serial_sequence('\(table)', 'id'), COALESCE((SELECT max(id) FROM \(table)), 0) + 1, false)"),
                    logger: logger
                ).drain()
            }
        }
    }
}
