import Foundation
import StockroomCore
import StockroomPostgres
import StockroomPostgresTestSupport
import StockroomSQLite
import StockroomTestSupport
import Testing

/// The ledger's reads, written once (`LedgerReads`) and run by both engines: they filter, order,
/// bound and count alike, read every value back as written, and read what belongs together in
/// one read.
@Suite struct LedgerReadsTests {
    static func row(_ id: String, productID: String = "com.example.book", lastError: String? = nil, createdAt: Date) -> Fulfilment {
        Fulfilment(
            transactionID: id, originalTransactionID: id, productID: productID, bundleID: "com.example.app", environment: .sandbox,
            proofKind: .receipt, proof: "p\(id)", proofDigest: nil, appAccountToken: nil, expiresAt: nil, state: .delivered,
            verifiedAt: createdAt,
            attempts: 0, bytesDelivered: 10, lastError: lastError, createdAt: createdAt, updatedAt: createdAt, deliveredAt: nil,
            acknowledgedAt: nil, revokedAt: nil, revokedByOperatorAt: nil, revokedByRefundAt: nil)
    }

    /// IDs list in one order on both engines whatever the database's collation: a PostgreSQL
    /// database under `en-US` (the usual production locale, which sorts `a` before `B`) lists
    /// the console's page, the product tallies, a purchase's notifications and an export as
    /// SQLite does, in byte order.
    @Test func idsSortInByteOrderOnAPostgreSQLDatabaseWithALocaleCollation() async throws {
        let at = Date(timeIntervalSince1970: 1_800_000_000)
        let ids = ["b", "A", "a", "B"]
        @Sendable func fill(_ runner: any LedgerStatementRunner) async throws {
            for id in ids {
                // One creation time, so that the page's order falls to the IDs; tallies tie on counts.
                try await runner.execute(.insert(Self.row(id, productID: "com.example.\(id)", createdAt: at)))
                let notification = NotificationRecord(
                    uuid: "\(id)-0000", type: "REFUND", subtype: nil, transactionID: "b", originalTransactionID: "b", signedPayload: "x",
                    outcome: "applied", receivedAt: at)
                _ = try await runner.execute(.insert(notification))
            }
        }
        @Sendable func orders(_ ledger: any Ledger) async throws -> [[String]] {
            [
                try await ledger.fulfilmentPage(FulfilmentPageQuery(pageSize: 10)).rows.map(\.transactionID),
                try await ledger.productTallies(limit: 10).top.map(\.productID),
                try await ledger.notifications(transactionID: "b", originalTransactionID: "b", limit: 10).map(\.uuid),
            ]
        }
        let sqlite = try await TestLedger.with(.sqlite) { test in
            try await fill(try #require(test.ledger as? any LedgerStatementRunner))
            return try await orders(test.ledger)
        }
        #expect(sqlite[0] == ["b", "a", "B", "A"], "byte order, descending")
        #expect(sqlite[1] == ["com.example.A", "com.example.B", "com.example.a", "com.example.b"])
        #expect(sqlite[2] == ["A-0000", "B-0000", "a-0000", "b-0000"])
        let (postgres, exported) = try await ScratchPostgres.withLedger(collation: "en-US") { ledger in
            try await fill(ledger)
            // The database does sort by its locale: without the byte order, "a" comes before "B".
            let byLocale = try await ledger.database.client.query("SELECT product_id FROM fulfilments ORDER BY product_id").collect()
            #expect(
                try byLocale.map { try $0.decode(String.self) } == ["com.example.a", "com.example.A", "com.example.b", "com.example.B"])
            return (try await orders(ledger), try await ledger.archive().fulfilments.map(\.transactionID))
        }
        #expect(postgres == sqlite)
        #expect(exported == ["A", "B", "a", "b"], "an export lists its rows in byte order too")
    }

    /// The views' filters, order and bounds read alike on both engines (one SQL text each): a
    /// negative limit lists nothing (SQLite read it as no limit at all while each engine wrote
    /// its own reads), an empty set of states matches no row, and a page counts every match.
    @Test(arguments: LedgerEngine.allCases) func theViewsFilterOrderAndBoundAlikeOnBothEngines(_ engine: LedgerEngine) async throws {
        try await TestLedger.with(engine) { (test: TestLedger) async throws in
            let runner = try #require(test.ledger as? any LedgerStatementRunner)
            let at = { (seconds: Double) in Date(timeIntervalSince1970: 1_800_000_000 + seconds) }
            for (index, state) in [FulfilmentState.verified, .delivered, .acknowledged, .delivered].enumerated() {
                try await runner.execute(
                    .insert(
                        Fulfilment(
                            transactionID: "\(index)", originalTransactionID: "\(index)",
                            productID: index == 3 ? "com.example.other" : "com.example.book",
                            bundleID: "com.example.app", environment: .sandbox, proofKind: .receipt, proof: "p\(index)", proofDigest: nil,
                            appAccountToken: nil, expiresAt: nil, state: state, verifiedAt: at(0), attempts: index,
                            bytesDelivered: Int64(index) * 10,
                            lastError: nil, createdAt: at(Double(index)), updatedAt: at(Double(10 - index)), deliveredAt: nil,
                            acknowledgedAt: nil,
                            revokedAt: nil, revokedByOperatorAt: nil, revokedByRefundAt: nil)))
            }
            let ids = { (rows: [Fulfilment]) in rows.map(\.transactionID) }
            #expect(ids(try await test.ledger.list(FulfilmentListQuery())) == ["0", "1", "2", "3"], "last changed first")
            #expect(ids(try await test.ledger.list(FulfilmentListQuery(states: [.delivered, .acknowledged]))) == ["1", "2", "3"])
            #expect(ids(try await test.ledger.list(FulfilmentListQuery(states: []))) == [])
            #expect(ids(try await test.ledger.list(FulfilmentListQuery(productID: "com.example.other"))) == ["3"])
            #expect(ids(try await test.ledger.list(FulfilmentListQuery(since: at(8)))) == ["0", "1", "2"])
            #expect(ids(try await test.ledger.list(FulfilmentListQuery(limit: 2))) == ["0", "1"])
            #expect(ids(try await test.ledger.list(FulfilmentListQuery(limit: -1))) == [])
            #expect(try await test.ledger.stateCounts() == [.verified: 1, .delivered: 2, .acknowledged: 1])
            let insights = test.ledger
            let page = try await insights.fulfilmentPage(FulfilmentPageQuery(state: .delivered, page: 2, pageSize: 1))
            #expect(ids(page.rows) == ["1"], "newest created first: 3, then 1")
            #expect(page.total == 2)
            let pastTheLast = try await insights.fulfilmentPage(FulfilmentPageQuery(state: .delivered, page: 5, pageSize: 1))
            #expect(pastTheLast == FulfilmentPage(rows: [], total: 2))
            #expect(try await insights.fulfilmentPage(FulfilmentPageQuery(state: .revoked)) == FulfilmentPage(rows: [], total: 0))
            let tallies = try await insights.productTallies(limit: 1)
            #expect(
                tallies
                    == ProductTallies(
                        top: [ProductTally(productID: "com.example.book", fulfilments: 3, bytesDelivered: 30)], fulfilments: 4,
                        bytesDelivered: 60))
            #expect(try await insights.productTallies(limit: 0) == ProductTallies(top: [], fulfilments: 4, bytesDelivered: 60))
            let draft = PendingProofDraft(
                transactionID: "9", digest: "d9", kind: .receipt, proof: "p9", requestedProductID: "com.example.book", appAccountToken: nil,
                error: "x")
            #expect(try await test.ledger.keepPendingProof(draft, now: at(0)))
            #expect(try await test.ledger.pendingProofs(status: nil, limit: 5).count == 1)
            #expect(try await test.ledger.pendingProofs(status: nil, limit: -1) == [])
            #expect(try await test.ledger.leasePendingProofs(limit: -1, until: at(60), now: at(0)) == [])
        }
    }

    /// A console page and its total, and the top products and the ledger's totals, while every
    /// row changes state and product: each pair is read in one statement, so they always agree.
    /// (Read as two statements, SQLite disagreed in 18 rounds of 300 and PostgreSQL in 33.)
    @Test(arguments: LedgerEngine.allCases) func aPageAndItsTotalAgreeWhileRowsChange(_ engine: LedgerEngine) async throws {
        try await TestLedger.with(engine) { (test: TestLedger) async throws in
            let runner = try #require(test.ledger as? any LedgerStatementRunner)
            let insights = test.ledger
            for index in 0..<40 {
                try await runner.execute(
                    .insert(Self.row("t\(index)", createdAt: Date(timeIntervalSince1970: 1_800_000_000 + Double(index)))))
            }
            let disagreements = try await withThrowingTaskGroup(of: Int.self) { group in
                group.addTask {
                    for round in 0..<300 {
                        let (state, product) = round % 2 == 0 ? ("acknowledged", "com.example.other") : ("delivered", "com.example.book")
                        try await test.execute(
                            "UPDATE fulfilments SET state = '\(state)', product_id = '\(product)', bytes_delivered = \(round)")
                    }
                    return 0
                }
                group.addTask {
                    var disagreements = 0
                    for _ in 0..<300 {
                        let page = try await insights.fulfilmentPage(FulfilmentPageQuery(state: .delivered, pageSize: 100))
                        if page.rows.count != page.total { disagreements += 1 }
                        let tallies = try await insights.productTallies(limit: 5)
                        if tallies.top.map(\.bytesDelivered).reduce(0, +) != tallies.bytesDelivered { disagreements += 1 }
                        if tallies.top.map(\.fulfilments).reduce(0, +) != tallies.fulfilments { disagreements += 1 }
                    }
                    return disagreements
                }
                return try await group.reduce(0, +)
            }
            #expect(disagreements == 0)
        }
    }

    /// PostgreSQL numbers a statement's parameters by swapping each `?` a digit follows: a `?` in
    /// a literal is text on both engines.
    @Test(arguments: LedgerEngine.allCases) func aQuestionMarkInALiteralIsNoParameter(_ engine: LedgerEngine) async throws {
        try await TestLedger.with(engine) { (test: TestLedger) async throws in
            let runner = try #require(test.ledger as? any LedgerStatementRunner)
            try await runner.execute(.insert(Self.row("1", lastError: "why?", createdAt: Date(timeIntervalSince1970: 1_800_000_000))))
            let found = try await runner.fetch(
                LedgerStatement("SELECT * FROM fulfilments WHERE last_error = 'why?' AND transaction_id = ?1", ["1"]), as: Fulfilment.self)
            #expect(found.map(\.transactionID) == ["1"])
        }
    }

    /// PostgreSQL keeps microseconds: a time is read from its exact count of them, so one read,
    /// written back and read again is unchanged, however often (and so is the export's JSON).
    @Test func aTimeReadAndWrittenBackOnPostgreSQLIsUnchanged() async throws {
        try await TestLedger.with(.postgres) { (test: TestLedger) async throws in
            let runner = try #require(test.ledger as? any LedgerStatementRunner)
            var times: [String: Date] = [:]
            for index in 0..<100 {
                let id = String(format: "%03d", index)
                times[id] = Date(timeIntervalSince1970: Double(Int64.random(in: 0..<4_102_444_800_000_000)) / 1_000_000)
                try await runner.execute(.insert(Self.row(id, createdAt: times[id]!)))
            }
            for (id, time) in times {
                var read = try #require(try await test.ledger.fulfilment(id))
                #expect(read.createdAt == time)
                for _ in 0..<3 {
                    try await runner.execute(.update(read))
                    read = try #require(try await test.ledger.fulfilment(id))
                }
                #expect(read.createdAt == time, "\(id)")
            }
        }
    }

    /// A record read from a row that lacks one of its columns is refused on both engines, naming
    /// the column, whether the field may be nil or not; so is a value the field cannot hold.
    @Test(arguments: LedgerEngine.allCases) func aMissingColumnOrAnUnreadableValueIsRefusedByName(_ engine: LedgerEngine) async throws {
        try await TestLedger.with(engine) { (test: TestLedger) async throws in
            let runner = try #require(test.ledger as? any LedgerStatementRunner)
            try await runner.execute(.insert(Self.row("1", createdAt: Date(timeIntervalSince1970: 1_800_000_000))))
            let lacking = LedgerStatement("SELECT transaction_id, original_transaction_id, product_id, bundle_id FROM fulfilments", [])
            await #expect(throws: LedgerRowError(column: "environment", missing: true)) {
                try await runner.fetch(lacking, as: Fulfilment.self)
            }
            let unknown = LedgerStatement("SELECT 'refunded' AS state, 1 AS count", [])
            await #expect(throws: LedgerRowError(column: "state")) {
                _ = try await runner.fetch(unknown, as: Probe.self)
            }
        }
    }

    /// The counts a pending proof is admitted on come back as exactly one row; none (or two) is
    /// refused, never read as nothing kept, which would let every proof past the bounds.
    @Test func aPendingProofIsAdmittedOnlyOnOneRowOfCounts() throws {
        let draft = PendingProofDraft(
            transactionID: "1", digest: "d", kind: .receipt, proof: "p", requestedProductID: "com.example.book", appAccountToken: nil,
            error: "x")
        let bounds = PendingProofBounds()
        let full = PendingProofCounts(transaction: PendingProof.perTransaction, client: 0, total: 0)
        #expect(try bounds.admit(draft, counted: [full]) == .transactionFull)
        #expect(try bounds.admit(draft, counted: [PendingProofCounts(transaction: 0, client: 0, total: 0)]) == .kept)
        #expect(throws: LedgerRowError(column: "total", missing: true)) { try bounds.admit(draft, counted: []) }
        #expect(throws: LedgerRowError(column: "total", missing: true)) { try bounds.admit(draft, counted: [full, full]) }
    }

    /// A state read as this build's `FulfilmentState`.
    struct Probe: LedgerRecord {
        var state: FulfilmentState
        init(row: some LedgerCells) throws { state = try row["state"] }
    }
}
