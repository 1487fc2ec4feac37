import Foundation
import GRDB
import StockroomPostgres
import StockroomPostgresTestSupport
@testable import StockroomSQLite
import StockroomTestSupport
import Testing
@testable import StockroomCore

/// A backlog behind a dead receiver: each transaction's first delivery in backoff, its later
/// events queued behind it. Only the first of each line (endpoint and transaction) is marked and
/// read by a lease, so a lease costs what it leases, not what waits; every change to a line
/// (queued, settled, parked, queued again, an older ledger migrated) marks its first afresh.
@Suite struct EventOutboxBacklogTests {
    static let now = LedgerTests.now

    /// `transactions` × `events` deliveries queued to `endpoint`, written directly: each
    /// transaction's first in backoff until `now + 3600`, the others due at `now`; then marked as
    /// an import marks them.
    static func fillBacklog(_ test: TestLedger, transactions: Int, events: Int, endpoint: String = "dead") async throws {
        do {
            try await fill(test, transactions: transactions, events: events, endpoint: endpoint)
        } catch {
            Issue.record("\(String(reflecting: error))")
            throw error
        }
    }

    private static func fill(_ test: TestLedger, transactions: Int, events: Int, endpoint: String) async throws {
        _ = try await test.ledger.events(of: "none", limit: 1)  // PostgreSQL's schema is made by the first call
        let count = transactions * events
        let (now, later): (String, String)
        switch test.engine {
        case .sqlite:
            (now, later) = ("'2027-01-15 08:00:00.000'", "'2027-01-15 09:00:00.000'")
            try await test.execute(
                """
                WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < \(count))
                INSERT INTO ledger_events (id, event_id, type, transaction_id, sequence, body, created_at, fanned_out)
                SELECT i, 'e-' || i, 'purchase.verified', 't-' || ((i - 1) / \(events)), ((i - 1) % \(events)) + 1, '{}', \(now), TRUE
                FROM n
                """)
        case .postgres:
            (now, later) = ("TIMESTAMPTZ '2027-01-15 08:00:00+00'", "TIMESTAMPTZ '2027-01-15 09:00:00+00'")
            try await test.execute(
                """
                INSERT INTO ledger_events (id, event_id, type, transaction_id, sequence, body, created_at, fanned_out)
                SELECT i, 'e-' || i, 'purchase.verified', 't-' || ((i - 1) / \(events)), ((i - 1) % \(events)) + 1, '{}', \(now), TRUE
                FROM generate_series(1, \(count)) AS i
                """)
        }
        try await test.execute(
            """
            INSERT INTO webhook_deliveries (event, endpoint, transaction_id, sequence, status, attempts, due_at, created_at, updated_at)
            SELECT id, '\(endpoint)', transaction_id, sequence, 'queued', CASE WHEN sequence = 1 THEN 5 ELSE 0 END,
              CASE WHEN sequence = 1 THEN \(later) ELSE \(now) END, \(now), \(now)
            FROM ledger_events
            """)
        let runner = try #require(test.ledger as? any LedgerStatementRunner)
        try await runner.execute(.markEveryHeadOfLine)
        if test.engine == .postgres { try await test.execute("ANALYZE") }
    }

    /// One line of a plan: SQLite's `EXPLAIN QUERY PLAN` detail, or PostgreSQL's `EXPLAIN`.
    struct PlanLine: LedgerRecord {
        var text: String
        init(row: some LedgerCells) throws {
            text = try (try? row["detail"] as String) ?? row["QUERY PLAN"]
        }
    }

    static func plan(_ statement: LedgerStatement, _ test: TestLedger) async throws -> [String] {
        let runner = try #require(test.ledger as? any LedgerStatementRunner)
        let explain = test.engine == .sqlite ? "EXPLAIN QUERY PLAN " : "EXPLAIN "
        let arguments: [any LedgerBindable] = statement.arguments.map {
            switch $0 {
            case .null: String?.none
            case .text(let text): text
            case .integer(let integer): integer
            case .bool(let bool): bool
            case .time(let date): date
            }
        }
        do {
            return try await runner.fetch(LedgerStatement(explain + statement.sql, arguments), as: PlanLine.self).map(\.text)
        } catch {
            Issue.record("\(String(reflecting: error))")
            throw error
        }
    }

    /// 5,000 deliveries queued behind 1,000 heads in backoff: a lease due now finds none, and its
    /// plan reads the index of the lines' first deliveries (the order, row by row, through the
    /// lines' index), no table scan, no sort; so do the check that precedes it and the mark of a
    /// line. Once the backoff ends, the first of each line is leased, and only those.
    @Test(arguments: LedgerEngine.allCases) func aLeaseReadsOnlyTheFirstOfEachLineNotTheBacklog(_ engine: LedgerEngine) async throws {
        try await TestLedger.with(engine) { test in
            try await Self.fillBacklog(test, transactions: 1000, events: 5)
            let ledger = test.ledger
            #expect(try await ledger.leaseWebhookDeliveries(endpoint: "dead", limit: 10, until: Self.now + 60, now: Self.now).isEmpty)

            let dialect = try #require(ledger as? any LedgerStatementRunner).dialect
            let lease = LedgerStatement.leaseWebhookDeliveries(endpoint: "dead", limit: 10, until: Self.now + 60, now: Self.now, dialect)
            let due = LedgerStatement.dueWebhookDeliveries(endpoint: "dead", now: Self.now)
            for statement in [lease, due] {
                let plan = try await Self.plan(statement, test)
                let text = plan.joined(separator: "\n")
                #expect(text.contains("webhook_deliveries_heads_on_endpoint_due_at"), "\(text)")
                // (SQLite's `SCAN due` is the check's own subquery, not a table.)
                let scans = plan.filter {
                    ($0.hasPrefix("SCAN") && $0 != "SCAN due") || $0.contains("Seq Scan") || $0.contains("TEMP B-TREE")
                }
                #expect(scans.isEmpty, "\(text)")
            }
            // A line's mark finds the line by the lines' index, not the queue by its status.
            let mark = try await Self.plan(.markHeadOfLine(endpoint: "dead", transactionID: "t-7"), test)
            let access = mark.first { $0.hasPrefix("SEARCH") || $0.hasPrefix("SCAN") || $0.contains("Scan") } ?? ""
            #expect(access.contains("webhook_deliveries_on_order"), "\(mark.joined(separator: "\n"))")
            #expect(!mark.contains { $0.hasPrefix("SCAN") || $0.contains("Seq Scan") }, "\(mark.joined(separator: "\n"))")

            let later = Self.now + 3601
            let leased = try await ledger.leaseWebhookDeliveries(endpoint: "dead", limit: 10, until: later + 60, now: later)
            #expect(leased.count == 10)
            #expect(leased.allSatisfy { $0.delivery.sequence == 1 }, "\(leased.map(\.delivery.sequence))")
        }
    }

    /// A parked delivery queued again comes before the one first in its line until then: that one
    /// waits (its lease is not taken from it) and goes once the older is received.
    @Test(arguments: LedgerEngine.allCases) func aDeliveryQueuedAgainGoesBeforeTheOneFirstInItsLine(_ engine: LedgerEngine) async throws {
        try await TestLedger.with(engine) { test in
            let ledger = test.ledger
            try await ServerCallQueueTests.deliver(ledger, "1", acknowledge: true)
            _ = try await ledger.fanOut(to: ["a"], limit: 100, now: Self.now)
            func lease(at time: Date) async throws -> [String] {
                try await ledger.leaseWebhookDeliveries(endpoint: "a", limit: 10, until: time + 5, now: time)
                    .map { "\($0.delivery.transactionID)#\($0.delivery.sequence)" }
            }
            let first = try #require(try await ledger.webhookDeliveries(WebhookDeliveryQuery(endpoint: "a")).last?.delivery.id)
            #expect(try await lease(at: Self.now) == ["1#1"])
            try await ledger.completeWebhookDelivery(first, .parked(error: "410", status: 410), lease: nil, now: Self.now)
            #expect(try await lease(at: Self.now + 10) == ["1#2"])
            #expect(try await ledger.redeliver(first, now: Self.now + 11))
            // 1#2's lease ran out at +15: it is due again, but 1#1 is queued before it.
            #expect(try await lease(at: Self.now + 20) == ["1#1"])
            try await ledger.completeWebhookDelivery(first, .sent(status: 200), lease: nil, now: Self.now + 21)
            #expect(try await lease(at: Self.now + 30) == ["1#2"])
        }
    }

    /// Parking what an instance no longer sends lets the rest of each line go: an instance still
    /// configured with that endpoint (a rolling change) leases the next.
    @Test(arguments: LedgerEngine.allCases) func parkingAbandonedDeliveriesLetsTheRestOfTheirLineGo(_ engine: LedgerEngine) async throws {
        try await TestLedger.with(engine) { test in
            let ledger = test.ledger
            try await ServerCallQueueTests.deliver(ledger, "1", acknowledge: false)
            #expect(try await ledger.fanOut(to: ["gone"], limit: 100, now: Self.now) == 2)
            _ = try await ledger.acknowledge("1", productID: "com.example.book", now: Self.now + 10)
            #expect(try await ledger.fanOut(to: ["gone"], limit: 100, now: Self.now + 10) == 1)
            #expect(try await ledger.parkAbandonedDeliveries(keeping: ["kept"], queuedBefore: Self.now + 5, now: Self.now + 6) == 2)
            let leased = try await ledger.leaseWebhookDeliveries(endpoint: "gone", limit: 10, until: Self.now + 80, now: Self.now + 20)
            #expect(leased.map { "\($0.delivery.transactionID)#\($0.delivery.sequence)" } == ["1#3"])
        }
    }

    /// A SQLite ledger of v11 with a queue (a line due, a line in backoff, a line whose first was
    /// sent): v13 marks each line's first queued delivery, and the queue leases in order.
    @Test func migratingASQLiteLedgerWithAQueueLeasesItInOrder() async throws {
        let folder = try TemporaryFolder()
        let path = folder.path + "/v11.sqlite"
        let queue = try DatabaseQueue(path: path)
        try SQLiteDatabase.migrator.migrate(queue, upTo: "v11: the event log's IDs without SQLite's AUTOINCREMENT counter")
        try await queue.write { db in
            for statement in Self.olderQueue(now: "'2027-01-15 08:00:00.000'", later: "'2027-01-15 09:00:00.000'") {
                try db.execute(sql: statement)
            }
        }
        try queue.close()
        let ledger = SQLiteLedger(database: try SQLiteDatabase(path: path))
        try await Self.expectTheOlderQueueLeasesInOrder(ledger)
    }

    /// The same on PostgreSQL: a v11 database with the queue, migrated by this build.
    @Test func migratingAPostgreSQLLedgerWithAQueueLeasesItInOrder() async throws {
        try await ScratchPostgres.withDatabase { address in
            try await ScratchPostgres.admin(
                address,
                """
                CREATE TABLE schema_migrations (
                  version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())
                """)
            for migration in LedgerSchema.migrations(.postgres) where migration.version <= 11 {
                for statement in migration.statements { try await ScratchPostgres.admin(address, statement) }
                try await ScratchPostgres.admin(address, "INSERT INTO schema_migrations (version, name) VALUES (\(migration.version), 'v')")
            }
            for statement in Self.olderQueue(now: "'2027-01-15 08:00:00+00'", later: "'2027-01-15 09:00:00+00'") {
                try await ScratchPostgres.admin(address, statement)
            }
            try await PostgresPool.migrate(address: address, logger: ScratchPostgres.quiet)
            try await PostgresPool(address: address, poolSize: 2, checkoutTimeout: .seconds(30), logger: ScratchPostgres.quiet).running {
                database in
                try await Self.expectTheOlderQueueLeasesInOrder(PostgresLedger(database: database))
            }
        }
    }

    /// The rows of an older ledger's queue: transaction `a` with three deliveries due, `b` with its
    /// first in backoff and a second behind it, `c` whose first was sent and whose second is due.
    static func olderQueue(now: String, later: String) -> [String] {
        let rows = [
            ("a", 1, "queued", now), ("a", 2, "queued", now), ("a", 3, "queued", now), ("b", 1, "queued", later),
            ("b", 2, "queued", now), ("c", 1, "sent", now), ("c", 2, "queued", now),
        ]
        return rows.enumerated().flatMap { index, row in
            let (transaction, sequence, status, due) = row
            return [
                """
                INSERT INTO ledger_events (id, event_id, type, transaction_id, sequence, body, created_at, fanned_out)
                VALUES (\(index + 1), 'e-\(index + 1)', 'purchase.verified', '\(transaction)', \(sequence), '{}', \(now), TRUE)
                """,
                """
                INSERT INTO webhook_deliveries (event, endpoint, transaction_id, sequence, status, due_at, created_at, updated_at)
                VALUES (\(index + 1), 'backend', '\(transaction)', \(sequence), '\(status)', \(due), \(now), \(now))
                """,
            ]
        }
    }

    /// The older queue, migrated: `a#1` and `c#2` first; then `a#2`; `b` once its backoff ends.
    static func expectTheOlderQueueLeasesInOrder(_ ledger: any Ledger) async throws {
        func lease(at time: Date) async throws -> [LeasedDelivery] {
            try await ledger.leaseWebhookDeliveries(endpoint: "backend", limit: 10, until: time + 5, now: time)
        }
        let names = { (leased: [LeasedDelivery]) in leased.map { "\($0.delivery.transactionID)#\($0.delivery.sequence)" }.sorted() }
        let first = try await lease(at: now)
        #expect(names(first) == ["a#1", "c#2"])
        for leased in first {
            try await ledger.completeWebhookDelivery(try #require(leased.delivery.id), .sent(status: 200), lease: nil, now: now)
        }
        #expect(names(try await lease(at: now + 10)) == ["a#2"])
        #expect(names(try await lease(at: now + 3601)) == ["a#2", "b#1"], "a#2's lease ran out")
    }
}
