import Testing
@testable import StockroomServer

/// Concurrent content streams: bounded in total and per transaction, every slot returned once.
@Suite struct LimitsDownloadSlotsTests {
    @Test func theTotalIsABound() throws {
        let slots = DownloadSlots(total: 3, perTransaction: 3)
        let held = try (1...3).map { try #require(slots.acquire(transactionID: "t\($0)")) }
        #expect(slots.acquire(transactionID: "t4") == nil)
        #expect(slots.inUse == 3)
        held[0].release()
        #expect(slots.acquire(transactionID: "t4") != nil)
    }

    @Test func oneTransactionGetsItsShareOnly() throws {
        let slots = DownloadSlots(total: 10, perTransaction: 2)
        let first = try #require(slots.acquire(transactionID: "1000"))
        let second = try #require(slots.acquire(transactionID: "1000"))
        #expect(slots.acquire(transactionID: "1000") == nil)
        #expect(slots.acquire(transactionID: "2000") != nil, "another transaction is not held up")
        second.release()
        #expect(slots.inUse(transactionID: "1000") == 1)
        withExtendedLifetime(first) {}
    }

    @Test func aSlotIsReturnedOnceHoweverOftenItIsReleased() throws {
        let slots = DownloadSlots(total: 2, perTransaction: 2)
        let slot = try #require(slots.acquire(transactionID: "1"))
        let other = try #require(slots.acquire(transactionID: "1"))
        slot.release()
        slot.release()
        slot.release()
        #expect(slots.inUse == 1, "a repeated release does not free another stream's slot")
        #expect(slots.inUse(transactionID: "1") == 1)
        withExtendedLifetime(other) {}
    }

    @Test func aDroppedSlotIsReturned() {
        let slots = DownloadSlots(total: 1, perTransaction: 1)
        do {
            _ = slots.acquire(transactionID: "1")
        }
        #expect(slots.inUse == 0)
        #expect(slots.acquire(transactionID: "1") != nil)
    }

    struct BodyFailed: Error {}

    /// The route's shape: release in `defer` around the body, which finishes or throws.
    func stream(_ slots: DownloadSlots, failing: Bool) async throws {
        guard let slot = slots.acquire(transactionID: "1") else { return }
        defer { slot.release() }
        try await Task.sleep(for: .milliseconds(1))
        if failing { throw BodyFailed() }
    }

    @Test func aFinishedOrFailedBodyReturnsItsSlot() async throws {
        let slots = DownloadSlots(total: 1, perTransaction: 1)
        try await stream(slots, failing: false)
        #expect(slots.inUse == 0)
        await #expect(throws: BodyFailed.self) { try await stream(slots, failing: true) }
        #expect(slots.inUse == 0)
        let cancelled = Task { try await stream(slots, failing: false) }
        cancelled.cancel()
        _ = await cancelled.result
        #expect(slots.inUse == 0)
    }

    @Test func concurrentStreamsNeverExceedTheLimitsAndAllReturn() async {
        let slots = DownloadSlots(total: 8, perTransaction: 3)
        let peaks = await withTaskGroup(of: (Int, Int).self) { group in
            for index in 0..<2_000 {
                group.addTask {
                    guard let slot = slots.acquire(transactionID: "t\(index % 5)") else { return (0, 0) }
                    let seen = (slots.inUse, slots.inUse(transactionID: "t\(index % 5)"))
                    await Task.yield()
                    slot.release()
                    return seen
                }
            }
            var peak = (0, 0)
            for await seen in group { peak = (max(peak.0, seen.0), max(peak.1, seen.1)) }
            return peak
        }
        #expect(peaks.0 <= 8)
        #expect(peaks.1 <= 3)
        #expect(peaks.0 >= 1)
        #expect(slots.inUse == 0)
        for index in 0..<5 { #expect(slots.inUse(transactionID: "t\(index)") == 0) }
    }
}
