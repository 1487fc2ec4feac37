import Foundation
import GRDB
import StockroomCore

// The ledger's rows as GRDB records: one record type per table, each the domain's own type.
// The conformances live here, with the engine, so that the domain imports no database.

extension Fulfilment: FetchableRecord, PersistableRecord {
    public static let databaseTableName = "fulfilments"
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
        guard statement.sql.contains("RETURNING") else {
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
        case .time(let date): date.databaseValue
        }
    }
}
