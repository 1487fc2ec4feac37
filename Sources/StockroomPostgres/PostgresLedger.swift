import Foundation
import PostgresNIO
import StockroomCore

/// The `Ledger` on PostgreSQL, for several Stockroom instances sharing one database.
///
/// Each decision is one SQL transaction that takes the purchase's advisory lock (so decisions
/// on one purchase run one at a time across instances, as SQLite's single writer runs them),
/// reads the purchase's rows `FOR UPDATE`, applies the same `EntitlementRules` as
/// `SQLiteLedger`, and writes the rows the rules changed. A lost database throws
/// `LedgerUnavailable`; the pool reconnects by itself when the database is back.
public struct PostgresLedger: Ledger, LedgerStatementRunner {
    public let database: PostgresPool
    /// When set, a transaction reaching this point is queued for Finish Transaction in the same transaction.
    public let finishOn: FinishTrigger?

    /// Whether binding a purchase Apple holds without an account queues Set App Account Token.
    public let tellsAppleOfAccounts: Bool

    public init(database: PostgresPool, finishOn: FinishTrigger? = nil, tellsAppleOfAccounts: Bool = false) {
        self.database = database
        self.finishOn = finishOn
        self.tellsAppleOfAccounts = tellsAppleOfAccounts
    }

    var logger: Logger { database.logger }

    public var dialect: LedgerDialect { .postgres }

    /// A write runs in a transaction of its own: a call cut before it answered never commits, where
    /// a lone statement could still land once a stalled connection moved again.
    public func fetch<Record: LedgerRecord>(_ statement: LedgerStatement, as type: Record.Type) async throws -> [Record] {
        guard statement.isRead else {
            return try await database.transaction { connection in try await fetch(statement, as: type, on: connection) }
        }
        return try await database.read { connection in try await fetch(statement, as: type, on: connection) }
    }

    /// Runs one of the ledger's shared statements on `connection` and reads each row it returns as
    /// `Record`; `locking` a SELECT's rows `FOR UPDATE` until the transaction ends.
    func fetch<Record: LedgerRecord>(
        _ statement: LedgerStatement, as type: Record.Type, on connection: PostgresConnection, locking: Bool = false
    )
        async throws -> [Record]
    {
        var query = statement.postgres
        if locking { query.sql += " FOR UPDATE" }
        var records: [Record] = []
        for try await row in try await connection.query(query, logger: logger) {
            records.append(try Record(row: PostgresCells(row: row.makeRandomAccess())))
        }
        return records
    }

    /// Runs one of the ledger's shared statements on `connection`; returns how many rows it returned (`RETURNING`).
    @discardableResult
    func execute(_ statement: LedgerStatement, on connection: PostgresConnection) async throws -> Int {
        try await connection.query(statement.postgres, logger: logger).collect().count
    }
}

extension LedgerStatement {
    /// The statement with PostgreSQL's parameters (`$1` for `?1`) and its values bound.
    var postgres: PostgresQuery {
        var binds = PostgresBindings(capacity: arguments.count)
        for argument in arguments {
            switch argument {
            case .null: binds.appendNull()
            case .text(let text): binds.append(text)
            case .integer(let integer): binds.append(integer)
            case .bool(let bool): binds.append(bool)
            case .time(let date): binds.append(Timestamp(date))
            }
        }
        // A byte swap of each `?` a digit follows, on the bytes: every read goes through it, and a
        // regular expression here costs about a fifth of a download's CPU.
        var bytes = Array(sql.utf8)
        let digits = UInt8(ascii: "0")...UInt8(ascii: "9")
        for index in bytes.indices.dropLast() where bytes[index] == UInt8(ascii: "?") && digits.contains(bytes[index + 1]) {
            bytes[index] = UInt8(ascii: "$")
        }
        return PostgresQuery(unsafeSQL: String(decoding: bytes, as: UTF8.self), binds: binds)
    }
}

/// A row as the ledger's shared code reads it, each column decoded as the record's field asks;
/// a value of another type, or a missing column, throws.
struct PostgresCells: LedgerCells {
    let row: PostgresRandomAccessRow

    func value(_ column: String, as kind: LedgerValue.Kind) throws -> LedgerValue {
        guard row.contains(column) else { throw LedgerRowError(column: column, missing: true) }
        let cell = row[column]
        guard cell.bytes != nil else { return .null }
        return switch kind {
        case .text: .text(try cell.decode(String.self))
        case .integer: .integer(try cell.decode(Int64.self))
        case .bool: .bool(try cell.decode(Bool.self))
        case .time: .time(try Self.time(cell))
        }
    }

    /// A `timestamptz` as seconds since 1970 from its exact count of microseconds: the value the
    /// export's JSON writes and reads back unchanged. (PostgresNIO's `Date` adds its epoch to an
    /// already rounded quotient, which can be a bit off that.)
    static func time(_ cell: PostgresCell) throws -> Date {
        guard cell.dataType == .timestamptz, cell.format == .binary, var bytes = cell.bytes, bytes.readableBytes == 8,
            let microseconds = bytes.readInteger(as: Int64.self)
        else { throw LedgerRowError(column: cell.columnName) }
        let (since1970, overflow) = microseconds.addingReportingOverflow(946_684_800_000_000)
        guard !overflow else { throw LedgerRowError(column: cell.columnName) }
        return Date(timeIntervalSince1970: Double(since1970) / 1_000_000)
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
