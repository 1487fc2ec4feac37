import Foundation
import PostgresNIO
import StockroomCore
import StockroomPostgres
import StockroomPostgresTestSupport
import Testing

/// What only the PostgreSQL ledger has: migrations shared by several instances, and a database
/// that goes away and comes back. (Its rules are LedgerTests', run on both engines.)
@Suite struct PostgresLedgerTests {
    static func pool(_ address: PostgresAddress, leaseTimeout: Duration = .seconds(5)) -> PostgresPool {
        PostgresPool(address: address, poolSize: 2, leaseTimeout: leaseTimeout, logger: ScratchPostgres.quiet)
    }

    @Test func instancesStartingTogetherMigrateOnceAndAgainFindNothingToDo() async throws {
        try await ScratchPostgres.withDatabase { address in
            let applied = try await withThrowingTaskGroup(of: [Int].self) { group in
                for _ in 0..<4 { group.addTask { try await PostgresPool.migrate(address: address, logger: ScratchPostgres.quiet) } }
                return try await group.reduce(into: [[Int]]()) { $0.append($1) }
            }
            #expect(applied.flatMap { $0 }.sorted() == Array(1...7), "each migration applied by exactly one instance")
            #expect(try await PostgresPool.migrate(address: address, logger: ScratchPostgres.quiet).isEmpty)
            let versions = try await Self.pool(address).running { database in
                try await database.client.query("SELECT version FROM schema_migrations ORDER BY version").decode(Int.self).reduce(into: [Int]()) { $0.append($1) }
            }
            #expect(versions == Array(1...7))
        }
    }

    @Test func aLedgerMigratedByANewerStockroomIsRefused() async throws {
        try await ScratchPostgres.withDatabase { address in
            try await PostgresPool.migrate(address: address, logger: ScratchPostgres.quiet)
            try await ScratchPostgres.admin(address, "INSERT INTO schema_migrations (version, name) VALUES (99, 'v99: from the future')")
            let error = await #expect(throws: (any Error).self) { try await PostgresPool.migrate(address: address, logger: ScratchPostgres.quiet) }
            #expect("\(error.map(String.init(describing:)) ?? "")".contains("version 99"))
        }
    }

    @Test func aServerNobodyListensOnIsUnavailableWithinTheLeaseTimeout() async throws {
        var address = try ScratchPostgres.cluster()
        address.port = 9  // discard: nothing answers
        try await Self.pool(address, leaseTimeout: .milliseconds(500)).running { database in
            let ledger = PostgresLedger(database: database)
            let started = ContinuousClock.now
            let first = await #expect(throws: LedgerUnavailable.self) { try await ledger.fulfilment("1") }
            let second = await #expect(throws: LedgerUnavailable.self) {
                try await ledger.recordNotification(
                    NotificationRecord(uuid: "u", type: "REFUND", subtype: nil, transactionID: nil, originalTransactionID: nil), outcome: "x", now: Date())
            }
            // Each gave up when its wait for a connection ran out, not on some later failure.
            #expect(first?.reason == "no database connection within 0.5 seconds")
            #expect(second?.reason == "no database connection within 0.5 seconds")
            // Bounded, with room for a loaded machine: unavailable, never hanging.
            #expect(ContinuousClock.now - started < .seconds(30))
        }
    }

    @Test func aLostDatabaseIsUnavailableAndTheSamePoolRecoversWhenItIsBack() async throws {
        let cluster = try ScratchPostgres.cluster()
        try await ScratchPostgres.withDatabase { address in
            try await Self.pool(address, leaseTimeout: .seconds(5)).running { database in
                let ledger = PostgresLedger(database: database)
                #expect(try await ledger.notificationSeen("u") == false, "connected, migrated")
                // The database goes away: its connections are cut and new ones refused.
                try await ScratchPostgres.admin(cluster, "ALTER DATABASE \(address.database) ALLOW_CONNECTIONS false")
                try await ScratchPostgres.admin(
                    cluster, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '\(address.database)'")
                let error = await #expect(throws: LedgerUnavailable.self) { try await ledger.notificationSeen("u") }
                #expect(error?.retryAfter ?? .zero > .zero)
                // It comes back: the same pool reconnects, with no restart.
                try await ScratchPostgres.admin(cluster, "ALTER DATABASE \(address.database) ALLOW_CONNECTIONS true")
                let deadline = ContinuousClock.now + .seconds(30)
                var recovered = false
                while !recovered, ContinuousClock.now < deadline {
                    recovered = (try? await ledger.notificationSeen("u")) != nil
                    if !recovered { try await Task.sleep(for: .milliseconds(100)) }
                }
                #expect(recovered)
            }
        }
    }
}
