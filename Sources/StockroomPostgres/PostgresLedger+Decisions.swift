import Foundation
import PostgresNIO
import StockroomCore

/// Every decision (`LedgerDecisions`): one transaction, the purchase locked across instances.
extension PostgresLedger {
    public func decide<Value: Sendable>(_ scope: PurchaseScope, _ decision: @escaping @Sendable (inout PurchaseWork) throws -> Value)
        async throws
        -> Value
    {
        try await database.transaction { connection in
            var work = PurchaseWork(rows: try await read(scope, on: connection))
            let value = try decision(&work)
            for statement in work.writes.statements { try await execute(statement, on: connection) }
            return value
        }
    }

    /// The rows `scope` names, locked: the purchase's advisory lock (decisions on one purchase
    /// run one at a time, across connections and instances, as SQLite's one writer runs them),
    /// then its rows `FOR UPDATE`.
    private func read(_ scope: PurchaseScope, on connection: PostgresConnection) async throws -> [Fulfilment] {
        switch scope {
        case .purchase(let transactionID, let originalTransactionID):
            return try await purchase(transactionID: transactionID, originalTransactionID: originalTransactionID, on: connection)
        case .purchaseOf(let transactionID):
            guard let row = try await fetch(.fulfilment(transactionID), as: Fulfilment.self, on: connection).first else { return [] }
            return try await purchase(transactionID: row.transactionID, originalTransactionID: row.originalTransactionID, on: connection)
        case .transaction(let transactionID):
            return try await fetch(.fulfilment(transactionID), as: Fulfilment.self, on: connection, locking: true)
        }
    }

    /// The purchase's rows under its advisory lock (keys are hashed into the one-key advisory
    /// space; migrations use the two-key space), then `FOR UPDATE`.
    private func purchase(transactionID: String, originalTransactionID: String, on connection: PostgresConnection) async throws
        -> [Fulfilment]
    {
        try await connection.query(
            "SELECT pg_advisory_xact_lock(hashtextextended(\("purchase:" + originalTransactionID), 0))", logger: logger
        ).drain()
        let rows = LedgerStatement.purchase(transactionID: transactionID, originalTransactionID: originalTransactionID)
        return try await fetch(rows, as: Fulfilment.self, on: connection, locking: true)
    }
}
