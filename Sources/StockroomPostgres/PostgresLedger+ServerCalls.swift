import Foundation
import PostgresNIO
import StockroomCore

/// The calls owed to the App Store Server API, on PostgreSQL: queued in the transaction that
/// makes them due, settled in one transaction (leases, with SKIP LOCKED so that instances
/// sharing the ledger each send a different call, and reads are the shared ones).
extension PostgresLedger {
    public func queueConsumptionAnswer(_ transactionID: String, environment: StoreEnvironment, requestedBy uuid: String, now: Date)
        async throws
        -> ConsumptionQueueing
    {
        try await database.transaction { connection in
            let row = try await fetch(.fulfilment(transactionID), as: Fulfilment.self, on: connection).first
            let call = ServerCall.consumptionAnswer(transactionID, row: row, environment: environment, requestedBy: uuid, now: now)
            guard try await execute(.queue(call), on: connection) == 1 else { return .alreadyAnswered }
            return call.status == .queued ? .queued : .skippedNoConsent
        }
    }

    public func completeServerCall(_ id: Int64, _ result: ServerCallResult, now: Date) async throws {
        try await database.transaction { connection in
            let call = try await fetch(.serverCall(id), as: ServerCall.self, on: connection, locking: true).first
            guard let call, call.status == .queued else { return }
            for statement in call.settlement(result, now: now) { try await execute(statement, on: connection) }
        }
    }
}
