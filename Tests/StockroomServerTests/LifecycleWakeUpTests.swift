import Testing
@testable import StockroomServer

/// The sender's wake-up: a bounded wait that a signal cuts short, time after time.
@Suite struct LifecycleWakeUpTests {
    static func timed(_ body: () async -> Void) async -> Duration {
        let start = ContinuousClock.now
        await body()
        return ContinuousClock.now - start
    }

    @Test func everyWaitWithoutASignalLastsItsLimit() async {
        let wakeUps = WakeUps()
        // A timeout once ended the stream behind the waits, and every later wait returned at once.
        for round in 1...4 {
            let waited = await Self.timed { await wakeUps.wait(upTo: .milliseconds(150)) }
            #expect(waited >= .milliseconds(150), "round \(round) returned after \(waited)")
        }
    }

    @Test func aSignalEndsTheWaitEarlyAndOneSentBeforeIsKept() async throws {
        let wakeUps = WakeUps()
        wakeUps.signal()
        wakeUps.signal()
        #expect(await Self.timed { await wakeUps.wait(upTo: .seconds(60)) } < .seconds(30), "a pending signal returns at once")
        #expect(await Self.timed { await wakeUps.wait(upTo: .milliseconds(150)) } >= .milliseconds(150), "two signals are kept as one")
        let signaller = Task {
            try await Task.sleep(for: .milliseconds(100))
            wakeUps.signal()
        }
        let waited = await Self.timed { await wakeUps.wait(upTo: .seconds(60)) }
        #expect(waited >= .milliseconds(100) && waited < .seconds(30), "woken by the signal after \(waited)")
        try await signaller.value
        #expect(
            await Self.timed { await wakeUps.wait(upTo: .milliseconds(150)) } >= .milliseconds(150), "and the next wait lasts its limit")
    }

    @Test func aCancelledWaiterReturnsAtOnce() async {
        let wakeUps = WakeUps()
        let waiter = Task { await Self.timed { await wakeUps.wait(upTo: .seconds(60)) } }
        try? await Task.sleep(for: .milliseconds(50))
        waiter.cancel()
        #expect(await waiter.value < .seconds(30))
    }
}
