import Foundation
import Synchronization

/// One of the ledger's writes, written once for both engines in the SQL they share: numbered
/// parameters (`?1`, `?2`, …, which SQLite reads as they are and PostgreSQL as `$1`, `$2`, …),
/// `ON CONFLICT`, row values and `RETURNING`. A statement whose caller counts the rows it changed
/// says `RETURNING 1`.
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

    /// Inserts a whole row, its ID too when it has one; `conflict` is what follows `ON CONFLICT`.
    public static func insert<Row: LedgerRow>(_ row: Row, onConflict conflict: String? = nil) -> LedgerStatement {
        var names: [String] = []
        var values: [LedgerValue] = []
        for (name, value) in row.columns {
            let bound = value.ledgerValue
            if name == "id", bound == .null { continue }
            names.append(name)
            values.append(bound)
        }
        let sql = SQLText.cached(.init(row: ObjectIdentifier(Row.self), columns: names.count, conflict: conflict, update: false)) {
            let placeholders = (1...names.count).map { "?\($0)" }.joined(separator: ", ")
            return "INSERT INTO \(Row.table) (\(names.joined(separator: ", "))) VALUES (\(placeholders))" + (conflict.map { " ON CONFLICT \($0)" } ?? "")
        }
        return LedgerStatement(sql: sql, values: values)
    }

    /// Writes every column of a fulfilment but its key.
    public static func update(_ row: Fulfilment) -> LedgerStatement {
        let columns = row.columns
        let sql = SQLText.cached(.init(row: ObjectIdentifier(Fulfilment.self), columns: columns.count, conflict: nil, update: true)) {
            let names = columns.dropFirst().map(\.name).joined(separator: ", ")
            let placeholders = (2...columns.count).map { "?\($0)" }.joined(separator: ", ")
            return "UPDATE fulfilments SET (\(names)) = (\(placeholders)) WHERE transaction_id = ?1"
        }
        return LedgerStatement(sql: sql, values: columns.map(\.value.ledgerValue))
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
            UPDATE server_calls SET status = ?2, attempts = ?3, due_at = ?4, leased_until = NULL, last_error = ?5, body = ?6, updated_at = ?7,
              sent_at = ?8
            WHERE id = ?1
            """, [call.id, call.status, call.attempts, call.dueAt, call.lastError, call.body, call.updatedAt, call.sentAt])
    }

    /// Stamps a transaction finished with Apple, once.
    public static func stampFinished(_ transactionID: String, now: Date) -> LedgerStatement {
        LedgerStatement("UPDATE fulfilments SET finished_at = COALESCE(finished_at, ?2), updated_at = ?2 WHERE transaction_id = ?1", [transactionID, now])
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

    /// A kept proof rejected by the App Store (`reason`), or one whose re-verification failed
    /// (`error`, still pending); either releases its lease.
    public static func settlePendingProof(id: Int64, rejected: Bool, error: String, now: Date) -> LedgerStatement {
        LedgerStatement(
            """
            UPDATE pending_proofs SET status = CASE WHEN ?4 THEN 'rejected' ELSE status END, last_error = ?2, updated_at = ?3, leased_until = NULL
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

/// A value bound to a statement.
public enum LedgerValue: Sendable, Equatable {
    case null
    case text(String)
    case integer(Int64)
    case bool(Bool)
    case time(Date)
}

/// What can be bound to a statement.
public protocol LedgerBindable: Sendable {
    var ledgerValue: LedgerValue { get }
}

extension String: LedgerBindable { public var ledgerValue: LedgerValue { .text(self) } }
extension Int: LedgerBindable { public var ledgerValue: LedgerValue { .integer(Int64(self)) } }
extension Int64: LedgerBindable { public var ledgerValue: LedgerValue { .integer(self) } }
extension Bool: LedgerBindable { public var ledgerValue: LedgerValue { .bool(self) } }
extension Date: LedgerBindable { public var ledgerValue: LedgerValue { .time(self) } }
extension Optional: LedgerBindable where Wrapped: LedgerBindable {
    public var ledgerValue: LedgerValue { self?.ledgerValue ?? .null }
}
extension LedgerBindable where Self: RawRepresentable, RawValue == String {
    public var ledgerValue: LedgerValue { .text(rawValue) }
}
extension FulfilmentState: LedgerBindable {}
extension Fulfilment.ProofKind: LedgerBindable {}
extension DownloadAttempt.Outcome: LedgerBindable {}
extension PendingProof.Status: LedgerBindable {}
extension ServerCall.Kind: LedgerBindable {}
extension ServerCall.Status: LedgerBindable {}
extension StoreEnvironment: LedgerBindable {}

/// A row of one of the ledger's tables: its table, and its columns in the schema's order.
public protocol LedgerRow: Sendable {
    static var table: String { get }
    var columns: [(name: String, value: any LedgerBindable)] { get }
}

extension Fulfilment: LedgerRow {
    public static let table = "fulfilments"
    public var columns: [(name: String, value: any LedgerBindable)] {
        [
            ("transaction_id", transactionID), ("original_transaction_id", originalTransactionID), ("product_id", productID),
            ("bundle_id", bundleID), ("environment", environment), ("proof_kind", proofKind), ("proof", proof), ("proof_digest", proofDigest),
            ("app_account_token", appAccountToken), ("expires_at", expiresAt), ("state", state), ("verified_at", verifiedAt),
            ("attempts", attempts), ("bytes_delivered", bytesDelivered), ("last_error", lastError), ("created_at", createdAt),
            ("updated_at", updatedAt), ("delivered_at", deliveredAt), ("acknowledged_at", acknowledgedAt), ("revoked_at", revokedAt),
            ("revoked_by_operator_at", revokedByOperatorAt), ("revoked_by_refund_at", revokedByRefundAt), ("finished_at", finishedAt),
            ("customer_consented", customerConsented),
        ]
    }
}

extension DownloadAttempt: LedgerRow {
    public static let table = "download_attempts"
    public var columns: [(name: String, value: any LedgerBindable)] {
        [("id", id), ("transaction_id", transactionID), ("range_start", rangeStart), ("range_end", rangeEnd), ("bytes", bytes), ("outcome", outcome), ("at", at)]
    }
}

extension PendingProof: LedgerRow {
    public static let table = "pending_proofs"
    public var columns: [(name: String, value: any LedgerBindable)] {
        [
            ("id", id), ("transaction_id", transactionID), ("proof_digest", proofDigest), ("proof_kind", proofKind), ("proof", proof),
            ("requested_product_id", requestedProductID), ("app_account_token", appAccountToken), ("client", client), ("status", status),
            ("last_error", lastError), ("created_at", createdAt), ("updated_at", updatedAt),
        ]
    }
}

extension NotificationRecord: LedgerRow {
    public static let table = "notifications"
    public var columns: [(name: String, value: any LedgerBindable)] {
        [
            ("notification_uuid", uuid), ("notification_type", type), ("subtype", subtype), ("transaction_id", transactionID),
            ("original_transaction_id", originalTransactionID), ("outcome", outcome), ("received_at", receivedAt),
            ("signed_payload", signedPayload), ("source", source),
        ]
    }
}

extension ServerCall: LedgerRow {
    public static let table = "server_calls"
    public var columns: [(name: String, value: any LedgerBindable)] {
        [
            ("id", id), ("kind", kind), ("transaction_id", transactionID), ("environment", environment), ("status", status),
            ("attempts", attempts), ("due_at", dueAt), ("leased_until", leasedUntil), ("last_error", lastError), ("body", body),
            ("requested_by", requestedBy), ("created_at", createdAt), ("updated_at", updatedAt), ("sent_at", sentAt),
        ]
    }
}

/// An engine that runs one shared statement in a database transaction of its own; the ledger's
/// one-statement writes are then written once, here.
public protocol LedgerStatementRunner: Sendable {
    /// Runs `statement`; returns how many rows it returned (`RETURNING`).
    @discardableResult
    func execute(_ statement: LedgerStatement) async throws -> Int
}

extension PendingProofQueue where Self: LedgerStatementRunner {
    public func rejectPendingProof(id: Int64, reason: String, now: Date) async throws {
        try await execute(.settlePendingProof(id: id, rejected: true, error: reason, now: now))
    }

    public func notePendingProof(id: Int64, error: String, now: Date) async throws {
        try await execute(.settlePendingProof(id: id, rejected: false, error: error, now: now))
    }
}

extension NotificationLog where Self: LedgerStatementRunner {
    public func recordNotification(_ notification: NotificationRecord, outcome: String, now: Date) async throws -> Bool {
        var recorded = notification
        recorded.outcome = outcome
        recorded.receivedAt = now
        return try await execute(.record(recorded)) == 1
    }
}
