import Foundation
import PostgresNIO
import StockroomCore
import StockroomPostgres
import StockroomPostgresTestSupport
import StockroomTestSupport
import Testing

/// What only the PostgreSQL ledger has: migrations shared by several instances, and a database
/// that goes away, or stops answering, and comes back. (Its rules are LedgerTests', run on both engines.)
@Suite struct PostgresLedgerTests {
    static func pool(_ address: PostgresAddress, checkoutTimeout: Duration = .seconds(5)) -> PostgresPool {
        PostgresPool(address: address, poolSize: 2, checkoutTimeout: checkoutTimeout, logger: ScratchPostgres.quiet)
    }

    @Test func instancesStartingTogetherMigrateOnceAndAgainFindNothingToDo() async throws {
        let every = LedgerSchema.migrations(.postgres).map(\.version)
        #expect(every == Array(1...13), "the schema's versions, in order")
        try await ScratchPostgres.withDatabase { address in
            let applied = try await withThrowingTaskGroup(of: [Int].self) { group in
                for _ in 0..<4 { group.addTask { try await PostgresPool.migrate(address: address, logger: ScratchPostgres.quiet) } }
                return try await group.reduce(into: [[Int]]()) { $0.append($1) }
            }
            #expect(applied.flatMap { $0 }.sorted() == every, "each migration applied by exactly one instance")
            #expect(try await PostgresPool.migrate(address: address, logger: ScratchPostgres.quiet).isEmpty)
            let versions = try await Self.pool(address).running { database in
                try await database.client.query("SELECT version FROM schema_migrations ORDER BY version").decode(Int.self).reduce(
                    into: [Int]()
                ) { $0.append($1) }
            }
            #expect(versions == every)
        }
    }

    @Test func aLedgerMigratedByANewerStockroomIsRefused() async throws {
        try await ScratchPostgres.withDatabase { address in
            try await PostgresPool.migrate(address: address, logger: ScratchPostgres.quiet)
            try await ScratchPostgres.admin(address, "INSERT INTO schema_migrations (version, name) VALUES (99, 'v99: from the future')")
            let error = await #expect(throws: (any Error).self) {
                try await PostgresPool.migrate(address: address, logger: ScratchPostgres.quiet)
            }
            #expect("\(error.map(String.init(describing:)) ?? "")".contains("version 99"))
        }
    }

    @Test func aServerNobodyListensOnIsUnavailableWithinTheLeaseTimeout() async throws {
        var address = try ScratchPostgres.cluster()
        address.port = 9  // discard: nothing answers
        try await Self.pool(address, checkoutTimeout: .milliseconds(500)).running { database in
            let ledger = PostgresLedger(database: database)
            let started = ContinuousClock.now
            let first = await #expect(throws: LedgerUnavailable.self) { try await ledger.fulfilment("1") }
            let second = await #expect(throws: LedgerUnavailable.self) {
                try await ledger.recordNotification(
                    NotificationRecord(uuid: "u", type: "REFUND", subtype: nil, transactionID: nil, originalTransactionID: nil),
                    outcome: "x", now: Date())
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
            try await Self.pool(address, checkoutTimeout: .seconds(5)).running { database in
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

    @Test func aDatabaseThatStopsAnsweringIsUnavailableAtTheCallTimeoutAndTheSamePoolRecovers() async throws {
        try await ScratchPostgres.withDatabase { address in
            // The pool reaches the database through a proxy that can stall: connections stay
            // open, and nothing comes back (a half-open connection, a hung server).
            let proxy = try TCPProxy(upstreamPort: address.port)
            defer { proxy.stop() }
            var proxied = address
            proxied.host = "127.0.0.1"
            proxied.port = proxy.port
            let pool = PostgresPool(
                address: proxied, poolSize: 2, checkoutTimeout: .seconds(5), callTimeout: .seconds(1), logger: ScratchPostgres.quiet)
            try await pool.running { database in
                let ledger = PostgresLedger(database: database)
                #expect(try await ledger.notificationSeen("u") == false, "connected, migrated")
                let connections = proxy.connections
                proxy.stall(true)
                let started = ContinuousClock.now
                let error = await #expect(throws: LedgerUnavailable.self) {
                    try await ledger.recordNotification(
                        NotificationRecord(uuid: "u", type: "REFUND", subtype: nil, transactionID: nil, originalTransactionID: nil),
                        outcome: "x",
                        now: Date())
                }
                #expect(error?.reason == "no answer from the database within 1.0 seconds")
                // Without the call's deadline it waited for the kernel to give up on the connection
                // (about 15 minutes); the bound leaves room for busy cores.
                #expect(ContinuousClock.now - started < .seconds(60))
                proxy.stall(false)
                // The same pool answers again, on a new connection: the stalled one was closed.
                let deadline = ContinuousClock.now + .seconds(30)
                var seen: Bool?
                while seen == nil, ContinuousClock.now < deadline {
                    seen = try? await ledger.notificationSeen("u")
                    if seen == nil { try await Task.sleep(for: .milliseconds(100)) }
                }
                #expect(seen == false, "the pool recovered, and the write that was cut did not land")
                #expect(proxy.connections > connections)
            }
            // Straight to the database, past the proxy: the cut write is not there either.
            let landed = try await Self.pool(address).running { database in
                try await PostgresLedger(database: database).notificationSeen("u")
            }
            #expect(landed == false)
        }
    }

    /// A database that cuts every connection while calls run on them (`pg_terminate_backend`, as a
    /// restart or a failover does): each call answers, and no connection is left in the pool that
    /// holds the next call. One that was, after a 57P01, was given back alive and never read
    /// again, and the next call on it waited for good: a download's status, here, in one run of 15.
    @Test func callsCutByTheDatabaseAnswerAndLeaveNoConnectionThatHoldsTheNextCall() async throws {
        let cluster = try ScratchPostgres.cluster()
        try await ScratchPostgres.withDatabase { address in
            // The call's own deadline is far off: only the cut connections' closing can pass.
            let pool = PostgresPool(
                address: address, poolSize: 4, checkoutTimeout: .seconds(5), callTimeout: .seconds(600), logger: ScratchPostgres.quiet)
            try await pool.running { database in
                let ledger = PostgresLedger(database: database)
                _ = try await ledger.notificationSeen("warm")
                for round in 0..<12 {
                    let calls = Task {
                        await withTaskGroup(of: Void.self) { group in
                            for task in 0..<6 {
                                group.addTask {
                                    for call in 0..<8 {
                                        let record = NotificationRecord(
                                            uuid: "\(round)-\(task)-\(call)", type: "REFUND", subtype: nil, transactionID: "t\(task)",
                                            originalTransactionID: "o")
                                        _ = try? await ledger.recordNotification(record, outcome: "x", now: Date())
                                        _ = try? await ledger.notifications(
                                            transactionID: "t\(task)", originalTransactionID: "o", limit: 50)
                                    }
                                }
                            }
                        }
                    }
                    try await Task.sleep(for: .milliseconds(Int.random(in: 0...30)))
                    try await ScratchPostgres.admin(
                        cluster, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '\(address.database)'")
                    let answered: Void? = await within(.seconds(60)) { await calls.value }
                    #expect(answered != nil, "round \(round): every call answered")
                    // The database is back at once: the pool serves again (no call held by a dead connection).
                    let recovered = await within(.seconds(60)) {
                        while (try? await ledger.notifications(transactionID: "t0", originalTransactionID: "o", limit: 500)) == nil {
                            try? await Task.sleep(for: .milliseconds(50))
                        }
                        return true
                    }
                    #expect(recovered != nil, "round \(round): a later call succeeded")
                    guard answered != nil, recovered != nil else { return }
                }
            }
        }
    }
}
