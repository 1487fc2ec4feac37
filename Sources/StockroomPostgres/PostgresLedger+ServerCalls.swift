import Foundation
import PostgresNIO
import StockroomCore

/// The calls owed to the App Store Server API, on PostgreSQL: queued in the transaction that
/// makes them due, leased with SKIP LOCKED so that instances sharing the ledger each send a
/// different call, settled in one transaction.
extension PostgresLedger {
    public func queueConsumptionAnswer(_ transactionID: String, environment: StoreEnvironment, requestedBy uuid: String, now: Date) async throws
        -> ConsumptionQueueing
    {
        try await database.transaction { connection in
            let row = try await Self.fulfilment(transactionID, on: connection, logger: logger)
            let call = ServerCall.consumptionAnswer(transactionID, row: row, environment: environment, requestedBy: uuid, now: now)
            guard try await execute(.queue(call), on: connection) == 1 else { return .alreadyAnswered }
            return call.status == .queued ? .queued : .skippedNoConsent
        }
    }

    public func leaseServerCalls(limit: Int, until: Date, now: Date) async throws -> [ServerCall] {
        try await database.read { connection in
            let leased = try await LedgerRows.decode(
                ServerCall.self,
                try await connection.query(
                    """
                    UPDATE server_calls c SET leased_until = \(Timestamp(until)) WHERE c.id IN
                      (SELECT id FROM server_calls WHERE status = 'queued' AND due_at <= \(Timestamp(now))
                         AND (leased_until IS NULL OR leased_until <= \(Timestamp(now)))
                       ORDER BY due_at, id LIMIT \(max(0, limit)) FOR UPDATE SKIP LOCKED)
                    RETURNING \(unescaped: LedgerRows.serverCall)
                    """, logger: logger))
            return leased.sorted { ($0.dueAt, $0.id ?? 0) < ($1.dueAt, $1.id ?? 0) }
        }
    }

    public func completeServerCall(_ id: Int64, _ result: ServerCallResult, now: Date) async throws {
        try await database.transaction { connection in
            guard
                let call = try await LedgerRows.decode(
                    ServerCall.self,
                    try await connection.query("SELECT \(unescaped: LedgerRows.serverCall) FROM server_calls c WHERE c.id = \(id) FOR UPDATE", logger: logger)
                ).first, call.status == .queued
            else { return }
            for statement in call.settlement(result, now: now) { try await execute(statement, on: connection) }
        }
    }

    public func serverCalls(_ filter: ServerCallFilter) async throws -> [ServerCall] {
        try await database.read { connection in
            try await LedgerRows.decode(
                ServerCall.self,
                try await connection.query(
                    """
                    SELECT \(unescaped: LedgerRows.serverCall) FROM server_calls c
                    WHERE (\(filter.kind?.rawValue)::text IS NULL OR c.kind = \(filter.kind?.rawValue))
                      AND (\(filter.status?.rawValue)::text IS NULL OR c.status = \(filter.status?.rawValue))
                      AND (\(filter.transactionID)::text IS NULL OR c.transaction_id = \(filter.transactionID))
                    ORDER BY c.id DESC LIMIT \(max(0, filter.limit))
                    """, logger: logger))
        }
    }
}
