import Foundation
import StockroomCore
import GRDB

/// The calls owed to the App Store Server API, on SQLite: queued in the write that makes them
/// due, leased to one sender at a time, settled in one write.
extension SQLiteLedger {
    public func queueConsumptionAnswer(_ transactionID: String, environment: StoreEnvironment, requestedBy uuid: String, now: Date) async throws
        -> ConsumptionQueueing
    {
        try await database.writer.write { db in
            let call = ServerCall.consumptionAnswer(transactionID, row: try Self.row(db, transactionID), environment: environment, requestedBy: uuid, now: now)
            guard try Self.execute(.queue(call), db) == 1 else { return .alreadyAnswered }
            return call.status == .queued ? .queued : .skippedNoConsent
        }
    }

    public func leaseServerCalls(limit: Int, until: Date, now: Date) async throws -> [ServerCall] {
        // A read first: the sender asks every few seconds, and an idle queue takes no write lock from downloads.
        let due = try await database.writer.read { db in
            try Bool.fetchOne(
                db.cachedStatement(sql: "SELECT EXISTS (SELECT 1 FROM server_calls WHERE status = 'queued' AND due_at <= ?)"), arguments: [now]) ?? false
        }
        guard due else { return [] }
        return try await database.writer.write { db in
            try ServerCall.fetchAll(
                db,
                sql: """
                    UPDATE server_calls SET leased_until = ? WHERE id IN
                      (SELECT id FROM server_calls WHERE status = 'queued' AND due_at <= ? AND (leased_until IS NULL OR leased_until <= ?)
                       ORDER BY due_at, id LIMIT ?)
                    RETURNING *
                    """,
                arguments: [until, now, now, max(0, limit)]
            ).sorted { ($0.dueAt, $0.id ?? 0) < ($1.dueAt, $1.id ?? 0) }
        }
    }

    public func completeServerCall(_ id: Int64, _ result: ServerCallResult, now: Date) async throws {
        try await database.writer.write { db in
            guard let call = try ServerCall.fetchOne(db, key: id), call.status == .queued else { return }
            for statement in call.settlement(result, now: now) { try Self.execute(statement, db) }
        }
    }

    public func serverCalls(_ filter: ServerCallFilter) async throws -> [ServerCall] {
        try await database.writer.read { db in
            var request = ServerCall.all()
            if let kind = filter.kind { request = request.filter(Column("kind") == kind.rawValue) }
            if let status = filter.status { request = request.filter(Column("status") == status.rawValue) }
            if let transactionID = filter.transactionID { request = request.filter(Column("transaction_id") == transactionID) }
            return try request.order(Column("id").desc).limit(max(0, filter.limit)).fetchAll(db)
        }
    }
}
