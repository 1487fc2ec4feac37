import Foundation
import StockroomCore
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

    public func fulfilmentPage(_ query: FulfilmentPageQuery) async throws -> FulfilmentPage {
        try await database.writer.read { db in
            var request = Fulfilment.all()
            if let state = query.state { request = request.filter(FulfilmentColumn.state == state.rawValue) }
            if let product = query.productID { request = request.filter(FulfilmentColumn.productID == product) }
            if let from = query.from { request = request.filter(Column("created_at") >= from) }
            if let to = query.to { request = request.filter(Column("created_at") < to) }
            let total = try request.fetchCount(db)
            let rows = try request.order(Column("created_at").desc, FulfilmentColumn.transactionID.desc)
                .limit(query.pageSize, offset: query.offset).fetchAll(db)
            return FulfilmentPage(rows: rows, total: total)
        }
    }

    public func pendingProofs(keptUnder transactionID: String, limit: Int) async throws -> [PendingProof] {
        try await database.writer.read { db in
            try PendingProof.filter(Column("transaction_id") == transactionID).order(Column("id")).limit(max(0, limit)).fetchAll(db)
        }
    }
}
