import Foundation
import PostgresNIO
import StockroomCore

/// The console's reads on PostgreSQL: plain SELECTs with bound parameters, no locks.
extension PostgresLedger: LedgerInsights {
    public func deliveriesPerHour(since: Date) async throws -> [HourlyDeliveries] {
        try await database.read { connection in
            var hours: [HourlyDeliveries] = []
            let rows = try await connection.query(
                """
                SELECT floor(extract(epoch from at) / 3600)::bigint AS hour,
                  count(*) FILTER (WHERE outcome = 'complete'), count(*) FILTER (WHERE outcome = 'interrupted'), COALESCE(sum(bytes), 0)::bigint
                FROM download_attempts WHERE at >= \(Timestamp(since)) GROUP BY hour ORDER BY hour
                """, logger: logger)
            for try await (hour, complete, interrupted, bytes) in rows.decode((Int64, Int, Int, Int64).self) {
                hours.append(
                    HourlyDeliveries(
                        hour: Date(timeIntervalSince1970: TimeInterval(hour) * 3600), complete: complete, interrupted: interrupted, bytes: bytes))
            }
            return hours
        }
    }

    public func productTallies(limit: Int) async throws -> ProductTallies {
        try await database.read { connection in
            var top: [ProductTally] = []
            let rows = try await connection.query(
                """
                SELECT product_id, count(*) AS fulfilments, COALESCE(sum(bytes_delivered), 0)::bigint FROM fulfilments
                GROUP BY product_id ORDER BY fulfilments DESC, product_id LIMIT \(max(0, limit))
                """, logger: logger)
            for try await (product, count, bytes) in rows.decode((String, Int, Int64).self) {
                top.append(ProductTally(productID: product, fulfilments: count, bytesDelivered: bytes))
            }
            var totals = ProductTallies(top: top, fulfilments: 0, bytesDelivered: 0)
            let sums = try await connection.query("SELECT count(*), COALESCE(sum(bytes_delivered), 0)::bigint FROM fulfilments", logger: logger)
            for try await (count, bytes) in sums.decode((Int, Int64).self) {
                totals.fulfilments = count
                totals.bytesDelivered = bytes
            }
            return totals
        }
    }

    public func fulfilmentPage(_ query: FulfilmentPageQuery) async throws -> FulfilmentPage {
        try await database.read { connection in
            var conditions: [String] = []
            var binds = PostgresBindings()
            if let state = query.state {
                binds.append(state.rawValue)
                conditions.append("f.state = $\(binds.count)")
            }
            if let product = query.productID {
                binds.append(product)
                conditions.append("f.product_id = $\(binds.count)")
            }
            if let from = query.from {
                binds.append(Timestamp(from))
                conditions.append("f.created_at >= $\(binds.count)")
            }
            if let to = query.to {
                binds.append(Timestamp(to))
                conditions.append("f.created_at < $\(binds.count)")
            }
            let condition = conditions.isEmpty ? "" : "WHERE " + conditions.joined(separator: " AND ")
            var total = 0
            let counted = try await connection.query(PostgresQuery(unsafeSQL: "SELECT count(*) FROM fulfilments f \(condition)", binds: binds), logger: logger)
            for try await count in counted.decode(Int.self) { total = count }
            binds.append(query.pageSize)
            binds.append(query.offset)
            let sql = """
                SELECT \(LedgerRows.fulfilment) FROM fulfilments f \(condition)
                ORDER BY f.created_at DESC, f.transaction_id DESC LIMIT $\(binds.count - 1) OFFSET $\(binds.count)
                """
            let rows = try await LedgerRows.decode(Fulfilment.self, try await connection.query(PostgresQuery(unsafeSQL: sql, binds: binds), logger: logger))
            return FulfilmentPage(rows: rows, total: total)
        }
    }

    public func pendingProofs(keptUnder transactionID: String, limit: Int) async throws -> [PendingProof] {
        try await database.read { connection in
            try await LedgerRows.decode(
                PendingProof.self,
                try await connection.query(
                    """
                    SELECT \(unescaped: LedgerRows.pendingProof) FROM pending_proofs p
                    WHERE p.transaction_id = \(transactionID) ORDER BY p.id LIMIT \(max(0, limit))
                    """, logger: logger))
        }
    }
}
