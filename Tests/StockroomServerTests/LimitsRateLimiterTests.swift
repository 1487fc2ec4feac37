import Synchronization
import Testing
@testable import StockroomServer

/// The per-address limit on requests that reach the App Store, on a clock the test turns.
@Suite struct LimitsRateLimiterTests {
    final class TestClock: Sendable {
        private let elapsed = Mutex(Duration.seconds(1000))
        var now: Duration { elapsed.withLock { $0 } }
        func advance(_ by: Duration) { elapsed.withLock { $0 += by } }
    }

    static func limiter(_ rate: String, clock: TestClock, maximumAddresses: Int = 1000) throws -> UpstreamRateLimiter {
        UpstreamRateLimiter(rate: try #require(try UpstreamRate.parse(rate)), maximumAddresses: maximumAddresses, now: { clock.now })
    }

    @Test func aBurstUpToTheRateIsAdmittedThenOnePerInterval() throws {
        let clock = TestClock()
        let limiter = try Self.limiter("30/m", clock: clock)
        for _ in 0..<30 { #expect(limiter.admit("192.0.2.1") == nil) }
        let retryAfter = try #require(limiter.admit("192.0.2.1"))
        #expect(retryAfter > .seconds(1.9) && retryAfter <= .seconds(2.01), "one token each 2 s: \(retryAfter)")
        clock.advance(.seconds(1))
        #expect(limiter.admit("192.0.2.1") != nil, "half a token is not a request")
        clock.advance(.seconds(1))
        #expect(limiter.admit("192.0.2.1") == nil)
        #expect(limiter.admit("192.0.2.1") != nil)
    }

    @Test func refusedRequestsDoNotPostponeTheNextAdmission() throws {
        let clock = TestClock()
        let limiter = try Self.limiter("1/10s", clock: clock)
        #expect(limiter.admit("192.0.2.1") == nil)
        for _ in 0..<100 {
            #expect(limiter.admit("192.0.2.1") != nil)
            clock.advance(.milliseconds(50))
        }
        clock.advance(.seconds(5))
        #expect(limiter.admit("192.0.2.1") == nil, "admitted 10 s after the last admission despite 100 refusals")
    }

    @Test func addressesHaveTheirOwnBuckets() throws {
        let clock = TestClock()
        let limiter = try Self.limiter("2/h", clock: clock)
        #expect(limiter.admit("192.0.2.1") == nil)
        #expect(limiter.admit("192.0.2.1") == nil)
        #expect(limiter.admit("192.0.2.1") != nil)
        #expect(limiter.admit("2001:db8::1") == nil, "another client is not held up")
    }

    @Test func aLongIdleBucketIsFullAgainButNeverFuller() throws {
        let clock = TestClock()
        let limiter = try Self.limiter("3/m", clock: clock)
        for _ in 0..<3 { #expect(limiter.admit("192.0.2.1") == nil) }
        clock.advance(.seconds(3600))
        for _ in 0..<3 { #expect(limiter.admit("192.0.2.1") == nil) }
        #expect(limiter.admit("192.0.2.1") != nil)
    }

    @Test func memoryStaysBoundedUnderAFloodOfAddresses() throws {
        let clock = TestClock()
        let limiter = try Self.limiter("5/m", clock: clock, maximumAddresses: 64)
        for index in 0..<20_000 {
            #expect(limiter.admit("10.\(index >> 16).\((index >> 8) & 255).\(index & 255)") == nil)
            if index % 100 == 0 { clock.advance(.milliseconds(10)) }
        }
        #expect(limiter.trackedAddresses <= 64)
        #expect(limiter.admit(String(repeating: "x", count: 100_000)) == nil, "a huge key is cut, not stored whole")
    }

    @Test func evictionKeepsRecentlyLimitedAddressesLimited() throws {
        let clock = TestClock()
        let limiter = try Self.limiter("1/h", clock: clock, maximumAddresses: 16)
        #expect(limiter.admit("attacker") == nil)
        #expect(limiter.admit("attacker") != nil)
        // Old, refilled entries for other addresses make room first.
        for index in 0..<15 { _ = limiter.admit("old-\(index)") }
        clock.advance(.seconds(7200))
        #expect(limiter.admit("attacker") == nil, "refilled after an hour")
        for index in 0..<15 { #expect(limiter.admit("new-\(index)") == nil) }
        #expect(limiter.admit("attacker") != nil, "its recent use survived the eviction of refilled buckets")
    }

    @Test func concurrentAdmissionsGrantExactlyTheBurst() async throws {
        let clock = TestClock()
        let limiter = try Self.limiter("50/h", clock: clock)
        let admitted = await withTaskGroup(of: Bool.self) { group in
            for _ in 0..<500 { group.addTask { limiter.admit("192.0.2.9") == nil } }
            var count = 0
            for await granted in group where granted { count += 1 }
            return count
        }
        #expect(admitted == 50)
    }
}
