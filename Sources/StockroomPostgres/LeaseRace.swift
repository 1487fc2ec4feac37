import Synchronization

/// Who wins between a lease and its deadline: exactly one of `lease()` and `abandon()` returns
/// true, so a connection that arrives after the caller gave up runs nothing.
final class LeaseRace: Sendable {
    private let state = Atomic<UInt8>(0)  // 0 waiting, 1 leased, 2 abandoned

    func lease() -> Bool {
        state.compareExchange(expected: 0, desired: 1, ordering: .acquiringAndReleasing).exchanged
    }

    func abandon() -> Bool {
        state.compareExchange(expected: 0, desired: 2, ordering: .acquiringAndReleasing).exchanged
    }
}

/// Whether the pool's database is known lost: set by the first call that found it unavailable,
/// cleared by the first that reached it again; each returns true for the call that changed it.
final class Outage: Sendable {
    private let lostFlag = Atomic<Bool>(false)

    var isLost: Bool { lostFlag.load(ordering: .relaxed) }

    func lost() -> Bool {
        lostFlag.compareExchange(expected: false, desired: true, ordering: .relaxed).exchanged
    }

    func recovered() -> Bool {
        lostFlag.load(ordering: .relaxed) && lostFlag.compareExchange(expected: true, desired: false, ordering: .relaxed).exchanged
    }
}
