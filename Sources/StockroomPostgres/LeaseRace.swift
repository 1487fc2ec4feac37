import StockroomCore
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

/// One ledger call's answer, given once by whichever comes first: the call itself, its lease
/// deadline, or the caller's cancellation before a connection was leased.
final class LeaseCall<Value: Sendable>: Sendable {
    /// What `lease` answers, or `LedgerUnavailable` once `timeout` passes before it calls
    /// `race.lease()` (a lease that comes later must see `lease()` false and run nothing). The
    /// lease runs in a task of its own and the caller never waits for it past the deadline. A
    /// task group must wait for its cancelled lease, and postgres-nio 1.33.2's
    /// `ConnectionRequest.leaseConnection` misses a cancellation that comes between its check and
    /// its queueing: the lease, and the request behind it, would then wait for as long as the
    /// database refused connections. The caller's cancellation reaches the lease, and the call
    /// once it runs.
    static func answer(within timeout: Duration, _ lease: @escaping @Sendable (LeaseRace) async throws -> Value) async throws -> Value {
        let call = LeaseCall<Value>()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                call.wait(continuation)
                call.run(
                    work: Task {
                        do {
                            call.answer(.success(try await lease(call.race)))
                        } catch {
                            call.answer(.failure(error))
                        }
                    },
                    timer: Task {
                        guard (try? await Task.sleep(for: timeout)) != nil else { return }
                        call.abandon(LedgerUnavailable(reason: "no database connection within \(timeout)"))
                    })
            }
        } onCancel: {
            call.cancel()
        }
    }

    let race = LeaseRace()

    private struct State {
        /// Nil once answered (`wait` sets it before anything can answer).
        var continuation: CheckedContinuation<Value, any Error>?
        var work: Task<Void, Never>?
        var timer: Task<Void, Never>?
        var cancelled = false
    }

    private let state = Mutex(State())

    /// The caller waits with `continuation`; set before the tasks that answer it exist, so that
    /// no answer can come first and be lost.
    func wait(_ continuation: CheckedContinuation<Value, any Error>) {
        state.withLock { $0.continuation = continuation }
    }

    /// `work` (the lease and the call) and `timer` (the deadline) run. A call answered already
    /// stops its timer; a caller cancelled already is answered now.
    func run(work: Task<Void, Never>, timer: Task<Void, Never>) {
        let (answered, cancelled) = state.withLock { state in
            state.work = work
            state.timer = timer
            return (state.continuation == nil, state.cancelled)
        }
        if answered { timer.cancel() }
        if cancelled { cancel() }
    }

    /// The answer; later ones are dropped. The deadline's timer stops.
    func answer(_ result: Result<Value, any Error>) {
        let (continuation, timer) = state.withLock { state in
            defer { state.continuation = nil }
            return (state.continuation, state.timer)
        }
        timer?.cancel()
        continuation?.resume(with: result)
    }

    /// The deadline passed: when no connection was leased yet, the lease is called off and the
    /// caller answered with `failure`; otherwise the call already runs and answers itself.
    func abandon(_ failure: any Error) {
        guard race.abandon() else { return }
        answer(.failure(failure))  // before the lease hears its cancellation and answers for itself
        state.withLock { $0.work }?.cancel()
    }

    /// The caller was cancelled: so is the lease, or the call on its connection.
    func cancel() {
        let work = state.withLock { state in
            state.cancelled = true
            return state.work
        }
        guard let work else { return }  // `run` comes back here
        // Called off before the lease can win (answered before the lease hears it and answers
        // for itself), or the call, already running, is cancelled and answers.
        if race.abandon() { answer(.failure(CancellationError())) }
        work.cancel()
    }
}
