import Foundation
import GRDB
import StockroomPostgresTestSupport
@testable import StockroomSQLite
import StockroomTestSupport
import Testing
@testable import StockroomCore

/// The event log and its webhook deliveries, on both engines: an event is written with the change
/// it reports and never without it, numbered in its transaction's sequence; a fan-out queues each
/// event once per endpoint; a lease hands out a transaction's events in order, one sender at a time.
@Suite struct EventOutboxTests {
    static let now = LedgerTests.now

    static func types(_ ledger: any Ledger, _ id: String) async throws -> [String] {
        try await ledger.events(of: id, limit: 100).map(\.type.rawValue)
    }

    /// An event's body, written directly, is what `JSONEncoder` (sorted keys, slashes as they are)
    /// writes, byte for byte, whatever the strings hold; and its time is `ISO8601Format()`'s.
    @Test func anEventBodyIsWhatJSONEncoderWrites() throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let awkward = ["plain", "quote \" back \\ slash / é 漢 🎉", "\u{0}\u{1}\u{8}\u{9}\u{A}\u{C}\u{D}\u{1F}\u{7F}", "", "\u{2028}"]
        for (index, text) in awkward.enumerated() {
            let body = LedgerEvent.Body(
                id: "e-\(index)", type: "purchase.revoked", createdAt: "2026-11-27T05:00:00Z", sequence: index + 1, transactionId: text,
                originalTransactionId: "o", productId: text, bundleId: "b", environment: index % 2 == 0 ? "Production" : nil,
                appAccountToken: index % 3 == 0 ? nil : "5a3b6c1e-0f4d-4b8a-9c2e-7d1f0a2b3c4d", state: "revoked",
                detail: index == 1 ? text : nil)
            #expect(body.json == String(decoding: try encoder.encode(body), as: UTF8.self), "\(text.debugDescription)")
            #expect(try JSONDecoder().decode(LedgerEvent.Body.self, from: Data(body.json.utf8)) == body)
        }
        for seconds in [0.0, 1_800_000_000.75, 4_102_444_799, -86_400 * 365.0] {
            let date = Date(timeIntervalSince1970: seconds)
            #expect(RFC3339.utc(date) == date.ISO8601Format())
        }
    }

    @Test(arguments: LedgerEngine.allCases) func anEventIsWrittenWithItsChangeAndNeverWithoutIt(_ engine: LedgerEngine) async throws {
        try await TestLedger.with(engine, finishOn: .acknowledged) { test in
            try await ServerCallQueueTests.deliver(test.ledger, "1", acknowledge: true)
            #expect(try await Self.types(test.ledger, "1") == ["purchase.verified", "purchase.delivered", "purchase.acknowledged"])
            #expect(try await test.ledger.fulfilment("1")?.eventSequence == 3)

            // A decision that throws after changing the row writes neither the row nor an event.
            struct Refused: Error {}
            await #expect(throws: Refused.self) {
                try await test.ledger.decide(.transaction("1")) { work in
                    var row = try #require(work["1"])
                    try EntitlementRules.move(&row, to: .revoked, at: Self.now)
                    row.revokedByOperatorAt = Self.now
                    work.update(row)
                    _ = work.writes
                    throw Refused()
                }
            }
            #expect(try await test.ledger.fulfilment("1")?.state == .acknowledged)
            #expect(try await test.ledger.events(of: "1", limit: 100).count == 3)

            // A settled finish is an event of the same transaction, next in its sequence.
            let call = try #require(try await test.ledger.leaseServerCalls(limit: 1, until: Self.now + 60, now: Self.now).first)
            try await test.ledger.completeServerCall(try #require(call.id), .sent(body: nil), now: Self.now)
            let events = try await test.ledger.events(of: "1", limit: 100)
            #expect(events.map(\.sequence) == [1, 2, 3, 4])
            #expect(events.last?.type == .finished)
            #expect(Set(events.map(\.eventID)).count == 4)
            let last = try #require(events.last)
            let body = try #require(try JSONSerialization.jsonObject(with: Data(last.body.utf8)) as? [String: Any])
            #expect(body["id"] as? String == events.last?.eventID)
            #expect(body["sequence"] as? Int == 4)
            #expect(body["state"] as? String == "acknowledged")
            // A refusal of a settled call, or a retry, is no event.
            try await test.ledger.completeServerCall(try #require(call.id), .refused(error: "late"), now: Self.now)
            #expect(try await test.ledger.events(of: "1", limit: 100).count == 4)
        }
    }

    @Test(arguments: LedgerEngine.allCases) func eachCauseOfARevocationSetOrLiftedIsAnEventWhateverTheStateWas(_ engine: LedgerEngine)
        async throws
    {
        try await TestLedger.with(engine) { test in
            try await ServerCallQueueTests.deliver(test.ledger, "1", acknowledge: false)
            _ = try await test.ledger.recordProof(LedgerTests.proof("2", original: "1"), terms: LedgerTests.download(), now: Self.now)
            let purchase = RevokedPurchase(transactionID: "1", originalTransactionID: "1", productID: nil, bundleID: nil, environment: nil)
            _ = try await test.ledger.revoke(purchase, cause: .operatorAction, reason: "fraud", now: Self.now)
            // Apple refunds a purchase the operator revoked: the state stays, the refund is an event.
            _ = try await test.ledger.revoke(purchase, cause: .refund, reason: "refunded (the App Store says so)", now: Self.now)
            // The operator lifts the revocation while the refund stands: still revoked, and an event.
            _ = try await test.ledger.reinstate("1", reason: "ok", now: Self.now)
            #expect(
                try await Self.types(test.ledger, "1") == [
                    "purchase.verified", "purchase.delivered", "purchase.revoked", "purchase.refunded", "purchase.revocation_lifted",
                ])
            _ = try await test.ledger.reverseRefund(originalTransactionID: "1", now: Self.now)
            let expected = [
                "purchase.verified", "purchase.delivered", "purchase.revoked", "purchase.refunded", "purchase.revocation_lifted",
                "purchase.reinstated",
            ]
            #expect(try await Self.types(test.ledger, "1") == expected)
            #expect(try await Self.types(test.ledger, "2") == ["purchase.verified"] + expected.dropFirst(2))
            // Each says whose revocation it is about, why, and the state after it.
            let bodies = try await test.ledger.events(of: "1", limit: 100).map { event in
                try #require(try JSONSerialization.jsonObject(with: Data(event.body.utf8)) as? [String: Any])
            }
            #expect(bodies.map { $0["cause"] as? String } == [nil, nil, "operator", "refund", "operator", "refund"])
            #expect(bodies.map { $0["state"] as? String } == ["verified", "delivered", "revoked", "revoked", "revoked", "verified"])
            #expect(bodies[2]["detail"] as? String == "fraud")
            #expect(bodies[3]["detail"] as? String == "refunded (the App Store says so)")
            #expect(bodies.map { $0["sequence"] as? Int } == [1, 2, 3, 4, 5, 6])
        }
    }

    @Test(arguments: LedgerEngine.allCases) func theSameCauseTwiceIsOneEvent(_ engine: LedgerEngine) async throws {
        try await TestLedger.with(engine) { test in
            try await ServerCallQueueTests.deliver(test.ledger, "1", acknowledge: false)
            let purchase = RevokedPurchase(transactionID: "1", originalTransactionID: "1", productID: nil, bundleID: nil, environment: nil)
            _ = try await test.ledger.revoke(purchase, cause: .refund, reason: "refunded", now: Self.now)
            _ = try await test.ledger.revoke(purchase, cause: .refund, reason: "refunded again", now: Self.now)
            #expect(try await Self.types(test.ledger, "1") == ["purchase.verified", "purchase.delivered", "purchase.refunded"])
            #expect(try await test.ledger.fulfilment("1")?.lastError == "refunded", "nothing changed, nothing written")
        }
    }

    @Test(arguments: LedgerEngine.allCases) func aFanOutQueuesEachEventOncePerEndpointAndLeasesKeepTheOrder(_ engine: LedgerEngine)
        async throws
    {
        try await TestLedger.with(engine) { test in
            let ledger = test.ledger
            try await ServerCallQueueTests.deliver(ledger, "1", acknowledge: true)
            try await ServerCallQueueTests.deliver(ledger, "2", acknowledge: false)
            #expect(try await ledger.fanOut(to: ["a", "b"], limit: 100, now: Self.now) == 5)
            #expect(try await ledger.fanOut(to: ["a", "b"], limit: 100, now: Self.now) == 0)
            #expect(try await ledger.webhookDeliveries(WebhookDeliveryQuery(limit: 100)).count == 10)

            // One event per transaction at a time: each transaction's first.
            let until = Self.now + 60
            var leased = try await ledger.leaseWebhookDeliveries(endpoint: "a", limit: 10, until: until, now: Self.now)
            #expect(leased.map { "\($0.delivery.transactionID)#\($0.delivery.sequence)" }.sorted() == ["1#1", "2#1"])
            // Held: another sender gets none of them, nor what waits behind them.
            #expect(try await ledger.leaseWebhookDeliveries(endpoint: "a", limit: 10, until: until, now: Self.now).isEmpty)
            let first = try #require(leased.first { $0.delivery.transactionID == "1" })
            try await ledger.completeWebhookDelivery(try #require(first.delivery.id), .sent(status: 204), lease: nil, now: Self.now)
            leased = try await ledger.leaseWebhookDeliveries(endpoint: "a", limit: 10, until: until, now: Self.now)
            #expect(leased.map { "\($0.delivery.transactionID)#\($0.delivery.sequence)" } == ["1#2"])
            #expect(leased.first?.type == "purchase.delivered")
            // A retry holds the events behind it until it is received; a parked one lets them go.
            let second = try #require(leased.first?.delivery.id)
            try await ledger.completeWebhookDelivery(
                second, .retry(error: "503", status: 503, retryAt: Self.now + 30), lease: nil, now: Self.now)
            #expect(try await ledger.leaseWebhookDeliveries(endpoint: "a", limit: 10, until: until, now: Self.now + 10).isEmpty)
            let retried = try await ledger.leaseWebhookDeliveries(endpoint: "a", limit: 10, until: Self.now + 100, now: Self.now + 40)
            #expect(retried.map { "\($0.delivery.transactionID)#\($0.delivery.sequence)" } == ["1#2"])
            try await ledger.completeWebhookDelivery(second, .parked(error: "410", status: 410), lease: nil, now: Self.now + 40)
            let next = try await ledger.leaseWebhookDeliveries(endpoint: "a", limit: 10, until: Self.now + 100, now: Self.now + 40)
            #expect(next.map { "\($0.delivery.transactionID)#\($0.delivery.sequence)" } == ["1#3"])

            let stats = try await ledger.webhookStats(endpoints: ["a", "b", "c"])
            #expect(stats.map(\.endpoint) == ["a", "b", "c"])
            #expect(stats[0].sent == 1 && stats[0].parked == 1 && stats[0].queued == 3)
            #expect(stats[1].queued == 5 && stats[1].oldestQueuedAt == Self.now)
            #expect(stats[2] == WebhookQueueStats(endpoint: "c"))

            // Redelivered: queued again, tries counted afresh, same event.
            #expect(try await ledger.redeliver(second, now: Self.now + 50))
            let again = try await ledger.webhookDeliveries(WebhookDeliveryQuery(endpoint: "a", status: .queued, transactionID: "1"))
            #expect(again.contains { $0.delivery.id == second && $0.delivery.attempts == 0 })
            #expect(try await !ledger.redeliver(999_999, now: Self.now))
        }
    }

    @Test(arguments: LedgerEngine.allCases) func oldEventsArePurgedButNotWhileADeliveryWaitsAndTheSequenceGoesOn(_ engine: LedgerEngine)
        async throws
    {
        try await TestLedger.with(engine) { test in
            let ledger = test.ledger
            try await ServerCallQueueTests.deliver(ledger, "1", acknowledge: true)
            _ = try await ledger.fanOut(to: ["a"], limit: 100, now: Self.now)
            // Queued deliveries hold their events past the retention.
            #expect(try await ledger.purgeEvents(before: Self.now + 1, limit: 100) == 0)
            for _ in 0..<3 {
                for leased in try await ledger.leaseWebhookDeliveries(endpoint: "a", limit: 10, until: Self.now + 60, now: Self.now) {
                    let id = try #require(leased.delivery.id)
                    try await ledger.completeWebhookDelivery(id, .sent(status: 200), lease: leased.delivery.leasedUntil, now: Self.now)
                }
            }
            #expect(try await ledger.webhookDeliveries(WebhookDeliveryQuery(status: .sent)).count == 3)
            #expect(try await test.ledger.purgeEvents(before: Self.now + 1, limit: 2) == 2)
            #expect(try await test.ledger.purgeEvents(before: Self.now + 1, limit: 100) == 1)
            #expect(try await test.ledger.webhookDeliveries(WebhookDeliveryQuery()).isEmpty)
            let purchase = RevokedPurchase(transactionID: "1", originalTransactionID: "1", productID: nil, bundleID: nil, environment: nil)
            _ = try await test.ledger.revoke(purchase, cause: .operatorAction, reason: "fraud", now: Self.now)
            #expect(try await test.ledger.events(of: "1", limit: 10).map(\.sequence) == [4])
        }
    }

    /// A settlement carries the lease it was made under: a sender whose lease ran out and was taken
    /// over settles nothing; a queued delivery (in flight) is not redelivered from under its sender.
    @Test(arguments: LedgerEngine.allCases) func aStaleLeaseSettlesNothingAndAQueuedDeliveryIsNotRedelivered(_ engine: LedgerEngine)
        async throws
    {
        try await TestLedger.with(engine) { test in
            let ledger = test.ledger
            try await ServerCallQueueTests.deliver(ledger, "1", acknowledge: false)
            _ = try await ledger.fanOut(to: ["a"], limit: 100, now: Self.now)
            let first = try #require(
                try await ledger.leaseWebhookDeliveries(endpoint: "a", limit: 1, until: Self.now + 10, now: Self.now).first)
            let id = try #require(first.delivery.id)
            #expect(try await !ledger.redeliver(id, now: Self.now))
            // The lease ran out; another sender took it.
            let second = try #require(
                try await ledger.leaseWebhookDeliveries(endpoint: "a", limit: 1, until: Self.now + 80, now: Self.now + 20).first)
            #expect(second.delivery.id == id)
            try await ledger.completeWebhookDelivery(id, .sent(status: 200), lease: first.delivery.leasedUntil, now: Self.now + 21)
            #expect(try await ledger.webhookDeliveries(WebhookDeliveryQuery(status: .queued)).contains { $0.delivery.id == id })
            try await ledger.completeWebhookDelivery(id, .sent(status: 200), lease: second.delivery.leasedUntil, now: Self.now + 22)
            #expect(try await ledger.webhookDeliveries(WebhookDeliveryQuery(status: .sent)).map(\.delivery.id) == [id])
            #expect(try await ledger.redeliver(id, now: Self.now + 23))
        }
    }

    /// Deliveries queued past the give-up window to an endpoint no longer configured are parked;
    /// an instance with no endpoint marks only events older than that window handled.
    @Test(arguments: LedgerEngine.allCases) func abandonedDeliveriesAreParkedAndOnlyOldEventsAreMarkedHandled(_ engine: LedgerEngine)
        async throws
    {
        try await TestLedger.with(engine) { test in
            let ledger = test.ledger
            try await ServerCallQueueTests.deliver(ledger, "1", acknowledge: false)
            _ = try await ledger.fanOut(to: ["gone", "kept"], limit: 100, now: Self.now)
            #expect(try await ledger.parkAbandonedDeliveries(keeping: ["kept"], queuedBefore: Self.now, now: Self.now + 1) == 0)
            #expect(try await ledger.parkAbandonedDeliveries(keeping: ["kept"], queuedBefore: Self.now + 1, now: Self.now + 1) == 2)
            let parked = try await ledger.webhookDeliveries(WebhookDeliveryQuery(status: .parked))
            #expect(parked.map(\.delivery.endpoint) == ["gone", "gone"])
            #expect(parked.allSatisfy { $0.delivery.lastError == "the endpoint is no longer configured" })

            // Its events are written now (the delivery, by the clock) and at the tests' `now` (the proof), both later than an hour ago.
            try await ServerCallQueueTests.deliver(ledger, "2", acknowledge: false)
            #expect(try await ledger.markEventsHandled(before: Date().addingTimeInterval(-3600), limit: 100) == 0)
            #expect(try await ledger.markEventsHandled(before: Self.now + 1, limit: 100) == 2)
            #expect(try await ledger.fanOut(to: ["kept"], limit: 100, now: Self.now) == 0)
        }
    }

    /// A queued delivery this build cannot read (a value a newer instance wrote) is set aside for
    /// an hour with its reason, and the rest of the queue flows.
    @Test(arguments: LedgerEngine.allCases) func aDeliveryThisBuildCannotReadIsSetAsideAndTheRestFlow(_ engine: LedgerEngine) async throws {
        try await TestLedger.with(engine) { test in
            try await ServerCallQueueTests.deliver(test.ledger, "1", acknowledge: false)
            try await ServerCallQueueTests.deliver(test.ledger, "2", acknowledge: false)
            _ = try await test.ledger.fanOut(to: ["a"], limit: 100, now: Self.now)
            // Transaction 2's first delivery becomes unreadable: a time SQLite holds as text no
            // date reads, or on PostgreSQL a NULL where this build needs a value.
            switch engine {
            case .sqlite:
                try await test.execute(
                    "UPDATE webhook_deliveries SET created_at = '0000-not-a-time' WHERE transaction_id = '2' AND sequence = 1")
            case .postgres:
                try await test.execute("ALTER TABLE webhook_deliveries ALTER COLUMN attempts DROP NOT NULL")
                try await test.execute("UPDATE webhook_deliveries SET attempts = NULL WHERE transaction_id = '2' AND sequence = 1")
            }
            let leased = try await test.ledger.leaseWebhookDeliveries(endpoint: "a", limit: 10, until: Self.now + 60, now: Self.now)
            #expect(leased.map { "\($0.delivery.transactionID)#\($0.delivery.sequence)" } == ["1#1"])
            let aside = try await test.ledger.leaseWebhookDeliveries(endpoint: "a", limit: 10, until: Self.now + 1860, now: Self.now + 1800)
            #expect(
                !aside.contains { $0.delivery.transactionID == "2" },
                "set aside for an hour, and transaction 2's second event waits behind it")
            struct Row: LedgerRecord {
                var lastError: String?
                init(row: some LedgerCells) throws { lastError = try row["last_error"] }
            }
            let runner = try #require(test.ledger as? any LedgerStatementRunner)
            let rows = try await runner.fetch(
                LedgerStatement("SELECT last_error FROM webhook_deliveries WHERE transaction_id = '2' AND sequence = 1", []), as: Row.self)
            #expect(rows.first?.lastError?.hasPrefix("set aside") == true, "\(String(describing: rows.first?.lastError))")
        }
    }

    /// A delivery is sent with its own event's body only: should the ID it names belong to another
    /// transaction's event (an ID SQLite reused after a purge), the lease hands it out with no body.
    @Test(arguments: LedgerEngine.allCases) func aDeliveryWhoseEventIDNowNamesAnotherEventIsNotSent(_ engine: LedgerEngine) async throws {
        try await TestLedger.with(engine) { test in
            try await ServerCallQueueTests.deliver(test.ledger, "1", acknowledge: false)
            #expect(try await test.ledger.fanOut(to: ["a"], limit: 100, now: Self.now) == 2)
            try await test.execute("UPDATE ledger_events SET transaction_id = 'someone-else' WHERE sequence = 1")
            let leased = try await test.ledger.leaseWebhookDeliveries(endpoint: "a", limit: 10, until: Self.now + 60, now: Self.now)
            #expect(leased.isEmpty, "\(leased.map(\.delivery.sequence))")
        }
    }

    /// A SQLite ledger of v10 with events and a delivery: v11 builds the log anew without
    /// AUTOINCREMENT (whose counter row every insert wrote), keeping every event, its ID, the
    /// deliveries that reference it (nothing cascades while the table is replaced) and the index
    /// the fan-out reads; new events' IDs follow the highest.
    @Test func migratingASQLiteLedgerKeepsEveryEventItsIDAndItsDeliveries() async throws {
        let folder = try TemporaryFolder()
        let path = folder.path + "/v10.sqlite"
        let queue = try DatabaseQueue(path: path)
        try SQLiteDatabase.migrator.migrate(queue, upTo: "v10: consent rescinded (RESCIND_CONSENT), per app download")
        try await queue.write { db in
            for (id, sequence) in [(4, 1), (9, 2)] {
                try db.execute(
                    sql: """
                        INSERT INTO ledger_events (id, event_id, type, transaction_id, sequence, body, created_at, fanned_out)
                        VALUES (?, ?, 'purchase.verified', 't', ?, '{}', ?, ?)
                        """,
                    arguments: [id, "e-\(id)", sequence, Self.now, sequence == 2])
            }
            try db.execute(
                sql: """
                    INSERT INTO webhook_deliveries (event, endpoint, transaction_id, sequence, status, due_at, created_at, updated_at)
                    VALUES (9, 'backend', 't', 2, 'queued', ?, ?, ?)
                    """,
                arguments: [Self.now, Self.now, Self.now])
        }
        try queue.close()
        let ledger = SQLiteLedger(database: try SQLiteDatabase(path: path))
        #expect(try await ledger.events(of: "t", limit: 10).map(\.id) == [4, 9])
        #expect(try await ledger.webhookDeliveries(WebhookDeliveryQuery()).map(\.eventID) == ["e-9"])
        let (schema, counters, indexes) = try await ledger.database.writer.read { db in
            (
                try String.fetchOne(db, sql: "SELECT sql FROM sqlite_master WHERE name = 'ledger_events'") ?? "",
                try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM sqlite_sequence WHERE name = 'ledger_events'") ?? -1,
                try String.fetchAll(
                    db, sql: "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'ledger_events' AND sql IS NOT NULL")
            )
        }
        #expect(!schema.contains("AUTOINCREMENT") && schema.contains("UNIQUE (transaction_id, sequence)"))
        #expect(counters == 0)
        #expect(indexes == ["ledger_events_on_fanned_out_id"])
        _ = try await ledger.recordProof(LedgerTests.proof("u"), terms: LedgerTests.download(), now: Self.now)
        #expect(try await ledger.events(of: "u", limit: 10).map(\.id) == [10], "IDs continue after the highest copied")
        #expect(try await ledger.fanOut(to: ["backend"], limit: 10, now: Self.now) == 2, "events 4 and 10 were not fanned out")
    }
}
