import Foundation
import GRDB
import StockroomCore

/// The calls owed to the App Store Server API, on SQLite: queued in the write that makes them
/// due, settled in one write (leases and reads are the shared ones).
extension SQLiteLedger {
    public func queueConsumptionAnswer(_ transactionID: String, environment: StoreEnvironment, requestedBy uuid: String, now: Date)
        async throws
        -> ConsumptionQueueing
    {
        try await database.writer.write { db in
            let row = try Self.fetch(.fulfilment(transactionID), as: Fulfilment.self, db).first
            let call = ServerCall.consumptionAnswer(transactionID, row: row, environment: environment, requestedBy: uuid, now: now)
            guard try Self.execute(.queue(call), db) == 1 else { return .alreadyAnswered }
            return call.status == .queued ? .queued : .skippedNoConsent
        }
    }

    public func completeServerCall(_ id: Int64, _ result: ServerCallResult, now: Date) async throws {
        try await database.writer.write { db in
            guard let call = try Self.fetch(.serverCall(id), as: ServerCall.self, db).first, call.status == .queued else { return }
            for statement in call.settlement(result, now: now) { try Self.execute(statement, db) }
        }
    }
}
