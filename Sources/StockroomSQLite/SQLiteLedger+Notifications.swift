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

    public func recordNotification(_ notification: NotificationRecord, outcome: String, now: Date) async throws -> Bool {
        try await database.writer.write { db in
            try db.execute(
                sql: """
                    INSERT INTO notifications (notification_uuid, notification_type, subtype, transaction_id, original_transaction_id, outcome,
                      received_at, signed_payload, source)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (notification_uuid) DO NOTHING
                    """,
                arguments: [
                    notification.uuid, notification.type, notification.subtype, notification.transactionID,
                    notification.originalTransactionID, outcome, now, notification.signedPayload, notification.source,
                ])
            return db.changesCount == 1
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
