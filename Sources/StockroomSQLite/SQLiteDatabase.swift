public import GRDB
import Foundation
import StockroomCore

/// The owner of the ledger database: its connection pool and its migrations.
///
/// SQLite in WAL mode (a `DatabasePool`): readers never block the writer, and the CLI can
/// work on the file while the server runs. Migrations are append-only.
///
/// `synchronous = NORMAL`: in WAL mode a commit survives a crash or kill of the process (it is
/// in the OS before the call returns); only a power loss can drop the last commits before a
/// checkpoint. That loss is recoverable: StoreKit keeps a transaction unfinished until the app
/// acknowledges it, so the app comes back with its receipt. FULL would fsync every download's
/// two commits and cap throughput at the disk's sync rate.
public final class SQLiteDatabase: Sendable {
    public let writer: any DatabaseWriter

    /// Opens (creating if needed) the database at `path` and migrates it.
    public init(path: String) throws {
        var configuration = Configuration()
        configuration.busyMode = .timeout(5)
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
            try db.execute(sql: "PRAGMA foreign_keys = ON")
        }
        try Self.restrictPermissions(path)
        self.writer = try DatabasePool(path: path, configuration: configuration)
        try Self.migrator.migrate(writer)
    }

    /// `writer` as it is, its schema untouched (a backup's copy, read to be checked).
    init(unmigrated writer: any DatabaseWriter) {
        self.writer = writer
    }

    /// Every schema version, in order: `LedgerSchema`'s statements, and after v4 the rewriting of
    /// rows that only SQLite ledgers of v3 held.
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        for migration in LedgerSchema.migrations(.sqlite) {
            migrator.registerMigration(migration.name) { db in
                for statement in migration.statements { try db.execute(sql: statement) }
                if migration.version == 4 { try separatePendingProofs(db) }
            }
        }
        return migrator
    }

    /// v4: a pending row held a request's unverified claims (its product among them): it becomes
    /// a pending proof, which never authorises anything; the proof on record is normalised (an
    /// outage compares a request's proof with it); each revocation keeps its cause, so that only
    /// its counterpart can lift it.
    private static func separatePendingProofs(_ db: Database) throws {
        for row in try Row.fetchAll(db, sql: "SELECT * FROM fulfilments WHERE state = 'pending'") {
            let proof: String = row["proof"]
            let normalised = ReceiptProof.parse(proof)?.text ?? proof
            try db.execute(
                sql: """
                    INSERT OR IGNORE INTO pending_proofs (transaction_id, proof_digest, proof_kind, proof, requested_product_id,
                      status, last_error, created_at, updated_at) VALUES (?, ?, ?, ?, ?, 'pending', ?, ?, ?)
                    """,
                arguments: [
                    row["transaction_id"], VerifiedProof.digest(of: normalised), row["proof_kind"], normalised, row["product_id"],
                    row["last_error"], row["created_at"], row["updated_at"],
                ])
        }
        try db.execute(sql: "DELETE FROM fulfilments WHERE state = 'pending'")
        for row in try Row.fetchAll(db, sql: "SELECT transaction_id, proof_kind, proof FROM fulfilments") {
            let proof: String = row["proof"]
            let kind: String = row["proof_kind"]
            let normalised = kind == "receipt" ? (ReceiptProof.parse(proof)?.text ?? proof) : proof
            try db.execute(
                sql: "UPDATE fulfilments SET proof = ?, proof_digest = ? WHERE transaction_id = ?",
                arguments: [normalised, VerifiedProof.digest(of: normalised), row["transaction_id"]])
        }
        try db.execute(
            sql: """
                UPDATE fulfilments SET revoked_by_operator_at = COALESCE(revoked_at, updated_at)
                WHERE state = 'revoked' AND last_error LIKE 'revoked by operator%'
                """)
        try db.execute(
            sql: """
                UPDATE fulfilments SET revoked_by_refund_at = COALESCE(revoked_at, updated_at)
                WHERE state = 'revoked' AND revoked_by_operator_at IS NULL
                """)
    }

    /// The ledger holds replayable receipts: the file (and so SQLite's -wal and -shm files,
    /// which take its mode) is readable by its owner only.
    static func restrictPermissions(_ path: String) throws {
        let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw DatabaseError(resultCode: .SQLITE_CANTOPEN, message: "cannot open \(path): errno \(errno)") }
        defer { close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { return }
        if status.st_mode & 0o077 != 0 { _ = fchmod(descriptor, 0o600) }
    }
}
