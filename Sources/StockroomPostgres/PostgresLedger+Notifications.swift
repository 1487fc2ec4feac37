import Foundation
import PostgresNIO
import StockroomCore

/// The notification log on PostgreSQL: one row per UUID, whichever instance records it first.
extension PostgresLedger {
    public func notificationSeen(_ uuid: String) async throws -> Bool {
        try await database.read { connection in
            try await connection.query("SELECT 1 FROM notifications WHERE notification_uuid = \(uuid)", logger: logger).collect().count > 0
        }
    }

    public func storedNotification(_ uuid: String) async throws -> NotificationRecord? {
        try await notificationRows("WHERE n.notification_uuid = \(uuid)").first
    }

    public func notifications(transactionID: String, originalTransactionID: String, limit: Int) async throws -> [NotificationRecord] {
        try await notificationRows(
            """
            WHERE n.transaction_id = \(transactionID) OR n.original_transaction_id = \(originalTransactionID) OR n.transaction_id = \(originalTransactionID)
            ORDER BY n.received_at DESC, n.notification_uuid LIMIT \(max(0, limit))
            """)
    }

    /// Rows of `notifications n` that `condition` picks, whole.
    private func notificationRows(_ condition: PostgresQuery) async throws -> [NotificationRecord] {
        try await database.read { connection in
            var query = condition
            query.sql = "SELECT \(LedgerRows.json("n", times: ["received_at"])) FROM notifications n " + condition.sql
            return try await LedgerRows.decode(NotificationRecord.self, try await connection.query(query, logger: logger))
        }
    }
}
