import Foundation

/// What a row the ledger reads becomes: a record of one of its tables, or an aggregate.
public protocol LedgerRecord: Sendable {
    /// The record a row holds, column by column; a column missing or of the wrong kind throws.
    init(row: some LedgerCells) throws
}

/// A row of one of the ledger's tables: its table, and its columns in the schema's order, out
/// (`columns`) and in (`init(row:)`), side by side so that they cannot drift apart.
public protocol LedgerRow: LedgerRecord {
    static var table: String { get }
    var columns: [(name: String, value: any LedgerBindable)] { get }
}

extension Fulfilment: LedgerRow {
    public static let table = "fulfilments"
    public var columns: [(name: String, value: any LedgerBindable)] {
        [
            ("transaction_id", transactionID), ("original_transaction_id", originalTransactionID), ("product_id", productID),
            ("bundle_id", bundleID), ("environment", environment), ("proof_kind", proofKind), ("proof", proof),
            ("proof_digest", proofDigest),
            ("app_account_token", appAccountToken), ("expires_at", expiresAt), ("state", state), ("verified_at", verifiedAt),
            ("attempts", attempts), ("bytes_delivered", bytesDelivered), ("last_error", lastError), ("created_at", createdAt),
            ("updated_at", updatedAt), ("delivered_at", deliveredAt), ("acknowledged_at", acknowledgedAt), ("revoked_at", revokedAt),
            ("revoked_by_operator_at", revokedByOperatorAt), ("revoked_by_refund_at", revokedByRefundAt), ("finished_at", finishedAt),
            ("customer_consented", customerConsented),
        ]
    }

    public init(row: some LedgerCells) throws {
        self.init(
            transactionID: try row["transaction_id"], originalTransactionID: try row["original_transaction_id"],
            productID: try row["product_id"],
            bundleID: try row["bundle_id"], environment: try row["environment"], proofKind: try row["proof_kind"], proof: try row["proof"],
            proofDigest: try row["proof_digest"], appAccountToken: try row["app_account_token"], expiresAt: try row["expires_at"],
            state: try row["state"], verifiedAt: try row["verified_at"], attempts: try row["attempts"],
            bytesDelivered: try row["bytes_delivered"],
            lastError: try row["last_error"], createdAt: try row["created_at"], updatedAt: try row["updated_at"],
            deliveredAt: try row["delivered_at"], acknowledgedAt: try row["acknowledged_at"], revokedAt: try row["revoked_at"],
            revokedByOperatorAt: try row["revoked_by_operator_at"], revokedByRefundAt: try row["revoked_by_refund_at"],
            finishedAt: try row["finished_at"], customerConsented: try row["customer_consented"])
    }
}

extension DownloadAttempt: LedgerRow {
    public static let table = "download_attempts"
    public var columns: [(name: String, value: any LedgerBindable)] {
        [
            ("id", id), ("transaction_id", transactionID), ("range_start", rangeStart), ("range_end", rangeEnd), ("bytes", bytes),
            ("outcome", outcome), ("at", at),
        ]
    }

    public init(row: some LedgerCells) throws {
        self.init(
            id: try row["id"], transactionID: try row["transaction_id"], rangeStart: try row["range_start"], rangeEnd: try row["range_end"],
            bytes: try row["bytes"], outcome: try row["outcome"], at: try row["at"])
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

    public init(row: some LedgerCells) throws {
        self.init(
            id: try row["id"], transactionID: try row["transaction_id"], proofDigest: try row["proof_digest"],
            proofKind: try row["proof_kind"],
            proof: try row["proof"], requestedProductID: try row["requested_product_id"], appAccountToken: try row["app_account_token"],
            client: try row["client"], status: try row["status"], lastError: try row["last_error"], createdAt: try row["created_at"],
            updatedAt: try row["updated_at"])
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

    public init(row: some LedgerCells) throws {
        self.init(
            uuid: try row["notification_uuid"], type: try row["notification_type"], subtype: try row["subtype"],
            transactionID: try row["transaction_id"], originalTransactionID: try row["original_transaction_id"],
            signedPayload: try row["signed_payload"], source: try row["source"], outcome: try row["outcome"],
            receivedAt: try row["received_at"])
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

    public init(row: some LedgerCells) throws {
        self.init(
            id: try row["id"], kind: try row["kind"], transactionID: try row["transaction_id"], environment: try row["environment"],
            status: try row["status"], attempts: try row["attempts"], dueAt: try row["due_at"], leasedUntil: try row["leased_until"],
            lastError: try row["last_error"], body: try row["body"], requestedBy: try row["requested_by"], createdAt: try row["created_at"],
            updatedAt: try row["updated_at"], sentAt: try row["sent_at"])
    }
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
