import Foundation
import StockroomTestSupport
import StockroomCore
import Synchronization
import Testing
@testable import StockroomPostgres

/// A ledger call's wait for a pooled connection (`PooledCall.answer(within:callTimeout:)`): it
/// answers at its deadline whatever the pool does, never loses an answer that comes at once, and
/// a connection that comes too late runs nothing; a call that runs past its own deadline is
/// answered then and its connection cut.
@Suite struct PooledCallTests {
    /// Counts what ran, from any task.
    final class Count: Sendable {
        private let value = Atomic<Int>(0)
        func add() { value.add(1, ordering: .relaxed) }
        var total: Int { value.load(ordering: .relaxed) }
    }

    @Test func aLeaseThatIgnoresItsCancellationStillEndsAtTheDeadline() async throws {
        let start = ContinuousClock.now
        let ran = Count()
        await #expect(throws: LedgerUnavailable.self) {
            try await PooledCall<Int>.answer(within: .milliseconds(300)) { race in
                // The cancellation is ignored: only the deadline can answer.
                _ = try? await Task.sleep(for: .seconds(3_600))
                if race.checkout() { ran.add() }
                return 1
            }
        }
        // A task group waited the hour; the call answers at 300 ms (the bound leaves room for a
        // full suite starting on two busy cores, which has delayed every timer here by 12 s).
        #expect(ContinuousClock.now - start < .seconds(60))
        #expect(ran.total == 0)
    }

    @Test func aConnectionThatComesAfterTheDeadlineRunsNothing() async throws {
        let ran = Count()
        let late = Count()
        await #expect(throws: LedgerUnavailable.self) {
            try await PooledCall<Int>.answer(within: .milliseconds(100)) { race in
                _ = try? await Task.sleep(for: .milliseconds(400))  // a connection that comes late all the same
                guard race.checkout() else {
                    late.add()
                    throw CancellationError()
                }
                ran.add()
                return 1
            }
        }
        try await Task.sleep(for: .milliseconds(600))
        #expect(ran.total == 0, "the statement never ran")
        #expect(late.total == 1, "the checkout came back and was given up")
    }

    /// Leases that answer at once, 20,000 of them, eight at a time, each answered with its own
    /// value. (An answer that came before the caller's continuation was stored was dropped and
    /// its call waited for good; `answer(within:)` now stores it before the checkout exists. That
    /// race needs a preempted thread, and this run did not catch it when it was put back.)
    @Test func anAnswerThatComesAtOnceIsNeverLost() async throws {
        let answered = Count()
        let finished: Void? = await within(.seconds(120)) {
            await withTaskGroup(of: Void.self) { group in
                for task in 0..<8 {
                    group.addTask {
                        for index in 0..<2_500 {
                            let value = try? await PooledCall<Int>.answer(within: .seconds(30)) { race in
                                guard race.checkout() else { throw CancellationError() }
                                return task * 10_000 + index
                            }
                            if value == task * 10_000 + index { answered.add() }
                        }
                    }
                }
            }
        }
        #expect(finished != nil, "every call answered within two minutes")
        #expect(answered.total == 20_000)
    }

    @Test func theCallersCancellationEndsAWaitingLease() async throws {
        let ran = Count()
        let start = ContinuousClock.now
        let call = Task {
            try await PooledCall<Int>.answer(within: .seconds(600)) { race in
                _ = try? await Task.sleep(for: .seconds(3_600))  // a checkout that ignores its cancellation
                if race.checkout() { ran.add() }
                return 1
            }
        }
        try await Task.sleep(for: .milliseconds(100))
        call.cancel()
        await #expect(throws: CancellationError.self) { try await call.value }
        #expect(ContinuousClock.now - start < .seconds(60), "not the checkout timeout of 600 s")
        #expect(ran.total == 0)
    }

    @Test func anErrorFromTheCallIsItsAnswer() async throws {
        struct Refused: Error {}
        await #expect(throws: Refused.self) {
            try await PooledCall<Int>.answer(within: .seconds(30)) { race in
                #expect(race.checkout())
                throw Refused()
            }
        }
    }

    /// A call that checked out its connection and then never answers (its statement's cancellation is
    /// not heard either): why it was answered, how long that took, and whether its connection
    /// was cut once, just after the answer.
    static func stuckCall(callTimeout: Duration, isClosed: @escaping @Sendable () -> Bool) async -> (
        reason: String?, took: Duration, cut: Bool
    ) {
        let cut = Count()
        let start = ContinuousClock.now
        let error = await #expect(throws: LedgerUnavailable.self) {
            try await PooledCall<Int>.answer(within: .seconds(30), callTimeout: callTimeout) { call in
                guard call.checkout(cutting: { cut.add() }, isClosed: isClosed) else { throw CancellationError() }
                defer { call.release() }
                _ = try? await Task.sleep(for: .seconds(3_600))
                return 1
            }
        }
        let took = ContinuousClock.now - start
        return (error?.reason, took, await settles { cut.total == 1 })
    }

    @Test func aCallThatRunsPastItsDeadlineIsAnsweredThenAndItsConnectionCut() async throws {
        let call = await Self.stuckCall(callTimeout: .milliseconds(200), isClosed: { false })
        #expect(call.reason == "no answer from the database within 0.2 seconds")
        #expect(call.took < .seconds(60), "answered at 200 ms, not after the hour (room for busy cores)")
        #expect(call.cut, "the connection was closed")
    }

    @Test func aCallWhoseConnectionClosedUnderItIsAnsweredWithinAboutASecond() async throws {
        let start = ContinuousClock.now
        let call = await Self.stuckCall(callTimeout: .seconds(600), isClosed: { ContinuousClock.now - start > .milliseconds(100) })
        #expect(call.reason == "the database connection closed under the call")
        #expect(call.took < .seconds(60), "about a second, not the call's 600 s (room for busy cores)")
        #expect(call.cut, "the connection was closed")
    }

    @Test func aCallThatAnsweredInTimeIsNeverCut() async throws {
        let cut = Count()
        for index in 0..<200 {
            let value = try await PooledCall<Int>.answer(
                within: .seconds(30), callTimeout: .seconds(1),
                { call in
                    guard call.checkout(cutting: { cut.add() }, isClosed: { true }) else { throw CancellationError() }
                    defer { call.release() }
                    return index
                })
            #expect(value == index)
        }
        try await Task.sleep(for: .milliseconds(1_500))  // every call's deadline, and its first check of its connection, has passed
        #expect(cut.total == 0, "the answer stopped each call's watch: nothing was cut after it")
    }

    /// Whether `condition` holds within five seconds (a cut comes just after the answer it follows).
    static func settles(_ condition: @escaping @Sendable () -> Bool) async -> Bool {
        await within(.seconds(5)) {
            while !condition() { try? await Task.sleep(for: .milliseconds(10)) }
            return true
        } ?? false
    }
}
