import Foundation
import GRDB
import StockroomPostgresTestSupport
@testable import StockroomSQLite
import StockroomTestSupport
import Testing
@testable import StockroomCore

/// Set App Account Token through the queue of calls owed to Apple, on both engines: a purchase
/// that Apple's signed transaction shows without an account, bound to one by a claim, is queued
/// once, under its original transaction ID, in the write that binds it; nothing else queues it.
@Suite struct AppAccountTokenQueueTests {
    static let now = LedgerTests.now
    static let account = "3F1C0E4E-0000-4000-8000-00000000000A"

    /// A StoreKit 2 proof of `id` (of the purchase `original`), carrying `account` when given.
    static func signed(_ id: String, original: String? = nil, account: String? = nil, environment: StoreEnvironment = .sandbox)
        -> VerifiedProof
    {
        VerifiedProof(
            transactionID: id, originalTransactionID: original ?? id, productID: "com.example.book", bundleID: "com.example.app",
            environment: environment, expiresAt: nil, revokedAt: nil, appAccountToken: account, kind: .signedTransaction,
            proof: "jws-\(id)")
    }

    static func calls(_ ledger: any Ledger) async throws -> [ServerCall] {
        try await ledger.serverCalls(ServerCallListQuery(kind: .appAccountToken))
    }

    @Test(arguments: LedgerEngine.allCases) func aClaimThatBindsAnAccountAppleLacksQueuesOneCallPerPurchase(_ engine: LedgerEngine)
        async throws
    {
        try await TestLedger.with(engine, tellsAppleOfAccounts: true) { test in
            let ledger = test.ledger
            // A renewal's claim: its purchase is its original transaction, which Apple keys the call by.
            guard
                case .entitled(let row) = try await ledger.recordProof(
                    Self.signed("12", original: "10"), terms: LedgerTests.download(account: Self.account), now: Self.now)
            else { Issue.record("not entitled"); return }
            #expect(row.appAccountToken == Self.account.lowercased())
            let queued = try await Self.calls(ledger)
            #expect(queued.count == 1)
            let call = try #require(queued.first)
            #expect(call.transactionID == "10", "Apple's path names the original transaction")
            #expect(call.environment == .sandbox, "the purchase's environment decides the host")
            #expect(call.status == .queued && call.attempts == 0 && call.createdAt == Self.now && call.dueAt == Self.now)
            #expect(call.body == #"{"appAccountToken":"3f1c0e4e-0000-4000-8000-00000000000a"}"#)

            // The same claim again, another transaction of the purchase, and the original itself: still one call.
            _ = try await ledger.recordProof(
                Self.signed("12", original: "10"), terms: LedgerTests.download(account: Self.account), now: Self.now)
            _ = try await ledger.recordProof(
                Self.signed("11", original: "10"), terms: LedgerTests.download(account: Self.account), now: Self.now)
            _ = try await ledger.recordProof(Self.signed("10"), terms: LedgerTests.download(account: Self.account), now: Self.now)
            #expect(try await Self.calls(ledger).count == 1)
            // Another purchase bound the same way is its own call.
            _ = try await ledger.recordProof(Self.signed("20"), terms: LedgerTests.download(account: Self.account), now: Self.now)
            #expect(try await Self.calls(ledger).map(\.transactionID).sorted() == ["10", "20"])
        }
    }

    @Test(arguments: LedgerEngine.allCases) func noCallIsQueuedUnlessThisWriteBindsAnAccountAppleLacks(_ engine: LedgerEngine)
        async throws
    {
        try await TestLedger.with(engine, tellsAppleOfAccounts: true) { test in
            let ledger = test.ledger
            let download = LedgerTests.download(account: Self.account)
            // Apple's transaction carries the account already.
            _ = try await ledger.recordProof(Self.signed("1", account: Self.account), terms: download, now: Self.now)
            // The request names no account: nothing is bound.
            _ = try await ledger.recordProof(Self.signed("2"), terms: LedgerTests.download(), now: Self.now)
            // An operator's re-verification binds nothing.
            _ = try await ledger.recordProof(Self.signed("3"), terms: .reverification, now: Self.now)
            // A receipt says nothing of Apple's token: telling Apple could overwrite one it holds.
            guard case .entitled(let receiptRow) = try await ledger.recordProof(LedgerTests.proof("4"), terms: download, now: Self.now)
            else { Issue.record("not entitled"); return }
            #expect(receiptRow.appAccountToken != nil, "the ledger binds it all the same")
            // A claim the ledger refuses writes nothing, the call neither.
            let refused = try await ledger.recordProof(
                Self.signed("5"), terms: LedgerTests.download("com.example.other", account: Self.account), now: Self.now)
            #expect(refused == .refused(.rejected(.productMismatch(transactionID: "5", productID: "com.example.other"))))
            #expect(try await ledger.fulfilment("5") == nil)
            // A purchase bound before (by an earlier claim) is not bound again by a later one.
            _ = try await ledger.recordProof(Self.signed("6"), terms: LedgerTests.download(), now: Self.now)
            #expect(try await Self.calls(ledger).isEmpty)
            _ = try await ledger.recordProof(Self.signed("6"), terms: download, now: Self.now)
            #expect(try await Self.calls(ledger).map(\.transactionID) == ["6"], "the first binding of 6 is this one")
            _ = try await ledger.recordProof(
                Self.signed("6"), terms: LedgerTests.download(account: "3F1C0E4E-0000-4000-8000-00000000000B"), now: Self.now)
            #expect(try await Self.calls(ledger).count == 1, "another account's claim is refused, and queues nothing")
        }
    }

    @Test(arguments: LedgerEngine.allCases) func withoutServerAPICredentialsNothingIsQueued(_ engine: LedgerEngine) async throws {
        try await TestLedger.with(engine) { test in
            guard
                case .entitled(let row) = try await test.ledger.recordProof(
                    Self.signed("1"), terms: LedgerTests.download(account: Self.account), now: Self.now)
            else { Issue.record("not entitled"); return }
            #expect(row.appAccountToken == Self.account.lowercased())
            #expect(try await test.ledger.serverCalls(ServerCallListQuery()).isEmpty)
        }
    }

    @Test(arguments: LedgerEngine.allCases) func aSentTokenSettlesWithItsBodyAndWritesNoEvent(_ engine: LedgerEngine) async throws {
        try await TestLedger.with(engine, tellsAppleOfAccounts: true) { test in
            let ledger = test.ledger
            _ = try await ledger.recordProof(Self.signed("1"), terms: LedgerTests.download(account: Self.account), now: Self.now)
            let events = try await ledger.events(of: "1", limit: 100)
            let leased = try await ledger.leaseServerCalls(limit: 10, until: Self.now.addingTimeInterval(60), now: Self.now)
            let call = try #require(leased.first)
            #expect(leased.count == 1 && call.kind == .appAccountToken)
            try await ledger.completeServerCall(
                try #require(call.id), .retry(error: "HTTP 503 from the App Store Server API", retryAt: Self.now.addingTimeInterval(2)),
                now: Self.now)
            #expect(try await Self.calls(ledger).first?.lastError == "HTTP 503 from the App Store Server API")
            #expect(try await Self.calls(ledger).first?.body == call.body, "a retry keeps the token to send")
            let later = Self.now.addingTimeInterval(3)
            let again = try await ledger.leaseServerCalls(limit: 10, until: later.addingTimeInterval(60), now: later)
            try await ledger.completeServerCall(try #require(again.first?.id), .sent(body: call.body), now: later)
            let sent = try #require(try await Self.calls(ledger).first)
            #expect(sent.status == .sent && sent.sentAt == later && sent.attempts == 1 && sent.body == call.body)
            #expect(try await ledger.events(of: "1", limit: 100) == events, "Stockroom's own binding was reported when it was made")
            #expect(try await ledger.fulfilment("1")?.finishedAt == nil)
        }
    }

    /// v9 widens the CHECK on `server_calls.kind`: the new kind is taken, an unknown one still refused.
    @Test(arguments: LedgerEngine.allCases) func theSchemaTakesTheNewKindAndStillRefusesAnUnknownOne(_ engine: LedgerEngine) async throws {
        try await TestLedger.with(engine) { test in
            let runner = try #require(test.ledger as? any LedgerStatementRunner)
            let insert = { (kind: String, id: String) in
                LedgerStatement(
                    """
                    INSERT INTO server_calls (kind, transaction_id, environment, status, attempts, due_at, created_at, updated_at)
                    VALUES (?1, ?2, 'Sandbox', 'queued', 0, ?3, ?3, ?3)
                    """, [kind, id, Self.now])
            }
            try await runner.execute(insert("appAccountToken", "1"))
            let refused = await #expect(throws: (any Error).self) { try await runner.execute(insert("bogus", "2")) }
            #expect(refused.map(TestLedger.isConstraintViolation) == true)
            #expect(try await Self.calls(test.ledger).map(\.transactionID) == ["1"])
        }
    }

    /// A SQLite ledger of v8 with calls queued and sent: v9 rebuilds the table with the rows, their
    /// IDs and the next ID after them, and the index the sender's lease reads.
    @Test func migratingASQLiteLedgerKeepsEveryCallAndItsID() async throws {
        let folder = try TemporaryFolder()
        let path = folder.path + "/v8.sqlite"
        let queue = try DatabaseQueue(path: path)
        try SQLiteDatabase.migrator.migrate(queue, upTo: "v8: the event log, and its deliveries to webhook endpoints")
        try await queue.write { db in
            for (id, kind, status) in [(3, "finish", "sent"), (7, "consumption", "queued")] {
                try db.execute(
                    sql: """
                        INSERT INTO server_calls (id, kind, transaction_id, environment, status, attempts, due_at, body, requested_by,
                          created_at, updated_at) VALUES (?, ?, ?, 'Production', ?, 2, ?, 'b', 'u', ?, ?)
                        """,
                    arguments: [id, kind, "t\(id)", status, Self.now, Self.now, Self.now])
            }
        }
        try queue.close()
        let ledger = SQLiteLedger(database: try SQLiteDatabase(path: path), tellsAppleOfAccounts: true)
        let kept = try await ledger.serverCalls(ServerCallListQuery())
        #expect(kept.map(\.id) == [7, 3])
        #expect(kept.map(\.kind) == [.consumption, .finish])
        #expect(kept.allSatisfy { $0.attempts == 2 && $0.body == "b" && $0.requestedBy == "u" && $0.dueAt == Self.now })
        _ = try await ledger.recordProof(Self.signed("1"), terms: LedgerTests.download(account: Self.account), now: Self.now)
        #expect(try await Self.calls(ledger).map(\.id) == [8], "IDs continue after the highest copied")
        let indexes = try await ledger.database.writer.read { db in
            try String.fetchAll(
                db, sql: "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'server_calls' AND sql IS NOT NULL")
        }
        #expect(indexes == ["server_calls_on_status_due_at"])
    }

    @Test func theSettlementOfASentTokenIsTheCallAlone() {
        let call = ServerCall.appAccountToken(Self.account, originalTransactionID: "1", environment: .production, now: Self.now)
        let row = Fulfilment(
            transactionID: "1", originalTransactionID: "1", productID: "p", bundleID: "b", environment: .production,
            proofKind: .signedTransaction, proof: "jws", proofDigest: nil, appAccountToken: Self.account, expiresAt: nil, state: .verified,
            verifiedAt: Self.now, attempts: 1, bytesDelivered: 0, lastError: nil, createdAt: Self.now, updatedAt: Self.now,
            deliveredAt: nil, acknowledgedAt: nil, revokedAt: nil, revokedByOperatorAt: nil, revokedByRefundAt: nil)
        var sent = call
        sent.apply(.sent(body: call.body), now: Self.now)
        #expect(call.settlement(.sent(body: call.body), row: row, now: Self.now) == [.settle(sent)])
        #expect(UpdateAppAccountTokenRequest(json: call.body)?.appAccountToken == Self.account.lowercased())
    }
}
