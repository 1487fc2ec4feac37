import Foundation
import GRDB
import StockroomCore

/// A row as the ledger's shared code reads it: each column as the record's field asks, through
/// GRDB's own conversions (a time from its text form, a boolean from 0 or 1). A value of the
/// wrong kind, or a missing column, throws.
struct SQLiteCells: LedgerCells {
    let row: Row
    let columns: SQLiteColumns

    func value(_ column: String, as kind: LedgerValue.Kind) throws -> LedgerValue {
        guard let index = columns.byName[column] else { throw LedgerRowError(column: column, missing: true) }
        // A value GRDB cannot convert (a time written as no date reads) is a row this build cannot read.
        do {
            return switch kind {
            case .text: try row.decode(String?.self, atIndex: index).map(LedgerValue.text) ?? .null
            case .integer: try row.decode(Int64?.self, atIndex: index).map(LedgerValue.integer) ?? .null
            case .bool: try row.decode(Bool?.self, atIndex: index).map(LedgerValue.bool) ?? .null
            case .time: try row.decode(Date?.self, atIndex: index).map(LedgerValue.time) ?? .null
            }
        } catch is RowDecodingError {
            throw LedgerRowError(column: column)
        }
    }
}

/// A statement's columns by name, built once per statement run, at the first cell a record reads:
/// one hash lookup per column, where GRDB's own lookup by name lowercases the name each time. A
/// write's returned rows are only counted, and build nothing.
final class SQLiteColumns {
    private let statement: Statement
    private(set) lazy var byName: [String: Int] = Dictionary(
        statement.columnNames.enumerated().map { ($1, $0) }, uniquingKeysWith: { first, _ in first })

    init(_ statement: Statement) { self.statement = statement }
}

extension LedgerValue {
    /// The value as SQLite stores it: times in GRDB's text form, as its records store them.
    var databaseValue: DatabaseValue {
        switch self {
        case .null: .null
        case .text(let text): text.databaseValue
        case .integer(let integer): integer.databaseValue
        case .bool(let bool): bool.databaseValue
        case .time(let date): SQLiteTime.databaseValue(date)
        }
    }
}

/// A time as GRDB stores a `Date` (`yyyy-MM-dd HH:mm:ss.SSS`, UTC, to the nearest millisecond), written
/// without GRDB's `DateFormatter`, whose ICU formatting costs a fifth of a download's statement
/// binding. Times outside years 1970...9999 go through GRDB itself.
enum SQLiteTime {
    static func databaseValue(_ date: Date) -> DatabaseValue {
        let milliseconds = (date.timeIntervalSince1970 * 1000).rounded()
        guard milliseconds >= 0, milliseconds < 253_402_300_800_000 else { return date.databaseValue }
        let total = Int64(milliseconds)
        var seconds = time_t(total / 1000)
        var fields = tm()
        guard gmtime_r(&seconds, &fields) != nil else { return date.databaseValue }
        return String(unsafeUninitializedCapacity: 23) { buffer in
            func put(_ value: Int, _ digits: Int, at index: Int) {
                var value = value
                for position in stride(from: index + digits - 1, through: index, by: -1) {
                    buffer[position] = UInt8(ascii: "0") + UInt8(value % 10)
                    value /= 10
                }
            }
            put(Int(fields.tm_year) + 1900, 4, at: 0)
            put(Int(fields.tm_mon) + 1, 2, at: 5)
            put(Int(fields.tm_mday), 2, at: 8)
            put(Int(fields.tm_hour), 2, at: 11)
            put(Int(fields.tm_min), 2, at: 14)
            put(Int(fields.tm_sec), 2, at: 17)
            put(Int(total % 1000), 3, at: 20)
            (buffer[4], buffer[7], buffer[10]) = (UInt8(ascii: "-"), UInt8(ascii: "-"), UInt8(ascii: " "))
            (buffer[13], buffer[16], buffer[19]) = (UInt8(ascii: ":"), UInt8(ascii: ":"), UInt8(ascii: "."))
            return 23
        }.databaseValue
    }
}
