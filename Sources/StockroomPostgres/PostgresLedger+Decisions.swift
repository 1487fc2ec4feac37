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
        for statement in writes.statements { try await execute(statement, on: connection) }
    }

    public func execute(_ statement: LedgerStatement) async throws -> Int {
        try await database.transaction { connection in try await execute(statement, on: connection) }
    }

    /// Runs one of the ledger's shared statements; returns how many rows it returned (`RETURNING`).
    @discardableResult
    func execute(_ statement: LedgerStatement, on connection: PostgresConnection) async throws -> Int {
        try await connection.query(statement.postgres, logger: logger).collect().count
    }
}

extension LedgerStatement {
    /// The statement with PostgreSQL's parameters (`$1` for `?1`) and its values bound.
    var postgres: PostgresQuery {
        var binds = PostgresBindings(capacity: arguments.count)
        for argument in arguments {
            switch argument {
            case .null: binds.appendNull()
            case .text(let text): binds.append(text)
            case .integer(let integer): binds.append(integer)
            case .bool(let bool): binds.append(bool)
            case .time(let date): binds.append(Timestamp(date))
            }
        }
        return PostgresQuery(unsafeSQL: sql.replacing(/\?(\d+)/) { "$" + $0.output.1 }, binds: binds)
    }
}
