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
/// three commits and cap throughput at the disk's sync rate.
public final class AppDatabase: Sendable {
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

    /// Every schema version, in order; a shipped migration never changes.
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1: schema marker") { db in
            try db.create(table: "stockroom_meta", ifNotExists: true) { table in
                table.primaryKey("key", .text)
                table.column("value", .text).notNull()
            }
        }
        migrator.registerMigration("v2: fulfilments and download attempts") { db in
            let states = FulfilmentState.allCases.map { "'\($0.rawValue)'" }.joined(separator: ", ")
            try db.create(table: "fulfilments") { table in
                table.primaryKey("transaction_id", .text)
                table.column("original_transaction_id", .text).notNull().indexed()
                table.column("product_id", .text).notNull()
                table.column("bundle_id", .text).notNull()
                table.column("environment", .text).check(sql: "environment IN ('Production', 'Sandbox')")
                table.column("proof_kind", .text).notNull().check(sql: "proof_kind IN ('receipt', 'signedTransaction')")
                table.column("proof", .text).notNull()
                table.column("state", .text).notNull().indexed().check(sql: "state IN (\(states))")
                table.column("verified_at", .datetime)
                table.column("attempts", .integer).notNull().defaults(to: 0).check(sql: "attempts >= 0")
                table.column("bytes_delivered", .integer).notNull().defaults(to: 0).check(sql: "bytes_delivered >= 0")
                table.column("last_error", .text)
                table.column("created_at", .datetime).notNull()
                table.column("updated_at", .datetime).notNull().indexed()
                table.column("delivered_at", .datetime)
                table.column("acknowledged_at", .datetime)
                table.column("revoked_at", .datetime)
            }
            try db.create(table: "download_attempts") { table in
                table.autoIncrementedPrimaryKey("id")
                table.column("transaction_id", .text).notNull().indexed()
                    .references("fulfilments", column: "transaction_id", onDelete: .cascade)
                table.column("range_start", .integer)
                table.column("range_end", .integer)
                table.column("bytes", .integer).notNull().check(sql: "bytes >= 0")
                table.column("outcome", .text).notNull().check(sql: "outcome IN ('complete', 'interrupted')")
                table.column("at", .datetime).notNull()
            }
        }
        migrator.registerMigration("v3: App Store notifications") { db in
            try db.create(table: "notifications") { table in
                table.primaryKey("notification_uuid", .text)
                table.column("notification_type", .text).notNull()
                table.column("subtype", .text)
                table.column("transaction_id", .text)
                table.column("original_transaction_id", .text)
                table.column("outcome", .text).notNull()
                table.column("received_at", .datetime).notNull()
            }
        }
        migrator.registerMigration("v4: entitlements only from verified proofs, pending proofs apart") { db in
            try db.alter(table: "fulfilments") { table in
                table.add(column: "proof_digest", .text)
                table.add(column: "app_account_token", .text)
                table.add(column: "expires_at", .datetime)
                table.add(column: "revoked_by_operator_at", .datetime)
                table.add(column: "revoked_by_refund_at", .datetime)
            }
            try db.create(table: "pending_proofs") { table in
                table.autoIncrementedPrimaryKey("id")
                table.column("transaction_id", .text).notNull().indexed()
                table.column("proof_digest", .text).notNull()
                table.column("proof_kind", .text).notNull().check(sql: "proof_kind IN ('receipt', 'signedTransaction')")
                table.column("proof", .text).notNull()
                table.column("requested_product_id", .text).notNull()
                table.column("app_account_token", .text)
                table.column("status", .text).notNull().indexed().check(sql: "status IN ('pending', 'rejected')")
                table.column("last_error", .text)
                table.column("created_at", .datetime).notNull()
                table.column("updated_at", .datetime).notNull()
                table.uniqueKey(["transaction_id", "proof_digest"])
            }
            // A pending row held a request's unverified claims (its product among them): it
            // becomes a pending proof, which never authorises anything.
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
            // The proof on record is what an outage compares a request's proof with: normalise it.
            for row in try Row.fetchAll(db, sql: "SELECT transaction_id, proof_kind, proof FROM fulfilments") {
                let proof: String = row["proof"]
                let kind: String = row["proof_kind"]
                let normalised = kind == "receipt" ? (ReceiptProof.parse(proof)?.text ?? proof) : proof
                try db.execute(
                    sql: "UPDATE fulfilments SET proof = ?, proof_digest = ? WHERE transaction_id = ?",
                    arguments: [normalised, VerifiedProof.digest(of: normalised), row["transaction_id"]])
            }
            // Each revocation's cause, so that only its counterpart can lift it.
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
        migrator.registerMigration("v5: a pending proof is leased to one re-verification at a time") { db in
            try db.alter(table: "pending_proofs") { table in table.add(column: "leased_until", .datetime) }
        }
        migrator.registerMigration("v6: the purchase lifecycle: server finish, consumption answers, notifications verbatim") { db in
            try db.alter(table: "fulfilments") { table in
                table.add(column: "finished_at", .datetime)
                table.add(column: "customer_consented", .boolean)
            }
            try db.alter(table: "notifications") { table in
                table.add(column: "signed_payload", .text)
                table.add(column: "source", .text)
            }
            try db.create(table: "server_calls") { table in
                table.autoIncrementedPrimaryKey("id")
                table.column("kind", .text).notNull().check(sql: "kind IN ('finish', 'consumption')")
                table.column("transaction_id", .text).notNull()
                table.column("environment", .text).notNull()
                table.column("status", .text).notNull().check(sql: "status IN ('queued', 'sent', 'skipped', 'refused')")
                table.column("attempts", .integer).notNull().defaults(to: 0).check(sql: "attempts >= 0")
                table.column("due_at", .datetime).notNull()
                table.column("leased_until", .datetime)
                table.column("last_error", .text)
                table.column("body", .text)
                table.column("requested_by", .text)
                table.column("created_at", .datetime).notNull()
                table.column("updated_at", .datetime).notNull()
                table.column("sent_at", .datetime)
                table.uniqueKey(["kind", "transaction_id"])
            }
            try db.create(index: "server_calls_on_status_due_at", on: "server_calls", columns: ["status", "due_at"])
            // The console pages the list by creation time and charts attempts by hour.
            try db.create(index: "fulfilments_on_created_at", on: "fulfilments", columns: ["created_at"])
            try db.create(index: "download_attempts_on_at", on: "download_attempts", columns: ["at"])
        }
        migrator.registerMigration("v7: pending proofs bounded per client, rejected ones purged") { db in
            try db.alter(table: "pending_proofs") { table in table.add(column: "client", .text) }
            try db.create(index: "pending_proofs_on_client", on: "pending_proofs", columns: ["client"])
            try db.create(index: "pending_proofs_on_status_updated_at", on: "pending_proofs", columns: ["status", "updated_at"])
        }
        return migrator
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
