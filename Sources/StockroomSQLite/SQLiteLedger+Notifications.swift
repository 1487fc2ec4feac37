import Foundation
import GRDB
import StockroomCore

/// The notification log on SQLite: one row per UUID.
extension SQLiteLedger {
    public func notificationSeen(_ uuid: String) async throws -> Bool {
        try await database.writer.read { db in
            try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM notifications WHERE notification_uuid = ?", arguments: [uuid]) ?? 0 > 0
        }
    }

    public func storedNotification(_ uuid: String) async throws -> NotificationRecord? {
        try await database.writer.read { db in
            try NotificationRecord.fetchOne(db, sql: "SELECT * FROM notifications WHERE notification_uuid = ?", arguments: [uuid])
        }
    }

    public func notifications(transactionID: String, originalTransactionID: String, limit: Int) async throws -> [NotificationRecord] {
        try await database.writer.read { db in
            try NotificationRecord.fetchAll(
                db,
                sql: """
                    SELECT * FROM notifications WHERE transaction_id = ? OR original_transaction_id = ? OR transaction_id = ?
                    ORDER BY received_at DESC, notification_uuid LIMIT ?
                    """, arguments: [transactionID, originalTransactionID, originalTransactionID, max(0, limit)])
        }
    }
}
