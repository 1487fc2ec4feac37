import Dispatch
import Foundation
import NIOPosix
import PostgresNIO
import StockroomCore
import Synchronization

/// The ledger's flows of several statements on PostgreSQL: one SQL transaction on a pooled
/// connection, the flow run on a thread of its own that waits for each statement's answer.
///
/// The flows are written once for both engines as synchronous code (`LedgerTransaction`),
/// because SQLite's transaction is one closure on its writer. Here each statement is sent as
/// usual and only the flow's thread waits; the connection's event loop and the tasks' threads
/// never do. The threads are a pool of their own, as many as a pool of connections has.
extension PostgresLedger {
    /// A flow's transaction is bounded by the pool's call timeout; an export or an import is not.
    /// An export reads one repeatable-read snapshot.
    public func transaction<Value: Sendable>(
        _ kind: LedgerTransactionKind, _ body: @escaping @Sendable (any LedgerTransaction) throws -> Value
    ) async throws -> Value {
        try await database.transaction(bounded: kind == .write) { connection in
            if kind == .snapshot {
                try await connection.query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY", logger: logger).drain()
            }
            let limit = kind == .write ? database.callTimeout + .seconds(2) : nil
            let transaction = Transaction(ledger: self, connection: connection, limit: limit)
            return try await withCheckedThrowingContinuation { continuation in
                Self.flowThreads.submit { state in
                    guard state == .active else {
                        return continuation.resume(throwing: LedgerUnavailable(reason: "the ledger's flow threads are shut down"))
                    }
                    continuation.resume(with: Result { try body(transaction) })
                }
            }
        }
    }

    /// The threads flows wait on: one per connection a transaction can hold (a pool of more
    /// connections queues its flows here, holding their connections, and never deadlocks: a
    /// flow's thread waits only for its own connection's answers).
    static let flowThreads: NIOThreadPool = {
        let pool = NIOThreadPool(numberOfThreads: 64)
        pool.start()
        return pool
    }()

    private struct Transaction: LedgerTransaction {
        let ledger: PostgresLedger
        let connection: PostgresConnection
        /// How long one statement's answer is waited for; nil: as long as it takes.
        let limit: Duration?

        func fetch<Record: LedgerRecord>(_ statement: LedgerStatement, as type: Record.Type, locking: Bool) throws -> [Record] {
            try wait { try await ledger.fetch(statement, as: type, on: connection, locking: locking) }
        }

        func lock(_ key: String, shared: Bool) throws {
            try wait {
                let query: PostgresQuery =
                    shared
                    ? "SELECT pg_advisory_xact_lock_shared(hashtextextended(\(key), 0))"
                    : "SELECT pg_advisory_xact_lock(hashtextextended(\(key), 0))"
                try await connection.query(query, logger: ledger.logger).drain()
            }
        }

        /// `work`'s answer, waited for on this (the flow's) thread. A statement the pool cut
        /// (past its call timeout, or on a connection the database closed) fails here too; in a
        /// bounded transaction, one never answered at all is given up a little after the call
        /// timeout, so that no thread waits for good.
        private func wait<Answer: Sendable>(_ work: @escaping @Sendable () async throws -> Answer) throws -> Answer {
            let answer = Mutex<Result<Answer, any Error>?>(nil)
            let done = DispatchSemaphore(value: 0)
            Task {
                let result: Result<Answer, any Error>
                do { result = .success(try await work()) } catch { result = .failure(error) }
                answer.withLock { $0 = result }
                done.signal()
            }
            if let limit {
                guard done.wait(timeout: .now() + .milliseconds(Int(limit.components.seconds * 1000))) == .success else {
                    throw LedgerUnavailable(reason: "no answer from the database within \(limit)")
                }
            } else {
                done.wait()
            }
            return try answer.withLock { $0! }.get()
        }
    }
}
