import Foundation
import PostgresNIO
import StockroomCore

/// The `Ledger` on PostgreSQL, for several Stockroom instances sharing one database.
///
/// Each decision is one SQL transaction that takes the purchase's advisory lock (so decisions
/// on one purchase run one at a time across instances, as SQLite's single writer runs them),
/// reads the purchase's rows `FOR UPDATE`, applies the same `EntitlementRules` as
/// `SQLiteLedger`, and writes the rows the rules changed. A lost database throws
/// `LedgerUnavailable`; the pool reconnects by itself when the database is back.
public struct PostgresLedger: Ledger, LedgerStatementRunner {
    public let database: PostgresPool
    /// When set, a transaction reaching this point is queued for Finish Transaction in the same transaction.
    public let finishOn: FinishTrigger?

    public init(database: PostgresPool, finishOn: FinishTrigger? = nil) {
        self.database = database
        self.finishOn = finishOn
    }

    var logger: Logger { database.logger }

    // MARK: Reads

    public func fulfilment(_ transactionID: String) async throws -> Fulfilment? {
        try await database.read { connection in try await Self.fulfilment(transactionID, on: connection, logger: logger) }
    }

    public func list(_ filter: FulfilmentFilter) async throws -> [Fulfilment] {
        try await database.read { connection in
            var conditions: [String] = []
            var binds = PostgresBindings()
            if let states = filter.states {
                binds.append(states.map(\.rawValue).sorted())
                conditions.append("f.state = ANY($\(binds.count))")
            }
            if let product = filter.productID {
                binds.append(product)
                conditions.append("f.product_id = $\(binds.count)")
            }
            if let since = filter.since {
                binds.append(Timestamp(since))
                conditions.append("f.updated_at >= $\(binds.count)")
            }
            if filter.unfinished {
                conditions.append("f.transaction_id IN (SELECT transaction_id FROM server_calls WHERE kind = 'finish' AND status = 'queued')")
            }
            binds.append(max(0, filter.limit))
            let condition = conditions.isEmpty ? "" : "WHERE " + conditions.joined(separator: " AND ")
            let sql = "SELECT \(LedgerRows.fulfilment) FROM fulfilments f \(condition) ORDER BY f.updated_at DESC LIMIT $\(binds.count)"
            return try await LedgerRows.decode(Fulfilment.self, try await connection.query(PostgresQuery(unsafeSQL: sql, binds: binds), logger: logger))
        }
    }

    public func attempts(of transactionID: String) async throws -> [DownloadAttempt] {
        try await database.read { connection in
            try await LedgerRows.decode(
                DownloadAttempt.self,
                try await connection.query(
                    "SELECT \(unescaped: LedgerRows.attempt) FROM download_attempts a WHERE a.transaction_id = \(transactionID) ORDER BY a.id",
                    logger: logger))
        }
    }

    public func pendingProofs(status: PendingProof.Status?, limit: Int) async throws -> [PendingProof] {
        try await database.read { connection in
            try await LedgerRows.decode(
                PendingProof.self,
                try await connection.query(
                    """
                    SELECT \(unescaped: LedgerRows.pendingProof) FROM pending_proofs p
                    WHERE \(status?.rawValue)::text IS NULL OR p.status = \(status?.rawValue) ORDER BY p.id LIMIT \(max(0, limit))
                    """, logger: logger))
        }
    }

    public func stateCounts() async throws -> [FulfilmentState: Int] {
        try await database.read { connection in
            var counts: [FulfilmentState: Int] = [:]
            for try await (state, count) in try await connection.query("SELECT state, count(*) FROM fulfilments GROUP BY state", logger: logger)
                .decode((String, Int).self)
            {
                if let state = FulfilmentState(rawValue: state) { counts[state] = count }
            }
            return counts
        }
    }

    // MARK: Rows

    static func fulfilment(_ transactionID: String, on connection: PostgresConnection, logger: Logger, locking: Bool = false) async throws
        -> Fulfilment?
    {
        let lock = locking ? " FOR UPDATE" : ""
        return try await LedgerRows.decode(
            Fulfilment.self,
            try await connection.query("SELECT \(unescaped: LedgerRows.fulfilment) FROM fulfilments f WHERE f.transaction_id = \(transactionID)\(unescaped: lock)", logger: logger)
        ).first
    }

    /// Serialises the decisions on one purchase across connections and instances, until the
    /// transaction ends. Keys are hashed into the one-key advisory space (migrations use the two-key space).
    static func lockPurchase(_ originalTransactionID: String, on connection: PostgresConnection, logger: Logger) async throws {
        try await connection.query("SELECT pg_advisory_xact_lock(hashtextextended(\("purchase:" + originalTransactionID), 0))", logger: logger).drain()
    }

    /// The transaction's row and every row of its purchase (restores), locked, as the rules see
    /// them: the same rows `SQLiteLedger` reads.
    static func purchase(transactionID: String, originalTransactionID: String, on connection: PostgresConnection, logger: Logger) async throws
        -> PurchaseWork
    {
        let rows = try await LedgerRows.decode(
            Fulfilment.self,
            try await connection.query(
                """
                SELECT \(unescaped: LedgerRows.fulfilment) FROM fulfilments f
                WHERE f.original_transaction_id = \(originalTransactionID) OR f.transaction_id = \(transactionID)
                  OR f.transaction_id = \(originalTransactionID)
                FOR UPDATE
                """, logger: logger))
        return PurchaseWork(rows: rows)
    }
}
