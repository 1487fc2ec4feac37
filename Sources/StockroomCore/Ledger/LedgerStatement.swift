import Foundation
import Synchronization

/// One of the ledger's statements, written once for both engines in the SQL they share: numbered
/// parameters (`?1`, `?2`, …, which SQLite reads as they are and PostgreSQL as `$1`, `$2`, …),
/// `ON CONFLICT`, row values and `RETURNING`, and the few clauses they spell differently taken
/// from `LedgerDialect`. A statement whose caller counts the rows it changed says `RETURNING 1`.
/// A literal holds no `?` followed by a digit (PostgreSQL would read it as a parameter).
public struct LedgerStatement: Sendable, Equatable {
    public let sql: String
    public let arguments: [LedgerValue]

    public init(_ sql: String, _ arguments: [any LedgerBindable]) {
        self.init(sql: sql, values: arguments.map(\.ledgerValue))
    }

    private init(sql: String, values: [LedgerValue]) {
        self.sql = sql
        self.arguments = values
    }

    /// Whether it only reads (a SELECT): an engine runs it on a reader, not as a write.
    public var isRead: Bool { sql.hasPrefix("SELECT") }

    /// Inserts a whole row, its ID too when it has one; `conflict` is what follows `ON CONFLICT`.
    public static func insert<Row: LedgerRow>(_ row: Row, onConflict conflict: String? = nil) -> LedgerStatement {
        var names: [String] = []
        var values: [LedgerValue] = []
        for (name, value) in row.columns {
            if name == "id", value == .null { continue }
            names.append(name)
            values.append(value)
        }
        let sql = SQLText.cached(.init(row: ObjectIdentifier(Row.self), columns: names.count, conflict: conflict, update: false)) {
            let placeholders = (1...names.count).map { "?\($0)" }.joined(separator: ", ")
            return "INSERT INTO \(Row.table) (\(names.joined(separator: ", "))) VALUES (\(placeholders))"
                + (conflict.map { " ON CONFLICT \($0)" } ?? "")
        }
        return LedgerStatement(sql: sql, values: values)
    }

    /// Every row of a table, in `order` (an export).
    public static func everyRow<Row: LedgerRow>(of type: Row.Type, orderedBy order: String) -> LedgerStatement {
        LedgerStatement("SELECT * FROM \(Row.table) ORDER BY \(order)", [])
    }

    /// One row if the table has any, none if it is empty (an import goes only into an empty ledger).
    public static func anyRow(in table: String) -> LedgerStatement {
        LedgerStatement("SELECT 1 FROM \(table) LIMIT 1", [])
    }

    /// After an import wrote rows with their IDs: new rows' IDs follow the highest imported.
    static func continueIdentities(_ dialect: LedgerDialect) -> [LedgerStatement] {
        guard let statement = dialect.continueIdentity else { return [] }
        return ["download_attempts", "pending_proofs", "server_calls", "ledger_events", "webhook_deliveries"].map {
            LedgerStatement(statement($0), [])
        }
    }

    /// Writes every column of a fulfilment but its key.
    public static func update(_ row: Fulfilment) -> LedgerStatement {
        let columns = row.columns
        let sql = SQLText.cached(.init(row: ObjectIdentifier(Fulfilment.self), columns: columns.count, conflict: nil, update: true)) {
            let names = columns.dropFirst().map(\.name).joined(separator: ", ")
            let placeholders = (2...columns.count).map { "?\($0)" }.joined(separator: ", ")
            return "UPDATE fulfilments SET (\(names)) = (\(placeholders)) WHERE transaction_id = ?1"
        }
        return LedgerStatement(sql: sql, values: columns.map(\.value))
    }

    /// Keeps the newest `DownloadAttempt.keptPerTransaction` attempts of a transaction: the
    /// fulfilment's counters keep the totals.
    public static func trimAttempts(of transactionID: String) -> LedgerStatement {
        LedgerStatement(
            """
            DELETE FROM download_attempts WHERE transaction_id = ?1 AND id NOT IN
              (SELECT id FROM download_attempts WHERE transaction_id = ?1 ORDER BY id DESC LIMIT ?2)
            """, [transactionID, DownloadAttempt.keptPerTransaction])
    }

    /// Queues a call owed to Apple unless one of its kind is on record for its transaction.
    public static func queue(_ call: ServerCall) -> LedgerStatement {
        insert(call, onConflict: "(kind, transaction_id) DO NOTHING RETURNING 1")
    }

    /// Writes a call as `ServerCall.apply(_:now:)` left it (which releases its lease).
    public static func settle(_ call: ServerCall) -> LedgerStatement {
        LedgerStatement(
            """
            UPDATE server_calls SET status = ?2, attempts = ?3, due_at = ?4, leased_until = NULL, last_error = ?5, body = ?6,
              updated_at = ?7, sent_at = ?8
            WHERE id = ?1
            """, [call.id, call.status, call.attempts, call.dueAt, call.lastError, call.body, call.updatedAt, call.sentAt])
    }

    /// Records a notification unless its UUID is on record.
    public static func record(_ notification: NotificationRecord) -> LedgerStatement {
        insert(notification, onConflict: "(notification_uuid) DO NOTHING RETURNING 1")
    }

    /// A kept proof that became an entitlement is no longer pending.
    public static func settle(_ proof: PendingProofKey) -> LedgerStatement {
        LedgerStatement("DELETE FROM pending_proofs WHERE transaction_id = ?1 AND proof_digest = ?2", [proof.transactionID, proof.digest])
    }

    /// The same proof kept again: only its error and time change.
    public static func refresh(_ draft: PendingProofDraft, now: Date) -> LedgerStatement {
        LedgerStatement(
            "UPDATE pending_proofs SET last_error = ?3, updated_at = ?4 WHERE transaction_id = ?1 AND proof_digest = ?2 RETURNING 1",
            [draft.transactionID, draft.digest, draft.error, now])
    }

    /// Deletes up to `limit` rejected proofs last changed before `before`, the oldest first.
    public static func purgeRejectedPendingProofs(before: Date, limit: Int, _ dialect: LedgerDialect) -> LedgerStatement {
        LedgerStatement(
            """
            DELETE FROM pending_proofs WHERE id IN
              (SELECT id FROM pending_proofs WHERE status = 'rejected' AND updated_at < ?1
               ORDER BY updated_at LIMIT ?2\(dialect.skipLocked))
            RETURNING 1
            """, [before, max(0, limit)])
    }

    /// A kept proof rejected by the App Store (`reason`), or one whose re-verification failed
    /// (`error`, still pending); either releases its lease.
    public static func settlePendingProof(id: Int64, rejected: Bool, error: String, now: Date) -> LedgerStatement {
        LedgerStatement(
            """
            UPDATE pending_proofs SET status = CASE WHEN ?4 THEN 'rejected' ELSE status END, last_error = ?2, updated_at = ?3,
              leased_until = NULL
            WHERE id = ?1
            """, [id, error, now, rejected])
    }
}

extension LedgerWrites {
    /// The statements that make these writes, in order: rows before what refers to them.
    public var statements: [LedgerStatement] {
        var statements = insertedRows.map { LedgerStatement.insert($0) } + changedRows.map(LedgerStatement.update)
        for attempt in attempts { statements += [.insert(attempt), .trimAttempts(of: attempt.transactionID)] }
        return statements + settledPendingProofs.map(LedgerStatement.settle) + serverCalls.map(LedgerStatement.queue)
            + events.map { .insert($0) }
    }
}

/// The text of the statements built from a row's columns, built once per shape: a download's
/// writes otherwise joined some fifty column names and placeholders each time.
private enum SQLText {
    struct Shape: Hashable {
        let row: ObjectIdentifier
        let columns: Int
        let conflict: String?
        let update: Bool
    }

    static let texts = Mutex<[Shape: String]>([:])

    static func cached(_ shape: Shape, _ build: () -> String) -> String {
        if let text = texts.withLock({ $0[shape] }) { return text }
        let text = build()
        texts.withLock { $0[shape] = text }
        return text
    }
}
