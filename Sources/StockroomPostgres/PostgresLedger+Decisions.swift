import Foundation
import PostgresNIO
import StockroomCore

/// Every decision (`LedgerDecisions`): one transaction, the purchase locked across instances.
extension PostgresLedger {
    public func decide<Value: Sendable>(_ scope: PurchaseScope, _ decision: @escaping @Sendable (inout PurchaseWork) throws -> Value) async throws
        -> Value
    {
        try await database.transaction { connection in
            var work = try await read(scope, on: connection)
            let value = try decision(&work)
            try await apply(work.writes, on: connection)
            return value
        }
    }

    /// The rows `scope` names, locked: the purchase's advisory lock (decisions on one purchase
    /// run one at a time, across connections and instances, as SQLite's one writer runs them),
    /// then its rows `FOR UPDATE`.
    private func read(_ scope: PurchaseScope, on connection: PostgresConnection) async throws -> PurchaseWork {
        switch scope {
        case .purchase(let transactionID, let originalTransactionID):
            try await Self.lockPurchase(originalTransactionID, on: connection, logger: logger)
            return try await Self.purchase(transactionID: transactionID, originalTransactionID: originalTransactionID, on: connection, logger: logger)
        case .purchaseOf(let transactionID):
            guard let row = try await Self.fulfilment(transactionID, on: connection, logger: logger) else { return PurchaseWork(rows: []) }
            try await Self.lockPurchase(row.originalTransactionID, on: connection, logger: logger)
            return try await Self.purchase(
                transactionID: row.transactionID, originalTransactionID: row.originalTransactionID, on: connection, logger: logger)
        case .transaction(let transactionID):
            let row = try await Self.fulfilment(transactionID, on: connection, logger: logger, locking: true)
            return PurchaseWork(rows: row.map { [$0] } ?? [])
        }
    }

    /// Writes what a decision wrote.
    private func apply(_ writes: LedgerWrites, on connection: PostgresConnection) async throws {
        for row in writes.insertedRows { try await connection.query(LedgerRows.insert(row), logger: logger).drain() }
        for row in writes.changedRows { try await connection.query(LedgerRows.update(row), logger: logger).drain() }
        for attempt in writes.attempts {
            let transactionID = attempt.transactionID
            try await connection.query(
                """
                INSERT INTO download_attempts (transaction_id, range_start, range_end, bytes, outcome, at)
                VALUES (\(transactionID), \(attempt.rangeStart), \(attempt.rangeEnd), \(attempt.bytes), \(attempt.outcome.rawValue), \(Timestamp(attempt.at)))
                """, logger: logger
            ).drain()
            // Coalesce the log: the newest attempts stay, the counters keep the totals.
            try await connection.query(
                """
                DELETE FROM download_attempts WHERE transaction_id = \(transactionID) AND id NOT IN
                  (SELECT id FROM download_attempts WHERE transaction_id = \(transactionID) ORDER BY id DESC LIMIT \(DownloadAttempt.keptPerTransaction))
                """, logger: logger
            ).drain()
        }
        for proof in writes.settledPendingProofs {
            try await connection.query(
                "DELETE FROM pending_proofs WHERE transaction_id = \(proof.transactionID) AND proof_digest = \(proof.digest)", logger: logger
            ).drain()
        }
        for call in writes.serverCalls { _ = try await insertOnce(connection, call) }
    }
}
