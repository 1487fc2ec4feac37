import Foundation
import StockroomPostgresTestSupport
import StockroomTestSupport
import Testing
@testable import StockroomCore

/// The queue of calls owed to the App Store Server API, on both engines: a finish is queued in
/// the write that makes it due and only then, once per transaction; a consumption answer once per
/// transaction and only with consent; concurrent senders lease disjoint calls; results settle them.
@Suite struct ServerCallQueueTests {
    static let now = LedgerTests.now

    /// Claims, delivers and (optionally) acknowledges transaction `id`.
    static func deliver(_ ledger: any Ledger, _ id: String, acknowledge: Bool, consent: Bool? = nil) async throws {
        var terms = LedgerTests.download()
        terms.customerConsented = consent
        guard case .entitled = try await ledger.recordProof(LedgerTests.proof(id), terms: terms, now: now) else {
            Issue.record("not entitled")
            return
        }
        try await ledger.recordDelivery(
            id, report: DeliveryReport(range: 0...99, bytesSent: 100, complete: true), fileSize: 100, now: Date())
        if acknowledge { _ = try await ledger.acknowledge(id, productID: "com.example.book", now: now) }
    }

    @Test(arguments: LedgerEngine.allCases) func aFinishIsQueuedOnAcknowledgementOnceAndNotBefore(_ engine: LedgerEngine) async throws {
        try await TestLedger.with(engine, finishOn: .acknowledged) { test in
            try await Self.deliver(test.ledger, "1", acknowledge: false)
            #expect(try await test.ledger.serverCalls(ServerCallListQuery()).isEmpty)
            _ = try await test.ledger.acknowledge("1", productID: "com.example.book", now: Self.now)
            _ = try await test.ledger.acknowledge("1", productID: "com.example.book", now: Self.now)
            let calls = try await test.ledger.serverCalls(ServerCallListQuery())
            #expect(calls.map(\.kind) == [.finish])
            #expect(calls.first?.environment == .production)
            #expect(try await test.ledger.list(FulfilmentListQuery(unfinished: true)).map(\.transactionID) == ["1"])
        }
    }

    @Test(arguments: LedgerEngine.allCases) func withoutATriggerNothingIsQueued(_ engine: LedgerEngine) async throws {
        try await TestLedger.with(engine) { test in
            try await Self.deliver(test.ledger, "1", acknowledge: true)
            #expect(try await test.ledger.serverCalls(ServerCallListQuery()).isEmpty)
        }
    }

    @Test(arguments: LedgerEngine.allCases) func aSentFinishStampsTheTransactionAndLeavesTheQueue(_ engine: LedgerEngine) async throws {
        try await TestLedger.with(engine, finishOn: .delivered) { test in
            try await Self.deliver(test.ledger, "1", acknowledge: true)
            let leased = try await test.ledger.leaseServerCalls(limit: 10, until: Self.now.addingTimeInterval(60), now: Self.now)
            let id = try #require(leased.first?.id)
            #expect(leased.count == 1)
            // Held: not leased again until its time runs out.
            #expect(try await test.ledger.leaseServerCalls(limit: 10, until: Self.now.addingTimeInterval(60), now: Self.now).isEmpty)
            try await test.ledger.completeServerCall(id, .retry(error: "HTTP 503", retryAt: Self.now.addingTimeInterval(30)), now: Self.now)
            #expect(try await test.ledger.leaseServerCalls(limit: 10, until: Self.now.addingTimeInterval(60), now: Self.now).isEmpty)
            let later = Self.now.addingTimeInterval(31)
            let again = try await test.ledger.leaseServerCalls(limit: 10, until: later.addingTimeInterval(60), now: later)
            #expect(again.first?.attempts == 1)
            #expect(again.first?.lastError == "HTTP 503")
            try await test.ledger.completeServerCall(id, .sent(body: nil), now: later)
            #expect(try await test.ledger.fulfilment("1")?.finishedAt != nil)
            #expect(try await test.ledger.list(FulfilmentListQuery(unfinished: true)).isEmpty)
            // A settled call stays settled.
            try await test.ledger.completeServerCall(id, .retry(error: "late", retryAt: later), now: later)
            #expect(try await test.ledger.serverCalls(ServerCallListQuery()).first?.status == .sent)
        }
    }

    @Test(arguments: LedgerEngine.allCases) func concurrentSendersLeaseDisjointCalls(_ engine: LedgerEngine) async throws {
        try await TestLedger.with(engine, finishOn: .delivered) { test in
            for index in 0..<24 { try await Self.deliver(test.ledger, "t\(index)", acknowledge: false) }
            let ledger = test.ledger
            let until = Self.now.addingTimeInterval(60)
            let leases = try await withThrowingTaskGroup(of: [Int64].self) { group in
                for _ in 0..<6 {
                    group.addTask { try await ledger.leaseServerCalls(limit: 5, until: until, now: Self.now).compactMap(\.id) }
                }
                return try await group.reduce(into: [[Int64]]()) { $0.append($1) }
            }
            let taken = leases.flatMap { $0 }
            #expect(taken.count == 24 && Set(taken).count == 24)
        }
    }

    @Test(arguments: LedgerEngine.allCases) func aConsumptionAnswerIsQueuedOncePerTransactionAndOnlyWithConsent(_ engine: LedgerEngine)
        async throws
    {
        try await TestLedger.with(engine) { test in
            try await Self.deliver(test.ledger, "yes", acknowledge: true, consent: true)
            try await Self.deliver(test.ledger, "no", acknowledge: true)
            #expect(
                try await test.ledger.queueConsumptionAnswer("yes", environment: .production, requestedBy: "u1", now: Self.now) == .queued)
            #expect(
                try await test.ledger.queueConsumptionAnswer("yes", environment: .production, requestedBy: "u2", now: Self.now)
                    == .alreadyAnswered)
            #expect(
                try await test.ledger.queueConsumptionAnswer("no", environment: .production, requestedBy: "u3", now: Self.now)
                    == .skippedNoConsent)
            #expect(
                try await test.ledger.queueConsumptionAnswer("no", environment: .production, requestedBy: "u4", now: Self.now)
                    == .alreadyAnswered)
            #expect(
                try await test.ledger.queueConsumptionAnswer("unknown", environment: .sandbox, requestedBy: "u5", now: Self.now)
                    == .skippedNoConsent)
            let calls = try await test.ledger.serverCalls(ServerCallListQuery(kind: .consumption))
            #expect(calls.count == 3)
            // Only the consented one is ever leased.
            let leased = try await test.ledger.leaseServerCalls(limit: 10, until: Self.now.addingTimeInterval(60), now: Self.now)
            #expect(leased.map(\.transactionID) == ["yes"])
            #expect(leased.first?.requestedBy == "u1")
        }
    }

    /// A queued call this build cannot read (an environment a newer instance wrote) once made every
    /// lease throw, on every poll, for good: now the rest are leased and sent, and that one stays
    /// queued for an instance that can read it, set aside for an hour with its reason.
    @Test(arguments: LedgerEngine.allCases) func aCallThisBuildCannotReadIsSetAsideAndTheRestFlow(_ engine: LedgerEngine) async throws {
        try await TestLedger.with(engine, finishOn: .acknowledged) { test in
            let runner = try #require(test.ledger as? any LedgerStatementRunner)
            try await runner.execute(
                LedgerStatement(
                    """
                    INSERT INTO server_calls (kind, transaction_id, environment, status, attempts, due_at, created_at, updated_at)
                    VALUES ('finish', '99', 'Martian', 'queued', 0, ?1, ?1, ?1)
                    """, [Self.now.addingTimeInterval(-10)]))
            try await Self.deliver(test.ledger, "1", acknowledge: true)
            let leased = try await test.ledger.leaseServerCalls(limit: 10, until: Self.now.addingTimeInterval(60), now: Self.now)
            #expect(leased.map(\.transactionID) == ["1"], "the readable call is leased past the unreadable one")
            try await test.ledger.completeServerCall(try #require(leased.first?.id), .sent(body: nil), now: Self.now)
            #expect(try await test.ledger.fulfilment("1")?.finishedAt == Self.now)

            // Set aside, still queued, with its reason; not leased again within the hour, nor thrown.
            struct Call: LedgerRecord {
                var status: String
                var lastError: String?
                init(row: some LedgerCells) throws { (status, lastError) = (try row["status"], try row["last_error"]) }
            }
            let aside = try await runner.fetch(
                LedgerStatement("SELECT status, last_error FROM server_calls WHERE transaction_id = '99'", []), as: Call.self)
            #expect(aside.first?.status == "queued")
            #expect(aside.first?.lastError?.contains("environment") == true, "\(String(describing: aside.first?.lastError))")
            let later = Self.now.addingTimeInterval(1800)
            #expect(try await test.ledger.leaseServerCalls(limit: 10, until: later.addingTimeInterval(60), now: later).isEmpty)
            let afterTheRest = Self.now.addingTimeInterval(3700)
            #expect(
                try await test.ledger.leaseServerCalls(limit: 10, until: afterTheRest.addingTimeInterval(60), now: afterTheRest).isEmpty)
        }
    }

    @Test(arguments: LedgerEngine.allCases) func consentIsKeptOnlyOnAnEntitledTransaction(_ engine: LedgerEngine) async throws {
        try await TestLedger.with(engine) { test in
            try await Self.deliver(test.ledger, "1", acknowledge: false, consent: true)
            #expect(try await test.ledger.fulfilment("1")?.customerConsented == true)
            try await test.ledger.recordConsent("1", consented: false, now: Self.now)
            #expect(try await test.ledger.fulfilment("1")?.customerConsented == false)
            _ = try await test.ledger.revoke(
                RevokedPurchase(transactionID: "1", originalTransactionID: "1", productID: nil, bundleID: nil, environment: nil),
                cause: .operatorAction, reason: "test", now: Self.now)
            try await test.ledger.recordConsent("1", consented: true, now: Self.now)
            #expect(try await test.ledger.fulfilment("1")?.customerConsented == false)
        }
    }

    @Test func backoffDoublesToAnHourAndHonoursALongerRetryAfter() {
        #expect(ServerCall.backoff(afterAttempts: 1, retryAfter: nil) == .seconds(2))
        #expect(ServerCall.backoff(afterAttempts: 3, retryAfter: nil) == .seconds(8))
        #expect(ServerCall.backoff(afterAttempts: 40, retryAfter: nil) == .seconds(3600))
        #expect(ServerCall.backoff(afterAttempts: 1, retryAfter: .seconds(30)) == .seconds(30))
        #expect(ServerCall.backoff(afterAttempts: 1, retryAfter: .seconds(1_000_000)) == .seconds(3600))
        #expect(ServerCall.backoff(afterAttempts: -5, retryAfter: nil) == .seconds(2))
    }
}
