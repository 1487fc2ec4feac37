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
            var call = ServerCall.queued(.consumption, transactionID, environment: row?.environment ?? environment, requestedBy: uuid, now: now)
            let consented = row?.customerConsented == true
            if !consented {
                call.status = .skipped
                call.lastError = "no customer consent on record: nothing is sent to Apple"
            }
            guard try await insertOnce(connection, call) else { return .alreadyAnswered }
            return consented ? .queued : .skippedNoConsent
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
                var call = try await LedgerRows.decode(
                    ServerCall.self,
                    try await connection.query("SELECT \(unescaped: LedgerRows.serverCall) FROM server_calls c WHERE c.id = \(id) FOR UPDATE", logger: logger)
                ).first, call.status == .queued
            else { return }
            call.apply(result, now: now)
            try await connection.query(
                """
                UPDATE server_calls SET status = \(call.status.rawValue), attempts = \(call.attempts), due_at = \(Timestamp(call.dueAt)),
                  leased_until = NULL, last_error = \(call.lastError), body = \(call.body), updated_at = \(Timestamp(now)),
                  sent_at = \(call.sentAt.map(Timestamp.init))
                WHERE id = \(id)
                """, logger: logger
            ).drain()
            if call.kind == .finish, call.status == .sent {
                try await connection.query(
                    """
                    UPDATE fulfilments SET finished_at = COALESCE(finished_at, \(Timestamp(now))), updated_at = \(Timestamp(now))
                    WHERE transaction_id = \(call.transactionID)
                    """, logger: logger
                ).drain()
            }
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

    /// Inserts `call` unless one of its kind exists for its transaction; true when inserted.
    func insertOnce(_ connection: PostgresConnection, _ call: ServerCall) async throws -> Bool {
        try await connection.query(
            """
            INSERT INTO server_calls (kind, transaction_id, environment, status, attempts, due_at, last_error, requested_by, created_at, updated_at)
            VALUES (\(call.kind.rawValue), \(call.transactionID), \(call.environment.rawValue), \(call.status.rawValue), 0, \(Timestamp(call.dueAt)),
              \(call.lastError), \(call.requestedBy), \(Timestamp(call.createdAt)), \(Timestamp(call.updatedAt)))
            ON CONFLICT (kind, transaction_id) DO NOTHING RETURNING 1
            """, logger: logger
        ).collect().count == 1
    }
}
