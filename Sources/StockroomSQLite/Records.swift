import Foundation
import GRDB
import StockroomCore

// The ledger's rows as GRDB records: one record type per table, each the domain's own type.
// The conformances live here, with the engine, so that the domain imports no database.

extension Fulfilment: FetchableRecord, PersistableRecord {
    public static let databaseTableName = "fulfilments"

    /// Read column by column (the same conversions GRDB's `Decodable` reading makes, without its
    /// decoder: that was ~2% of a download's CPU). A value of the wrong kind throws.
    public init(row: Row) throws {
        self.init(
            transactionID: try row.decode(forColumn: "transaction_id"), originalTransactionID: try row.decode(forColumn: "original_transaction_id"),
            productID: try row.decode(forColumn: "product_id"), bundleID: try row.decode(forColumn: "bundle_id"),
            environment: try row.decode(forColumn: "environment"), proofKind: try row.decode(forColumn: "proof_kind"),
            proof: try row.decode(forColumn: "proof"), proofDigest: try row.decode(forColumn: "proof_digest"),
            appAccountToken: try row.decode(forColumn: "app_account_token"), expiresAt: try row.decode(forColumn: "expires_at"),
            state: try row.decode(forColumn: "state"), verifiedAt: try row.decode(forColumn: "verified_at"),
            attempts: try row.decode(forColumn: "attempts"), bytesDelivered: try row.decode(forColumn: "bytes_delivered"),
            lastError: try row.decode(forColumn: "last_error"), createdAt: try row.decode(forColumn: "created_at"),
            updatedAt: try row.decode(forColumn: "updated_at"), deliveredAt: try row.decode(forColumn: "delivered_at"),
            acknowledgedAt: try row.decode(forColumn: "acknowledged_at"), revokedAt: try row.decode(forColumn: "revoked_at"),
            revokedByOperatorAt: try row.decode(forColumn: "revoked_by_operator_at"),
            revokedByRefundAt: try row.decode(forColumn: "revoked_by_refund_at"), finishedAt: try row.decode(forColumn: "finished_at"),
            customerConsented: try row.decode(forColumn: "customer_consented"))
    }
}

/// The columns of `fulfilments` the engine filters and orders on.
enum FulfilmentColumn {
    static let transactionID = Column("transaction_id")
    static let productID = Column("product_id")
    static let state = Column("state")
    static let createdAt = Column("created_at")
    static let updatedAt = Column("updated_at")
}

extension DownloadAttempt: FetchableRecord, PersistableRecord {
    public static let databaseTableName = "download_attempts"

    public mutating func didInsert(_ inserted: InsertionSuccess) {
        id = inserted.rowID
    }
}

extension PendingProof: FetchableRecord, PersistableRecord {
    public static let databaseTableName = "pending_proofs"

    public mutating func didInsert(_ inserted: InsertionSuccess) {
        id = inserted.rowID
    }
}

extension ServerCall: FetchableRecord, PersistableRecord {
    public static let databaseTableName = "server_calls"

    public mutating func didInsert(_ inserted: InsertionSuccess) {
        id = inserted.rowID
    }
}

extension NotificationRecord: FetchableRecord, PersistableRecord {
    public static let databaseTableName = "notifications"
}

extension FulfilmentState: DatabaseValueConvertible {}
extension StoreEnvironment: DatabaseValueConvertible {}
extension Fulfilment.ProofKind: DatabaseValueConvertible {}
extension DownloadAttempt.Outcome: DatabaseValueConvertible {}
extension PendingProof.Status: DatabaseValueConvertible {}
extension ServerCall.Kind: DatabaseValueConvertible {}
extension ServerCall.Status: DatabaseValueConvertible {}

extension SQLiteLedger {
    /// Runs one of the ledger's shared statements; returns how many rows it returned (`RETURNING`)
    /// or else changed. Statements are prepared once per connection and kept.
    @discardableResult
    public static func execute(_ statement: LedgerStatement, _ db: Database) throws -> Int {
        let prepared = try db.cachedStatement(sql: statement.sql)
        try prepared.setArguments(StatementArguments(statement.arguments.map(\.databaseValue)))
        guard prepared.columnCount > 0 else {  // no RETURNING clause: count the changes
            try prepared.execute()
            return db.changesCount
        }
        return try Row.fetchAll(prepared).count
    }
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
/// without GRDB's `DateFormatter`: ICU's formatting was a fifth of each download's statement
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
