import Foundation
import PostgresNIO
import StockroomCore

/// How the ledger's records cross to PostgreSQL and back.
///
/// A row comes back as JSON (`to_jsonb` with its times as seconds since 1970) and is decoded
/// through the record's own `Codable`, whose keys are the column names: the same mapping GRDB
/// uses on SQLite. A row goes out as bound parameters, never as text in the SQL.
enum LedgerRows {
    /// The columns of `fulfilments`, in the order `binds(_:)` gives their values.
    static let fulfilmentColumns = [
        "transaction_id", "original_transaction_id", "product_id", "bundle_id", "environment", "proof_kind", "proof", "proof_digest",
        "app_account_token", "expires_at", "state", "verified_at", "attempts", "bytes_delivered", "last_error", "created_at",
        "updated_at", "delivered_at", "acknowledged_at", "revoked_at", "revoked_by_operator_at", "revoked_by_refund_at",
        "finished_at", "customer_consented",
    ]
    static let fulfilmentTimes = [
        "expires_at", "verified_at", "created_at", "updated_at", "delivered_at", "acknowledged_at", "revoked_at",
        "revoked_by_operator_at", "revoked_by_refund_at", "finished_at",
    ]

    /// The select-list item that reads a whole row of `table AS alias` as JSON text.
    static func json(_ alias: String, times: [String]) -> String {
        let epochs = times.map { "'\($0)', extract(epoch from \(alias).\($0))" }.joined(separator: ", ")
        return "(to_jsonb(\(alias)) || jsonb_build_object(\(epochs)))::text"
    }

    static let fulfilment = json("f", times: fulfilmentTimes)
    static let attempt = json("a", times: ["at"])
    static let pendingProof = json("p", times: ["created_at", "updated_at", "leased_until"])
    static let serverCall = json("c", times: ["due_at", "leased_until", "created_at", "updated_at", "sent_at"])

    /// Inserts a whole call row, its ID included (imports).
    static func insert(_ call: ServerCall) -> PostgresQuery {
        """
        INSERT INTO server_calls (id, kind, transaction_id, environment, status, attempts, due_at, leased_until, last_error, body, requested_by,
          created_at, updated_at, sent_at)
        VALUES (\(call.id), \(call.kind.rawValue), \(call.transactionID), \(call.environment.rawValue), \(call.status.rawValue), \(call.attempts),
          \(Timestamp(call.dueAt)), \(call.leasedUntil.map(Timestamp.init)), \(call.lastError), \(call.body), \(call.requestedBy),
          \(Timestamp(call.createdAt)), \(Timestamp(call.updatedAt)), \(call.sentAt.map(Timestamp.init)))
        """
    }

    /// Decodes the first column of each row (JSON text from `json(_:times:)`) as `Record`.
    static func decode<Record: Decodable>(_ type: Record.Type, _ rows: PostgresRowSequence) async throws -> [Record] {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .secondsSince1970
        var records: [Record] = []
        for try await text in rows.decode(String.self) {
            records.append(try decoder.decode(Record.self, from: Data(text.utf8)))
        }
        return records
    }

    static func insert(_ row: Fulfilment) -> PostgresQuery {
        let placeholders = (1...fulfilmentColumns.count).map { "$\($0)" }.joined(separator: ", ")
        return PostgresQuery(
            unsafeSQL: "INSERT INTO fulfilments (\(fulfilmentColumns.joined(separator: ", "))) VALUES (\(placeholders))", binds: binds(row))
    }

    /// Updates every column but the key, which is `$1`.
    static func update(_ row: Fulfilment) -> PostgresQuery {
        let columns = fulfilmentColumns.dropFirst().joined(separator: ", ")
        let placeholders = (2...fulfilmentColumns.count).map { "$\($0)" }.joined(separator: ", ")
        return PostgresQuery(unsafeSQL: "UPDATE fulfilments SET (\(columns)) = (\(placeholders)) WHERE transaction_id = $1", binds: binds(row))
    }

    private static func binds(_ row: Fulfilment) -> PostgresBindings {
        var binds = PostgresBindings(capacity: fulfilmentColumns.count)
        binds.append(row.transactionID)
        binds.append(row.originalTransactionID)
        binds.append(row.productID)
        binds.append(row.bundleID)
        binds.append(row.environment?.rawValue)
        binds.append(row.proofKind.rawValue)
        binds.append(row.proof)
        binds.append(row.proofDigest)
        binds.append(row.appAccountToken)
        binds.append(row.expiresAt.map(Timestamp.init))
        binds.append(row.state.rawValue)
        binds.append(row.verifiedAt.map(Timestamp.init))
        binds.append(row.attempts)
        binds.append(row.bytesDelivered)
        binds.append(row.lastError)
        binds.append(Timestamp(row.createdAt))
        binds.append(Timestamp(row.updatedAt))
        binds.append(row.deliveredAt.map(Timestamp.init))
        binds.append(row.acknowledgedAt.map(Timestamp.init))
        binds.append(row.revokedAt.map(Timestamp.init))
        binds.append(row.revokedByOperatorAt.map(Timestamp.init))
        binds.append(row.revokedByRefundAt.map(Timestamp.init))
        binds.append(row.finishedAt.map(Timestamp.init))
        binds.append(row.customerConsented)
        return binds
    }
}

/// A time bound as PostgreSQL's `timestamptz`, rounded to the microsecond it keeps. (PostgresNIO's
/// own `Date` truncates, so a time read back and written again could lose a microsecond each time.)
struct Timestamp: PostgresNonThrowingEncodable {
    let date: Date

    init(_ date: Date) {
        self.date = date
    }

    static var psqlType: PostgresDataType { .timestamptz }
    static var psqlFormat: PostgresFormat { .binary }

    func encode<JSONEncoder: PostgresJSONEncoder>(into byteBuffer: inout ByteBuffer, context: PostgresEncodingContext<JSONEncoder>) {
        // Microseconds since 2000-01-01, PostgreSQL's epoch; a time beyond its range is clamped, never trapped on.
        let microseconds = ((date.timeIntervalSince1970 - 946_684_800) * 1_000_000).rounded()
        byteBuffer.writeInteger(Int64(exactly: microseconds) ?? (microseconds < 0 ? .min : .max))
    }
}
