import Testing
@testable import StockroomServer

/// Concurrent content streams: bounded in total, per purchase and per client, every slot
/// returned once. How the download routes give slots back is shown through a live server in
/// `PressureSlotTests`.
@Suite struct LimitsDownloadSlotsTests {
    @Test func theTotalIsABound() throws {
        let slots = DownloadSlots(total: 3, perPurchase: 3, perClient: 3)
        let held = try (1...3).map { try #require(slots.acquire(purchase: "t\($0)", client: "c\($0)")) }
        #expect(slots.acquire(purchase: "t4", client: "c4") == nil)
        #expect(slots.inUse == 3)
        held[0].release()
        #expect(slots.acquire(purchase: "t4", client: "c4") != nil)
    }

    @Test func onePurchaseGetsItsShareOnlyWhicheverClientsAsk() throws {
        let slots = DownloadSlots(total: 10, perPurchase: 2, perClient: 10)
        let first = try #require(slots.acquire(purchase: "1000", client: "a"))
        let second = try #require(slots.acquire(purchase: "1000", client: "b"))
        #expect(slots.acquire(purchase: "1000", client: "c") == nil)
        #expect(slots.acquire(purchase: "2000", client: "a") != nil, "another purchase is not held up")
        second.release()
        #expect(slots.inUse(purchase: "1000") == 1)
        withExtendedLifetime(first) {}
    }

    @Test func oneClientGetsItsShareOnlyWhicheverPurchasesItNames() throws {
        let slots = DownloadSlots(total: 10, perPurchase: 10, perClient: 2)
        let held = try ["1", "2"].map { try #require(slots.acquire(purchase: $0, client: "2001:db8:1:2::/64")) }
        #expect(slots.acquire(purchase: "3", client: "2001:db8:1:2::/64") == nil)
        #expect(slots.acquire(purchase: "3", client: "2001:db8:1:3::/64") != nil, "another client is not held up")
        #expect(slots.inUse(client: "2001:db8:1:2::/64") == 2)
        withExtendedLifetime(held) {}
    }

    @Test func aSlotIsReturnedOnceHoweverOftenItIsReleased() throws {
        let slots = DownloadSlots(total: 2, perPurchase: 2, perClient: 2)
        let slot = try #require(slots.acquire(purchase: "1", client: "a"))
        let other = try #require(slots.acquire(purchase: "1", client: "a"))
        slot.release()
        slot.release()
        slot.release()
        #expect(slots.inUse == 1, "a repeated release does not free another stream's slot")
        #expect(slots.inUse(purchase: "1") == 1)
        #expect(slots.inUse(client: "a") == 1)
        withExtendedLifetime(other) {}
    }

    @Test func aDroppedSlotIsReturned() {
        let slots = DownloadSlots(total: 1, perPurchase: 1, perClient: 1)
        do {
            _ = slots.acquire(purchase: "1", client: "a")
        }
        #expect(slots.inUse == 0)
        #expect(slots.acquire(purchase: "1", client: "a") != nil)
    }

    @Test func concurrentStreamsNeverExceedTheLimitsAndAllReturn() async {
        let slots = DownloadSlots(total: 8, perPurchase: 3, perClient: 4)
        let peaks = await withTaskGroup(of: (Int, Int, Int).self) { group in
            for index in 0..<2_000 {
                group.addTask {
                    let purchase = "t\(index % 5)", client = "c\(index % 3)"
                    guard let slot = slots.acquire(purchase: purchase, client: client) else { return (0, 0, 0) }
                    let seen = (slots.inUse, slots.inUse(purchase: purchase), slots.inUse(client: client))
                    await Task.yield()
                    slot.release()
                    return seen
                }
            }
            var peak = (0, 0, 0)
            for await seen in group { peak = (max(peak.0, seen.0), max(peak.1, seen.1), max(peak.2, seen.2)) }
            return peak
        }
        #expect(peaks.0 <= 8)
        #expect(peaks.1 <= 3)
        #expect(peaks.2 <= 4)
        #expect(peaks.0 >= 1)
        #expect(slots.inUse == 0)
        for index in 0..<5 { #expect(slots.inUse(purchase: "t\(index)") == 0) }
        for index in 0..<3 { #expect(slots.inUse(client: "c\(index)") == 0) }
    }
}
