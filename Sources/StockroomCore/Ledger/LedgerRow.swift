import Foundation

/// What a row the ledger reads becomes: a record of one of its tables, or an aggregate.
public protocol LedgerRecord: Sendable {
    /// The record a row holds, column by column; a column missing or of the wrong kind throws.
    init(row: some LedgerCells) throws
}

/// A row of one of the ledger's tables: its table, and its columns, which are its `CodingKeys`
/// (declared once; `columns` and `init(row:)` follow from them, `LedgerCoding.swift`).
public protocol LedgerRow: LedgerRecord, Codable {
    associatedtype CodingKeys: CodingKey, CaseIterable
    static var table: String { get }
}

extension Fulfilment: LedgerRow {
    public static let table = "fulfilments"
}

extension DownloadAttempt: LedgerRow {
    public static let table = "download_attempts"
}

extension PendingProof: LedgerRow {
    public static let table = "pending_proofs"
}

extension NotificationRecord: LedgerRow {
    public static let table = "notifications"
}

extension ServerCall: LedgerRow {
    public static let table = "server_calls"
}

extension LedgerEvent: LedgerRow {
    public static let table = "ledger_events"
}

extension WebhookDelivery: LedgerRow {
    public static let table = "webhook_deliveries"
}

// The aggregates the views read.

/// A group of rows (`name`, `count`): fulfilments per state.
struct NamedCount: LedgerRecord {
    var name: String
    var count: Int

    init(row: some LedgerCells) throws {
        (name, count) = (try row["name"], try row["count"])
    }
}

/// One product's fulfilments and bytes, with the ledger's (`ProductTallies`).
struct ProductTallyRow: LedgerRecord {
    var tally: ProductTally?
    var totalCount: Int
    var totalBytes: Int64

    init(row: some LedgerCells) throws {
        let name: String? = try row["name"]
        tally = try name.map { ProductTally(productID: $0, fulfilments: try row["count"], bytesDelivered: try row["bytes"]) }
        (totalCount, totalBytes) = (try row["total_count"], try row["total_bytes"])
    }
}

/// A row and how many rows its read matched in all (`total`): a page and its count, read together.
struct Paged<Record: LedgerRecord>: LedgerRecord {
    var record: Record
    var total: Int

    init(row: some LedgerCells) throws {
        (record, total) = (try Record(row: row), try row["total"])
    }
}

/// A leased row by its `id`, and the record it holds or why this build cannot read it: one row
/// that cannot be read does not fail the others leased with it.
struct Readable<Record: LedgerRecord>: LedgerRecord {
    var id: Int64
    var record: Result<Record, LedgerRowError>

    init(row: some LedgerCells) throws {
        id = try row["id"]
        do {
            record = .success(try Record(row: row))
        } catch let unreadable as LedgerRowError {
            record = .failure(unreadable)
        }
    }
}

/// A number of rows (`count`).
struct Count: LedgerRecord {
    var count: Int

    init(row: some LedgerCells) throws {
        count = try row["count"]
    }
}

/// A row a statement returned, whatever it holds: a count of them is how many rows it changed.
public struct ReturnedRow: LedgerRecord {
    public init(row: some LedgerCells) {}
}

extension HourlyDeliveries: LedgerRecord {
    public init(row: some LedgerCells) throws {
        let hour: Int64 = try row["hour"]
        self.init(
            hour: Date(timeIntervalSince1970: TimeInterval(hour) * 3600), complete: try row["complete"],
            interrupted: try row["interrupted"],
            bytes: try row["bytes"])
    }
}

extension PendingProofCounts: LedgerRecord {
    public init(row: some LedgerCells) throws {
        self.init(transaction: try row["per_transaction"], client: try row["per_client"], total: try row["total"])
    }
}
