import Foundation
import StockroomTestSupport
import Testing

@testable import StockroomKit

/// Content delivered by redirect, against real parts: a live Stockroom with
/// `--content-delivery redirect` over a real S3 store (SeaweedFS, `.ci/s3`) behind a recording
/// proxy, and the simulator. The app follows Stockroom's 303 and 307 to the store with nothing of
/// its own, checks the digest Stockroom gave, and acknowledges to Stockroom alone.
@Suite struct RedirectTests {
    static let book = "books/book.epub"
    static let big = "big.bin"

    /// A connection whose first request is the app's (not signed with Stockroom's key).
    static func isTheApps(_ store: StoreFixture) -> @Sendable (ProxiedRequest) -> Bool {
        { !store.isStockroomsOwn($0) }
    }

    /// Where the first body stopped, from the `interrupted` event.
    static func interruptedAt(_ events: EventLog) -> Int64? {
        events.all.lazy.compactMap { event -> Int64? in
            if case .interrupted(_, let bytes) = event { return bytes }
            return nil
        }.first
    }

    @Test(arguments: TransportTests.engines)
    func aDeliveryByRedirectFetchesTheStoreWithNothingOfTheAppsAndIsAcknowledgedToStockroom(_ engine: HTTPTransport.Engine) async throws {
        let store = try await StoreFixture.make()
        defer { store.proxy.stop() }
        try await KitFixture.run({ store.configure(&$0) }) { fixture in
            let bought = try await fixture.control.purchase(KitFixture.book)
            let purchase = bought.withSignedTransaction()
            let events = EventLog()
            let delivery = try fixture.delivery(events: events) { $0.transportEngine = engine }

            #expect(await delivery.deliver(purchase).code == "delivered")
            let intact = fixture.holds(KitFixture.book, KitFixture.bookBytes)
            #expect(intact)
            #expect(events.requests == ["POST 303", "store 200", "ack 200"])
            #expect(try await fixture.state(purchase.transactionID) == .acknowledged, "the acknowledgement reached Stockroom")

            let entry = try #require(await delivery.journalEntry(purchase.transactionID))
            let token = try #require(entry.token)
            #expect(store.appRequests.map(\.description) == ["GET \(store.path(Self.book))"])
            #expect(store.leaks([token, bought.signedTransaction, "Bearer"], file: Self.book) == [])

            // The presigned URL is a credential: never in the journal, never in an event.
            #expect(entry.location == "/v1/downloads/\(purchase.transactionID)/content")
            let journal = try String(contentsOfFile: fixture.folder.path + "/journal/\(purchase.transactionID).json", encoding: .utf8)
            #expect(!journal.contains("X-Amz") && !journal.contains(String(store.settings.endpoint?.port ?? 0)))
            #expect(!events.all.contains { "\($0)".contains("X-Amz") })
        }
    }

    @Test func aStoreTransferCutMidBodyResumesWithRangeThroughAFresh307() async throws {
        let store = try await StoreFixture.make()
        defer { store.proxy.stop() }
        try await KitFixture.run({ store.configure(&$0) }) { fixture in
            let purchase = try await fixture.control.purchase(KitFixture.big).withReceipt()
            store.proxy.inject([.cutAfter(1 << 20)], whereFirstRequest: Self.isTheApps(store))
            let events = EventLog()
            let delivery = try fixture.delivery(events: events)

            #expect(await delivery.deliver(purchase).code == "delivered")
            let intact = fixture.holds(KitFixture.big, KitFixture.bigBytes)
            #expect(intact)
            let from = try #require(Self.interruptedAt(events), "\(events.requests)")
            #expect(from > 0 && from < Int64(KitFixture.bigBytes.count))
            #expect(events.requests == ["POST 303", "store 200", "GET 307 from \(from)", "store 206 from \(from)", "ack 200"])
            let gets = store.appRequests
            #expect(gets.map { $0.header("Range") } == [nil, "bytes=\(from)-"])
            #expect(store.leaks(["Bearer"], file: Self.big) == [])
            #expect(try await fixture.verifications() == 1, "no second verification upstream")
            #expect(try await fixture.state(purchase.transactionID) == .acknowledged)
        }
    }

    @Test func anExpiredURLIsRenewedAndTheDownloadContinuesFromTheBytesOnDisk() async throws {
        let store = try await StoreFixture.make()
        defer { store.proxy.stop() }
        // A URL lives 2 s (1 s to 2 s once its second is rounded down); the second store request is
        // held back 3.5 s, so it arrives expired.
        try await KitFixture.run({ store.configure(&$0, presignLifetime: .seconds(2)) }) { fixture in
            let purchase = try await fixture.control.purchase(KitFixture.big).withSignedTransaction()
            store.proxy.inject([.cutAfter(1 << 20), .holdRequest(3.5)], whereFirstRequest: Self.isTheApps(store))
            let events = EventLog()
            let delivery = try fixture.delivery(events: events)

            #expect(await delivery.deliver(purchase).code == "delivered")
            let intact = fixture.holds(KitFixture.big, KitFixture.bigBytes)
            #expect(intact)
            let from = try #require(Self.interruptedAt(events), "\(events.requests)")
            #expect(
                events.requests == [
                    "POST 303", "store 200", "GET 307 from \(from)", "store 403 from \(from)", "GET 307 from \(from)",
                    "store 206 from \(from)", "ack 200",
                ])
            #expect(store.appRequests.count == 3)
            #expect(store.leaks(["Bearer"], file: Self.big) == [])
            #expect(try await fixture.state(purchase.transactionID) == .acknowledged)
        }
    }

    @Test func aStoreBodyThatFailsTheDigestIsNeverAcknowledged() async throws {
        let store = try await StoreFixture.make()
        defer { store.proxy.stop() }
        try await KitFixture.run({ store.configure(&$0) }) { fixture in
            let purchase = try await fixture.control.purchase(KitFixture.book).withSignedTransaction()
            // One byte of the body flipped on its way from the store (the store's connection, which
            // the next request reuses, is the only one broken: so a damaged body is given up at once).
            store.proxy.inject([.flip(at: 5_000)], whereFirstRequest: Self.isTheApps(store))
            let events = EventLog()
            let clock = TestClock()
            let delivery = try fixture.delivery(now: clock.now, events: events) { $0.maximumDigestFailures = 1 }

            let outcome = await delivery.deliver(purchase)
            #expect(outcome.code == "digest_mismatch", "\(outcome)")
            #expect(outcome.transactionAction == .keepUnfinishedAndRetry)
            #expect(events.all.filter { $0 == .digestMismatch(transactionID: purchase.transactionID) }.count == 1)
            #expect(events.requests == ["POST 303", "store 200"], "never acknowledged")
            #expect(store.leaks(["Bearer"], file: Self.book) == [])
            #expect(try await fixture.state(purchase.transactionID) != .acknowledged)
            #expect(fixture.filesOnDisk().isEmpty, "no file in place, no partial file left")

            // The store's bytes arrive intact later: delivered then, and only then acknowledged.
            clock.advance(3600)
            #expect(await delivery.deliver(purchase).code == "delivered")
            let intact = fixture.holds(KitFixture.book, KitFixture.bookBytes)
            #expect(intact)
            #expect(events.requests.suffix(3) == ["GET 307", "store 200", "ack 200"])
            #expect(try await fixture.state(purchase.transactionID) == .acknowledged)
        }
    }

    @Test func aRestoreFollowsEachProductsRedirect() async throws {
        let store = try await StoreFixture.make()
        defer { store.proxy.stop() }
        try await KitFixture.run({ store.configure(&$0) }) { fixture in
            let book = try await fixture.control.purchase(["productId": KitFixture.book, "deviceId": "device-a"])
            let big = try await fixture.control.purchase(["productId": KitFixture.big, "deviceId": "device-a"])
            let events = EventLog()
            let delivery = try fixture.delivery(events: events)

            let answer = await delivery.restore(signedTransaction: book.signedTransaction)
            guard case .success(let restored) = answer else { Issue.record("\(answer)"); return }
            #expect(restored.map(\.outcome.code) == ["delivered", "delivered"])
            let intact = fixture.holds(KitFixture.book, KitFixture.bookBytes) && fixture.holds(KitFixture.big, KitFixture.bigBytes)
            #expect(intact)
            #expect(events.requests.filter { $0.hasPrefix("GET") } == ["GET 307", "GET 307"], "each product's location answered 307")
            #expect(try await fixture.state(book.transactionId) == .acknowledged)
            #expect(try await fixture.state(big.transactionId) == .acknowledged)
            #expect(Set(store.appRequests.map(\.path)) == [store.path(Self.book), store.path(Self.big)])
            #expect(store.leaks([book.signedTransaction, "Bearer"], file: Self.book, others: [Self.big]) == [])
        }
    }

    @Test func stockroomClientDeliversByRedirect() async throws {
        let binary = try StockroomProcess.binary()
        let store = try await StoreFixture.make()
        defer { store.proxy.stop() }
        try await KitFixture.run({ store.configure(&$0) }) { fixture in
            let bought = try await fixture.control.purchase(KitFixture.big)
            _ = try fixture.folder.write("purchase.jws", bought.signedTransaction)
            let run = try await ChildProcess.run(
                binary,
                [
                    "client", "deliver", "--server", fixture.proxy.url.absoluteString, "--product", KitFixture.big, "--signed-transaction",
                    fixture.folder.path + "/purchase.jws", "--into", fixture.folder.path + "/files", "--journal",
                    fixture.folder.path + "/journal", "--json",
                ])
            #expect(run.status == 0, "\(run.output)")
            #expect(run.output.contains(#""safeToFinish""#), "\(run.output)")
            let intact = fixture.holds(KitFixture.big, KitFixture.bigBytes)
            #expect(intact)
            #expect(try await fixture.state(bought.transactionId) == .acknowledged)
            #expect(store.appRequests.map(\.description) == ["GET \(store.path(Self.big))"])
            #expect(store.appRequests.first?.header("User-Agent") == "StockroomKit", "libcurl's transfer, the client's own")
            #expect(store.leaks([bought.signedTransaction, "Bearer"], file: Self.big) == [])
        }
    }
}
