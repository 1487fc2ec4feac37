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
