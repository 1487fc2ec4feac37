import Foundation
import GRDB

/// The console's reads on SQLite: plain SELECTs on the reader pool, never the writer.
extension SQLiteLedger: LedgerInsights {
    public func deliveriesPerHour(since: Date) async throws -> [HourlyDeliveries] {
        try await database.writer.read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT CAST(strftime('%s', at) AS INTEGER) / 3600 AS hour,
                      SUM(outcome = 'complete') AS complete, SUM(outcome = 'interrupted') AS interrupted, SUM(bytes) AS bytes
                    FROM download_attempts WHERE at >= ? GROUP BY hour ORDER BY hour
                    """, arguments: [since]
            ).compactMap { row -> HourlyDeliveries? in
                guard let hour: Int64 = row["hour"] else { return nil }
                return HourlyDeliveries(
                    hour: Date(timeIntervalSince1970: TimeInterval(hour) * 3600), complete: row["complete"], interrupted: row["interrupted"],
                    bytes: row["bytes"])
            }
        }
    }

    public func productTallies(limit: Int) async throws -> ProductTallies {
        try await database.writer.read { db in
            let top = try Row.fetchAll(
                db,
                sql: """
                    SELECT product_id, COUNT(*) AS fulfilments, SUM(bytes_delivered) AS bytes FROM fulfilments
                    GROUP BY product_id ORDER BY fulfilments DESC, product_id LIMIT ?
                    """, arguments: [max(0, limit)]
            ).map { ProductTally(productID: $0["product_id"], fulfilments: $0["fulfilments"], bytesDelivered: $0["bytes"]) }
            let totals = try Row.fetchOne(db, sql: "SELECT COUNT(*) AS fulfilments, COALESCE(SUM(bytes_delivered), 0) AS bytes FROM fulfilments")
            return ProductTallies(top: top, fulfilments: totals?["fulfilments"] ?? 0, bytesDelivered: totals?["bytes"] ?? 0)
        }
    }

    public func fulfilmentPage(_ query: FulfilmentQuery) async throws -> FulfilmentPage {
        try await database.writer.read { db in
            var request = Fulfilment.all()
            if let state = query.state { request = request.filter(Fulfilment.Columns.state == state.rawValue) }
            if let product = query.productID { request = request.filter(Fulfilment.Columns.productID == product) }
            if let from = query.from { request = request.filter(Column("created_at") >= from) }
            if let to = query.to { request = request.filter(Column("created_at") < to) }
            let total = try request.fetchCount(db)
            let rows = try request.order(Column("created_at").desc, Fulfilment.Columns.transactionID.desc)
                .limit(query.pageSize, offset: query.offset).fetchAll(db)
            return FulfilmentPage(rows: rows, total: total)
        }
    }

    public func notifications(transactionID: String, originalTransactionID: String, limit: Int) async throws -> [NotificationEntry] {
        try await database.writer.read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT notification_uuid, notification_type, subtype, transaction_id, original_transaction_id, outcome, received_at
                    FROM notifications WHERE transaction_id = ? OR original_transaction_id = ? OR transaction_id = ?
                    ORDER BY received_at DESC, notification_uuid LIMIT ?
                    """, arguments: [transactionID, originalTransactionID, originalTransactionID, max(0, limit)]
            ).map { row in
                NotificationEntry(
                    uuid: row["notification_uuid"], type: row["notification_type"], subtype: row["subtype"], transactionID: row["transaction_id"],
                    originalTransactionID: row["original_transaction_id"], outcome: row["outcome"], receivedAt: row["received_at"])
            }
        }
    }

    public func pendingProofs(of transactionID: String, limit: Int) async throws -> [PendingProof] {
        try await database.writer.read { db in
            try PendingProof.filter(Column("transaction_id") == transactionID).order(Column("id")).limit(max(0, limit)).fetchAll(db)
        }
    }
}
