import Foundation
import StockroomKit
import StockroomTestSupport
import Testing

/// StoreKit's sequences, scripted with real simulator purchases, through the core's decisions.
@Suite struct TransactionQueueTests {
    /// A transaction source that plays a fixed script, then ends.
    struct ScriptedSource: TransactionSource {
        var script: [StoreTransaction]
        var refreshed: Data? = nil
        var onRefresh: @Sendable () -> Void = {}

        func transactions() -> AsyncStream<StoreTransaction> {
            AsyncStream { continuation in
                for transaction in script { continuation.yield(transaction) }
                continuation.finish()
            }
        }

        func refreshedReceipt() async -> Data? {
            onRefresh()
            return refreshed
        }
    }

    /// What happened, in order: finishes and what was true when they happened.
    final class Log: @unchecked Sendable {
        private let lock = NSLock()
        private var lines: [String] = []
        func append(_ line: String) { lock.withLock { lines.append(line) } }
        var all: [String] { lock.withLock { lines } }
    }

    static func collect(_ queue: TransactionQueue) -> Task<[TransactionQueue.Report], Never> {
        Task { await queue.reports.reduce(into: []) { $0.append($1) } }
    }

    @Test func failedThenPurchasedFinishesTheFailedOneAtOnceAndThePurchasedOneOnlyOnceDelivered() async throws {
        try await KitFixture.run { fixture in
            let bought = try await fixture.control.purchase(KitFixture.book)
            let log = Log()
            let failed = StoreTransaction(
                transactionID: "1000000000000001", productID: KitFixture.book, state: .failed(reason: "payment declined")
            ) {
                log.append("finish failed")
            }
            let purchased = StoreTransaction(
                transactionID: bought.transactionId, productID: KitFixture.book, state: .purchased(bought.withReceipt())
            ) {
                let acknowledged = (try? await fixture.state(bought.transactionId)) == .acknowledged
                log.append("finish purchased acknowledged=\(acknowledged) intact=\(fixture.holds(KitFixture.book, KitFixture.bookBytes))")
            }
            let delivery = try fixture.delivery()
            let queue = TransactionQueue(delivery: delivery, productIDs: [KitFixture.book, KitFixture.big])
            let reports = Self.collect(queue)
            await queue.handle(failed, source: ScriptedSource(script: []))
            #expect(log.all == ["finish failed"], "the failed one is finished at once, before anything else")
            await queue.run(ScriptedSource(script: [purchased]))
            #expect(log.all == ["finish failed", "finish purchased acknowledged=true intact=true"])
            queue.finishReports()
            #expect(
                await reports.value == [
                    .finished(transactionID: "1000000000000001", outcome: "failed"),
                    .finished(transactionID: bought.transactionId, outcome: "delivered"),
                ])
        }
    }

    /// StoreKit 2's `updates` replays what `unfinished` lists, and the app hands in the result of
    /// `Product.purchase()` while `updates` may bring the same transaction: one delivery, one
    /// finish, one report, however many copies arrive and whenever.
    @Test func aPurchaseReplayedAndHandedInByTheAppIsDeliveredFinishedAndReportedOnce() async throws {
        try await KitFixture.run { fixture in
            let bought = try await fixture.control.purchase(KitFixture.book)
            let log = Log()
            let copy = StoreTransaction(
                transactionID: bought.transactionId, productID: KitFixture.book, state: .purchased(bought.withSignedTransaction())
            ) {
                log.append("finish")
            }
            let queue = TransactionQueue(delivery: try fixture.delivery(), productIDs: [KitFixture.book])
            let reports = Self.collect(queue)
            let source = ScriptedSource(script: [copy, copy, copy])
            async let fromStoreKit: Void = queue.run(source)
            async let fromTheApp: Void = queue.handle(copy, source: source)  // the purchase result
            _ = await (fromStoreKit, fromTheApp)
            await queue.handle(copy, source: source)  // a replay after the finish
            queue.finishReports()
            #expect(log.all == ["finish"])
            #expect(await reports.value == [.finished(transactionID: bought.transactionId, outcome: "delivered")])
            #expect(try await fixture.verifications() == 1, "one verification for every copy")
        }
    }

    /// A purchase the app let go (its decision) may come again: only a finished or running one is a replay.
    @Test func aPurchaseLeftToTheAppIsHandledAgainWhenItComesAgain() async throws {
        try await KitFixture.run { fixture in
            let log = Log()
            let refused = Purchase(productID: KitFixture.book, transactionID: "2000000000000042", proof: .signedTransaction("not.a.jws"))
            let transaction = StoreTransaction(transactionID: refused.transactionID, productID: KitFixture.book, state: .purchased(refused))
            { log.append("finish") }
            let queue = TransactionQueue(delivery: try fixture.delivery(), productIDs: [KitFixture.book])
            let reports = Self.collect(queue)
            await queue.run(ScriptedSource(script: [transaction]))
            await queue.handle(transaction, source: ScriptedSource(script: []))
            queue.finishReports()
            #expect(log.all.isEmpty)
            let decisions = await reports.value.filter { if case .needsDecision = $0 { true } else { false } }
            #expect(decisions.count == 2, "each arrival is the app's decision again")
        }
    }

    @Test func purchasingDeferredUnverifiedAndForeignProductsAreLeftUnfinished() async throws {
        try await KitFixture.run { fixture in
            let log = Log()
            func transaction(_ id: String, _ state: StoreTransaction.State, product: String = KitFixture.book) -> StoreTransaction {
                StoreTransaction(transactionID: id, productID: product, state: state) { log.append("finish \(id)") }
            }
            let foreign = Purchase(productID: "com.example.coins", transactionID: "4", proof: .signedTransaction("a.b.c"))
            let queue = TransactionQueue(delivery: try fixture.delivery(), productIDs: [KitFixture.book])
            let reports = Self.collect(queue)
            await queue.run(
                ScriptedSource(script: [
                    transaction("1", .purchasing), transaction("2", .deferred), transaction("3", .unverified(reason: "bad signature")),
                    transaction("4", .purchased(foreign), product: "com.example.coins"),
                ]))
            queue.finishReports()
            #expect(log.all.isEmpty, "none is finished")
            let all = await reports.value
            #expect(all.contains(.waiting(transactionID: "1")) && all.contains(.waiting(transactionID: "2")))
            #expect(all.contains(.unverified(transactionID: "3", reason: "bad signature")))
            #expect(all.contains(.notInCatalogue(transactionID: "4", productID: "com.example.coins")))
            #expect(try await fixture.verifications() == 0, "nothing reached the server")
        }
    }

    @Test func anOutageIsRetriedAfterRetryAfterAndThenFinished() async throws {
        try await KitFixture.run { fixture in
            let bought = try await fixture.control.purchase(KitFixture.book)
            try await fixture.control.fault(["kind": "http-status", "status": 503, "count": 1000])
            let clock = TestClock()
            let log = Log()
            let delivery = try fixture.delivery(now: clock.now)
            // The wait: the App Store comes back meanwhile, and the clock moves past Retry-After.
            let queue = TransactionQueue(delivery: delivery) { after in
                // A test that fails must not spin: a third wait ends the queue's retries.
                guard log.all.filter({ $0 == "wait" }).count < 2 else { throw CancellationError() }
                log.append("wait")
                try await fixture.clearFaults()
                clock.advance(after.timeInterval)
            }
            let reports = Self.collect(queue)
            await queue.run(
                ScriptedSource(script: [
                    StoreTransaction(
                        transactionID: bought.transactionId, productID: KitFixture.book, state: .purchased(bought.withReceipt())
                    ) { log.append("finish") }
                ]))
            queue.finishReports()
            #expect(log.all == ["wait", "finish"])
            let all = await reports.value
            #expect(all.count == 2)
            if case .retrying(_, _, let reason)? = all.first { #expect(reason == "upstream_unavailable") } else { Issue.record("\(all)") }
            #expect(all.last == .finished(transactionID: bought.transactionId, outcome: "delivered"))
        }
    }

    @Test func aStaleReceiptIsRefreshedByTheSourceAndDeliveredWithoutAFinishBefore() async throws {
        try await KitFixture.run { fixture in
            let first = try await fixture.control.purchase(["productId": KitFixture.book, "deviceId": "device-b"])
            let second = try await fixture.control.purchase(["productId": KitFixture.big, "deviceId": "device-a"])
            var stale = second.withReceipt()
            stale.proof = .appReceipt(Data(base64Encoded: first.receiptData, options: .ignoreUnknownCharacters)!)
            let log = Log()
            let queue = TransactionQueue(delivery: try fixture.delivery())
            let reports = Self.collect(queue)
            await queue.run(
                ScriptedSource(
                    script: [
                        StoreTransaction(transactionID: second.transactionId, productID: KitFixture.big, state: .purchased(stale)) {
                            log.append("finish")
                        }
                    ],
                    refreshed: Data(base64Encoded: second.receiptData, options: .ignoreUnknownCharacters),
                    onRefresh: { log.append("refresh") }))
            queue.finishReports()
            #expect(log.all == ["refresh", "finish"], "refreshed, delivered, and only then finished")
            #expect(await reports.value.last == .finished(transactionID: second.transactionId, outcome: "delivered"))
            let intact = fixture.holds(KitFixture.big, KitFixture.bigBytes)
            #expect(intact)
        }
    }
}
