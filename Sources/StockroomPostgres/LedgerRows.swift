import Foundation
import PostgresNIO
import StockroomCore

/// How the ledger's records cross to PostgreSQL and back.
///
/// A row comes back as JSON (`to_jsonb` with its times as seconds since 1970) and is decoded
/// through the record's own `Codable`, whose keys are the column names: the same mapping GRDB
/// uses on SQLite. A row goes out as bound parameters, never as text in the SQL.
enum LedgerRows {
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
