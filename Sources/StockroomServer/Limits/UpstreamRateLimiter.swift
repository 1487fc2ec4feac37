import StockroomEntitlement
import Synchronization

/// A token bucket per client address for the requests that reach the App Store
/// (`--upstream-rate`): a burst of `rate.requests`, then one request each
/// `rate.period / rate.requests`. Nothing is kept for an address whose bucket has refilled, and
/// at most `maximumAddresses` buckets are kept at all, so memory stays bounded under a flood of
/// addresses.
public final class UpstreamRateLimiter: Sendable {
    /// The allowance per address.
    public let rate: UpstreamRate
    /// How many addresses are tracked at most; past it, refilled buckets go, then the oldest.
    public let maximumAddresses: Int
    private let now: @Sendable () -> Duration
    private let buckets = Mutex([String: Bucket]())

    private struct Bucket {
        var tokens: Double
        var updated: Duration
    }

    /// `now` is a monotonic clock as time since any fixed origin; tests inject their own.
    public init(
        rate: UpstreamRate, maximumAddresses: Int = 65_536, now: @escaping @Sendable () -> Duration = UpstreamRateLimiter.monotonicNow
    ) {
        self.rate = rate
        self.maximumAddresses = max(16, maximumAddresses)
        self.now = now
    }

    /// Time since this process's first look at the clock, on `ContinuousClock`.
    public static func monotonicNow() -> Duration { ContinuousClock.now - origin }
    private static let origin = ContinuousClock.now

    /// Nil when `address` may make one more upstream request now (and counts it); otherwise how
    /// long until it may (for `Retry-After`), counting nothing.
    public func admit(_ address: String) -> Duration? {
        // An address is at most 45 characters; a longer key (a forged header) is cut, not stored whole.
        let address = address.utf8.count > 64 ? String(decoding: address.utf8.prefix(64), as: UTF8.self) : address
        let now = now()
        let capacity = Double(rate.requests)
        let perSecond = capacity / Self.seconds(rate.period)
        return buckets.withLock { buckets -> Duration? in
            var bucket = buckets[address] ?? Bucket(tokens: capacity, updated: now)
            let elapsed = max(0, Self.seconds(now - bucket.updated))
            bucket.tokens = min(capacity, bucket.tokens + elapsed * perSecond)
            bucket.updated = now
            guard bucket.tokens >= 1 else {
                buckets[address] = bucket
                let wait = (1 - bucket.tokens) / perSecond
                return .milliseconds(Int64(min(wait, Self.seconds(rate.period)) * 1000 + 1))
            }
            bucket.tokens -= 1
            if buckets[address] == nil, buckets.count >= maximumAddresses { Self.evict(&buckets, now: now, refill: rate.period) }
            buckets[address] = bucket
            return nil
        }
    }

    /// Addresses tracked now (tests; bounded by `maximumAddresses`).
    public var trackedAddresses: Int { buckets.withLock { $0.count } }

    /// Drops buckets that have refilled since (as good as absent); if that frees less than a
    /// quarter, the least recently used half goes too, which only errs towards admitting.
    private static func evict(_ buckets: inout [String: Bucket], now: Duration, refill: Duration) {
        let limit = buckets.count
        buckets = buckets.filter { now - $0.value.updated < refill }
        guard buckets.count > limit * 3 / 4 else { return }
        let newestFirst = buckets.sorted { $0.value.updated > $1.value.updated }
        buckets = Dictionary(uniqueKeysWithValues: newestFirst.prefix(limit / 2).map { ($0.key, $0.value) })
    }

    private static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}

/// The entitlement component asks it before each call that would reach the App Store.
extension UpstreamRateLimiter: UpstreamGate {}
