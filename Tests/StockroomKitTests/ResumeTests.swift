import Foundation
import StockroomTestSupport
import Testing

@testable import StockroomKit

/// Broken connections, a killed app, damaged bytes and an expired token, through a TCP proxy.
@Suite struct ResumeTests {
    static let size = Int64(KitFixture.bigBytes.count)

    /// The `from N` of the first resumed request.
    static func resumedFrom(_ events: EventLog) -> Int64? {
        events.all.lazy.compactMap { event -> Int64? in
            if case .response(_, "GET", _, let start?, 206) = event { return start }
            return nil
        }.first
    }

    @Test(arguments: TransportTests.engines)
    func aConnectionCutMidBodyResumesWith206FromItsByteCountWithoutASecondVerification(_ engine: HTTPTransport.Engine) async throws {
        try await KitFixture.run { fixture in
            let purchase = try await fixture.control.purchase(KitFixture.big).withReceipt()
            fixture.proxy.inject([.cutAfter(1 << 20)])
            let events = EventLog()
            let delivery = try fixture.delivery(events: events) { $0.transportEngine = engine }

            #expect(await delivery.deliver(purchase).code == "delivered")
            let intact = fixture.holds(KitFixture.big, KitFixture.bigBytes)
            #expect(intact)
            let from = try #require(Self.resumedFrom(events), "\(events.requests)")
            #expect(from > 0 && from < Self.size)
            #expect(events.all.contains(.interrupted(transactionID: purchase.transactionID, bytes: from)), "resumed from its byte count")
            // The cut may leave the app bytes the server could not count (a region the socket took
            // only in part): then the ack meets 409 until the app fetches, from what the server
            // says it recorded, the bytes it missed: a range before `from`, never the whole file.
            #expect(Array(events.requests.prefix(2)) == ["POST 200", "GET 206 from \(from)"], "\(events.requests)")
            #expect(events.requests.last == "ack 200")
            let refetched = events.requests.dropFirst(2).filter { $0.hasPrefix("GET 206 from ") }
            #expect(refetched.allSatisfy { (Int64($0.dropFirst("GET 206 from ".count)) ?? .max) < from }, "\(events.requests)")
            #expect(events.requests.filter { $0 == "ack 409" }.count <= 5, "\(events.requests)")
            #expect(try await fixture.verifications() == 1, "no second verification upstream")
            #expect(try await fixture.state(purchase.transactionID) == .acknowledged)
        }
    }

    @Test func aNewClientOnTheSameJournalCompletesTheDownloadAndSafeToFinishIsReportedOnceAcrossBoth() async throws {
        try await KitFixture.run { fixture in
            let purchase = try await fixture.control.purchase(KitFixture.big).withSignedTransaction()
            let reports = Reports()

            // The first run: the connection drops mid-body and the server stays out of reach.
            fixture.proxy.inject([.cutAfterThenRefuse(1 << 20)])
            let clock = TestClock()
            var first: Delivery? = try fixture.delivery(now: clock.now, maximumInterruptions: 0)
            reports.listen(first!)
            let interrupted = await first!.deliver(purchase)
            #expect(interrupted.transactionAction == .keepUnfinishedAndRetry, "\(interrupted)")
            #expect(try await fixture.state(purchase.transactionID) != .acknowledged)
            let journal = try #require(await first!.journalEntry(purchase.transactionID))
            #expect(journal.token != nil && journal.etag != nil && journal.digest != nil && journal.expectedSize == Self.size)
            first = nil  // the app is killed

            // The relaunch: a new client on the same journal, once the backoff has passed.
            fixture.proxy.refuse(false)
            clock.advance(3600)
            let events = EventLog()
            let second = try fixture.delivery(now: clock.now, events: events)
            reports.listen(second)
            #expect(await second.deliver(purchase).code == "delivered")
            let intact = fixture.holds(KitFixture.big, KitFixture.bigBytes)
            #expect(intact)
            let from = try #require(Self.resumedFrom(events), "\(events.requests)")
            #expect(from > 0, "it resumed from the partial file")
            #expect(events.requests.first == "GET 206 from \(from)")

            // A third launch on the same journal reports nothing again.
            let third = try fixture.delivery(now: clock.now)
            reports.listen(third)
            #expect(await third.deliver(purchase).code == "delivered")
            #expect(await reports.ids() == [purchase.transactionID])
        }
    }

    @Test(arguments: TransportTests.engines)
    func aByteFlippedInTransitIsDownloadedAfreshAndNeverAcknowledgedBeforeTheFileIsIntact(_ engine: HTTPTransport.Engine) async throws {
        try await KitFixture.run { fixture in
            let purchase = try await fixture.control.purchase(KitFixture.big).withReceipt()
            fixture.proxy.inject([.flip(at: 200_000)])
            let events = EventLog()
            let delivery = try fixture.delivery(events: events) { $0.transportEngine = engine }

            #expect(await delivery.deliver(purchase).code == "delivered")
            let intact = fixture.holds(KitFixture.big, KitFixture.bigBytes)
            #expect(intact)
            let steps = events.all.compactMap { event -> String? in
                switch event {
                case .digestMismatch: "mismatch"
                case .placed: "placed"
                case .acknowledged: "acknowledged"
                case .response(_, _, let path, _, let status): path.hasSuffix("/ack") ? "ack \(status)" : nil
                default: nil
                }
            }
            #expect(steps == ["mismatch", "placed", "ack 200", "acknowledged"], "no ack before the file is intact")
            #expect(events.requests == ["POST 200", "GET 200", "ack 200"], "a fresh download, from the first byte")
            #expect(try await fixture.state(purchase.transactionID) == .acknowledged)
        }
    }

    @Test func aTokenThatExpiresBeforeTheResumeBringsANewPostWithTheStoredProof() async throws {
        try await KitFixture.run({ $0.tokenLifetime = .seconds(6) }) { fixture in
            let purchase = try await fixture.control.purchase(KitFixture.big).withReceipt()
            fixture.proxy.inject([.cutAfterThenRefuse(1 << 20)])
            let clock = TestClock()
            let first = try fixture.delivery(now: clock.now, maximumInterruptions: 0)
            #expect(await first.deliver(purchase).transactionAction == .keepUnfinishedAndRetry)
            try await Task.sleep(for: .milliseconds(6200))  // the token is now expired

            fixture.proxy.refuse(false)
            clock.advance(3600)
            let events = EventLog()
            // The purchase as a relaunched app has it: the journal's proof is what the new POST carries.
            let second = try fixture.delivery(now: clock.now, events: events)
            #expect(await second.deliver(purchase).code == "delivered")
            let intact = fixture.holds(KitFixture.big, KitFixture.bigBytes)
            #expect(intact)
            let requests = events.requests
            // 6 s of token is time enough on a loaded machine (3 s was not once: a second 401 and POST).
            #expect(requests.first?.hasPrefix("GET 401 from ") == true, "the old token is refused \(requests)")
            #expect(requests.dropFirst().first == "POST 200", "a new POST with the stored proof")
            #expect(requests.dropFirst(2).first?.hasPrefix("GET 206 from ") == true, "then the resume with the new token")
            #expect(requests.last == "ack 200")
            // The cut may have left the app bytes the server could not count: then the acks meet
            // 409 until the app asks what the server recorded and fetches the rest once.
            let settling = requests.dropFirst(3).dropLast()
            #expect(settling.allSatisfy { $0 == "ack 409" || $0 == "GET 200" || $0.hasPrefix("GET 206 from ") }, "\(requests)")
            #expect(settling.filter { $0 == "ack 409" }.count <= 5, "\(requests)")
            #expect(settling.filter { $0 == "GET 200" }.count <= 1, "the record asked for once")
            #expect(try await fixture.state(purchase.transactionID) == .acknowledged)
        }
    }
}
