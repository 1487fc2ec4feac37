import Synchronization

/// Upstream answers kept for a short interval, by key (a receipt's digest, a transaction ID),
/// so that a resumed download or a repeated lookup does not call Apple again.
///
/// Bounded: at capacity, expired entries go first, then everything.
final class VerdictCache<Value: Sendable>: Sendable {
    /// How long an answer is reused; zero turns the cache off.
    let interval: Duration
    let capacity: Int
    private let entries = Mutex<[String: (value: Value, expires: ContinuousClock.Instant)]>([:])

    init(interval: Duration, capacity: Int = 10_000) {
        self.interval = interval
        self.capacity = capacity
    }

    /// The answer stored under `key`, unless it has expired.
    func value(for key: String) -> Value? {
        guard interval > .zero else { return nil }
        return entries.withLock { entries in
            guard let entry = entries[key] else { return nil }
            guard entry.expires > .now else {
                entries[key] = nil
                return nil
            }
            return entry.value
        }
    }

    /// Keeps `value` under `key` for the interval.
    func store(_ value: Value, for key: String) {
        guard interval > .zero else { return }
        let expires = ContinuousClock.now + interval
        entries.withLock { entries in
            if entries.count >= capacity, entries[key] == nil {
                let now = ContinuousClock.now
                entries = entries.filter { $0.value.expires > now }
                if entries.count >= capacity { entries.removeAll() }
            }
            entries[key] = (value, expires)
        }
    }
}
