import Foundation
import GRDB

/// One App Store transaction in the ledger, with the receipt that proves it.
public struct Fulfilment: Sendable, Equatable, Codable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "fulfilments"

    public var transactionID: String
    public var originalTransactionID: String
    public var productID: String
    public var bundleID: String
    /// Nil while pending: no App Store environment has vouched for it yet.
    public var environment: StoreEnvironment?
    public var proofKind: ProofKind
    /// The base64 app receipt or the StoreKit 2 JWS, kept for re-verification. Never logged.
    public var proof: String
    public var state: FulfilmentState
    public var verifiedAt: Date?
    /// Download requests made for it (POSTs and resumes).
    public var attempts: Int
    /// Bytes sent over all attempts.
    public var bytesDelivered: Int64
    public var lastError: String?
    public var createdAt: Date
    public var updatedAt: Date
    public var deliveredAt: Date?
    public var acknowledgedAt: Date?
    public var revokedAt: Date?

    /// What kind of proof of purchase is stored.
    public enum ProofKind: String, Sendable, Codable, DatabaseValueConvertible {
        case receipt
        case signedTransaction
    }

    public enum Columns {
        static let transactionID = Column(CodingKeys.transactionID)
        static let originalTransactionID = Column(CodingKeys.originalTransactionID)
        static let productID = Column(CodingKeys.productID)
        static let state = Column(CodingKeys.state)
        static let updatedAt = Column(CodingKeys.updatedAt)
    }

    enum CodingKeys: String, CodingKey {
        case transactionID = "transaction_id", originalTransactionID = "original_transaction_id"
        case productID = "product_id", bundleID = "bundle_id", environment, proofKind = "proof_kind", proof
        case state, verifiedAt = "verified_at", attempts, bytesDelivered = "bytes_delivered", lastError = "last_error"
        case createdAt = "created_at", updatedAt = "updated_at", deliveredAt = "delivered_at"
        case acknowledgedAt = "acknowledged_at", revokedAt = "revoked_at"
    }
}

/// One download attempt: what range was asked for, what went out, how it ended.
public struct DownloadAttempt: Sendable, Equatable, Codable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "download_attempts"

    public var id: Int64?
    public var transactionID: String
    public var rangeStart: Int64?
    public var rangeEnd: Int64?
    public var bytes: Int64
    public var outcome: Outcome
    public var at: Date

    public enum Outcome: String, Sendable, Codable, DatabaseValueConvertible {
        /// The whole planned body went out.
        case complete
        /// The client went away (or the stream failed) part way.
        case interrupted
    }

    enum CodingKeys: String, CodingKey {
        case id, transactionID = "transaction_id", rangeStart = "range_start", rangeEnd = "range_end", bytes, outcome, at
    }

    public mutating func didInsert(_ inserted: InsertionSuccess) {
        id = inserted.rowID
    }
}
