import StockroomCore
import Synchronization

/// Who wins between a checkout and its deadline: exactly one of `checkout()` and `abandon()` returns
/// true, so a connection that arrives after the caller gave up runs nothing.
final class CheckoutRace: Sendable {
    private let state = Atomic<UInt8>(0)  // 0 waiting, 1 checkedOut, 2 abandoned

    func checkout() -> Bool {
        state.compareExchange(expected: 0, desired: 1, ordering: .acquiringAndReleasing).exchanged
    }

    func abandon() -> Bool {
        state.compareExchange(expected: 0, desired: 2, ordering: .acquiringAndReleasing).exchanged
    }

    var isCheckedOut: Bool { state.load(ordering: .acquiring) == 1 }
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

/// One ledger call's answer, given once by whichever comes first: the call itself, its checkout
/// deadline, its call deadline, its connection's closing, or the caller's cancellation.
final class PooledCall<Value: Sendable>: Sendable {
    /// What `checkout` answers, or `LedgerUnavailable` once `timeout` passes before it calls
    /// `checkout(cutting:isClosed:)` (a checkout that comes later must see false and run nothing), or
    /// once `callTimeout` passes after it, or soon after its connection closed. The checkout runs in a task of its own and the caller never
    /// waits for it past a deadline. A task group must wait for its cancelled checkout, and
    /// postgres-nio 1.33.2's `ConnectionRequest.leaseConnection` misses a cancellation that comes
    /// between its check and its queueing: the checkout, and the request behind it, would then wait
    /// for as long as the database refused connections. The caller's cancellation reaches the
    /// checkout, and the call once it runs.
    static func answer(
        within timeout: Duration, callTimeout: Duration? = nil, _ checkout: @escaping @Sendable (PooledCall<Value>) async throws -> Value
    ) async throws -> Value {
        let call = PooledCall<Value>(callTimeout: callTimeout)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                call.wait(continuation)
                call.run(
                    work: Task {
                        do {
                            call.answer(.success(try await checkout(call)))
                        } catch {
                            call.answer(.failure(error))
                        }
                    },
                    timer: Self.after(timeout) { call.abandon(LedgerUnavailable(reason: "no database connection within \(timeout)")) })
            }
        } onCancel: {
            call.cancel()
        }
    }

    private let race = CheckoutRace()
    private let callTimeout: Duration?

    private init(callTimeout: Duration?) {
        self.callTimeout = callTimeout
    }

    private struct State {
        /// Nil once answered (`wait` sets it before anything can answer).
        var continuation: CheckedContinuation<Value, any Error>?
        var work: Task<Void, Never>?
        /// The checkout's deadline, then the call's.
        var timer: Task<Void, Never>?
        /// Cuts the checkedOut connection: set while the call runs on it.
        var cut: (@Sendable () -> Void)?
        var cancelled = false
    }

    private let state = Mutex(State())

    /// The checkout has a connection: true when it came before the deadline, and the call may run
    /// on it; false when the caller was answered already, and it must run nothing. A call still
    /// running at `callTimeout` (when set), or when a check (every `closedCheck`) finds
    /// `isClosed`, is cut: the caller is answered `LedgerUnavailable`, `cut` runs (closing the
    /// connection fails what waits on it, and the pool drops it) and the call is cancelled
    /// (postgres-nio's queries do not hear that: one it never answers stays suspended). A
    /// connection that stopped answering (a half-open TCP connection, a stalled server)
    /// otherwise held the call for the kernel's retransmission timeout, some fifteen minutes; and
    /// a query on a connection that closed under it (postgres-nio 1.33.2, when the database
    /// restarts) was never answered at all.
    func checkout(cutting cut: @escaping @Sendable () -> Void = {}, isClosed: @escaping @Sendable () -> Bool = { false }) -> Bool {
        guard race.checkout() else { return false }
        let timer = Self.watch(callTimeout, isClosed) { reason in self.overrun(reason) }
        let (checkoutTimer, answered) = state.withLock { state in
            defer {
                state.timer = timer
                state.cut = cut
            }
            return (state.timer, state.continuation == nil)
        }
        checkoutTimer?.cancel()
        if answered { timer.cancel() }
        return true
    }

    /// The call is done with its connection (before the pool has it back): it is no longer cut.
    func release() {
        state.withLock { $0.cut = nil }
    }

    /// The caller waits with `continuation`; set before the tasks that answer it exist, so that
    /// no answer can come first and be lost.
    private func wait(_ continuation: CheckedContinuation<Value, any Error>) {
        state.withLock { $0.continuation = continuation }
    }

    /// `work` (the checkout and the call) and `timer` (the deadline) run. A call answered already
    /// stops its timer; a caller cancelled already is answered now.
    private func run(work: Task<Void, Never>, timer: Task<Void, Never>) {
        let (answered, cancelled) = state.withLock { state in
            state.work = work
            if state.timer == nil { state.timer = timer }  // else the checkout came first and set the call's
            return (state.continuation == nil, state.cancelled)
        }
        if answered || race.isCheckedOut { timer.cancel() }
        if cancelled { cancel() }
    }

    /// The answer, when none was given yet (true then); later ones are dropped. The deadline's timer stops.
    @discardableResult
    private func answer(_ result: Result<Value, any Error>) -> Bool {
        let (continuation, timer) = state.withLock { state in
            defer { state.continuation = nil }
            return (state.continuation, state.timer)
        }
        timer?.cancel()
        continuation?.resume(with: result)
        return continuation != nil
    }

    /// The deadline passed: when no connection was checkedOut yet, the checkout is called off and the
    /// caller answered with `failure`; otherwise the call already runs and answers itself.
    private func abandon(_ failure: any Error) {
        guard race.abandon() else { return }
        answer(.failure(failure))  // before the checkout hears its cancellation and answers for itself
        state.withLock { $0.work }?.cancel()
    }

    /// The call ran too long on its connection (`reason`): the caller is answered, the connection
    /// cut (under the lock, so that a call releasing it meanwhile waits and its connection is not
    /// cut under the next caller) and the call cancelled.
    private func overrun(_ reason: String) {
        guard answer(.failure(LedgerUnavailable(reason: reason))) else { return }
        let work = state.withLock { state in
            state.cut?()
            state.cut = nil
            return state.work
        }
        work?.cancel()
    }

    /// The caller was cancelled: so is the checkout, or the call on its connection.
    private func cancel() {
        let work = state.withLock { state in
            state.cancelled = true
            return state.work
        }
        guard let work else { return }  // `run` comes back here
        // Called off before the checkout can win (answered before the checkout hears it and answers
        // for itself), or the call, already running, is cancelled and answers.
        if race.abandon() { answer(.failure(CancellationError())) }
        work.cancel()
    }

    /// How often a running call checks whether its connection closed. postgres-nio fails the
    /// query that runs when its connection closes, but not one written just after the close:
    /// that one is never answered.
    static var closedCheck: Duration { .seconds(1) }

    /// A task that, unless cancelled first, runs `action` with why once `limit` (when set)
    /// passes, or once a check (every `closedCheck`) finds `isClosed`.
    private static func watch(
        _ limit: Duration?, _ isClosed: @escaping @Sendable () -> Bool, _ action: @escaping @Sendable (String) -> Void
    ) -> Task<Void, Never> {
        Task {
            var waited = Duration.zero
            while limit.map({ waited < $0 }) ?? true {
                let step = limit.map { min($0 - waited, closedCheck) } ?? closedCheck
                guard (try? await Task.sleep(for: step)) != nil else { return }
                waited += step
                if limit.map({ waited < $0 }) ?? true, isClosed() { return action("the database connection closed under the call") }
            }
            action("no answer from the database within \(limit ?? waited)")
        }
    }

    /// A task that runs `action` after `delay`, unless cancelled first.
    private static func after(_ delay: Duration, _ action: @escaping @Sendable () -> Void) -> Task<Void, Never> {
        Task {
            guard (try? await Task.sleep(for: delay)) != nil else { return }
            action()
        }
    }
}
