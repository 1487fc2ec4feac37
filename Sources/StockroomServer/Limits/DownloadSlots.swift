import Synchronization

/// Bounds concurrent content streams: `--max-downloads` in total, `--max-downloads-per-purchase`
/// for one purchase (its original transaction, so restores and renewals share it) and
/// `--max-downloads-per-client` for one client address (an IPv6 /64), so that neither many
/// clients, nor one purchase's tokens, nor one client's purchases tie up every stream.
///
/// `acquire` hands out a `DownloadSlot` or nil when full (the route answers 429 with
/// `Retry-After`); the slot goes back exactly once, when the body finishes or fails.
public final class DownloadSlots: Sendable {
    /// Concurrent streams in total.
    public let total: Int
    /// Concurrent streams of one purchase.
    public let perPurchase: Int
    /// Concurrent streams to one client.
    public let perClient: Int
    private let state = Mutex(Counts())

    private struct Counts {
        var inUse = 0
        /// Only keys with a slot out: never more entries than `total` each.
        var byPurchase: [String: Int] = [:]
        var byClient: [String: Int] = [:]
    }

    /// Limits below 1 are raised to 1.
    public init(total: Int, perPurchase: Int, perClient: Int) {
        self.total = max(1, total)
        self.perPurchase = max(1, perPurchase)
        self.perClient = max(1, perClient)
    }

    /// A slot for one stream of `purchase` (an original transaction ID) to `client`, or nil when
    /// the total, the purchase's share or the client's share is taken.
    public func acquire(purchase: String, client: String) -> DownloadSlot? {
        let granted = state.withLock { counts -> Bool in
            let purchaseHeld = counts.byPurchase[purchase, default: 0]
            let clientHeld = counts.byClient[client, default: 0]
            guard counts.inUse < total, purchaseHeld < perPurchase, clientHeld < perClient else { return false }
            counts.inUse += 1
            counts.byPurchase[purchase] = purchaseHeld + 1
            counts.byClient[client] = clientHeld + 1
            return true
        }
        return granted ? DownloadSlot(slots: self, purchase: purchase, client: client) : nil
    }

    /// Streams running now.
    public var inUse: Int { state.withLock { $0.inUse } }

    /// Streams of `purchase` running now.
    public func inUse(purchase: String) -> Int { state.withLock { $0.byPurchase[purchase, default: 0] } }

    /// Streams to `client` running now.
    public func inUse(client: String) -> Int { state.withLock { $0.byClient[client, default: 0] } }

    fileprivate func release(purchase: String, client: String) {
        state.withLock { counts in
            counts.inUse -= 1
            let purchaseHeld = counts.byPurchase[purchase, default: 1] - 1
            counts.byPurchase[purchase] = purchaseHeld > 0 ? purchaseHeld : nil
            let clientHeld = counts.byClient[client, default: 1] - 1
            counts.byClient[client] = clientHeld > 0 ? clientHeld : nil
        }
    }
}

/// One stream's share of `DownloadSlots`. `release()` returns it (later calls do nothing); a slot
/// dropped without `release()` returns itself when freed, so a path that forgets cannot leak it.
public final class DownloadSlot: Sendable {
    private let slots: DownloadSlots
    /// The purchase (original transaction ID) whose stream holds the slot.
    public let purchase: String
    /// The client address the slot counts against.
    public let client: String
    private let released = Atomic(false)

    fileprivate init(slots: DownloadSlots, purchase: String, client: String) {
        self.slots = slots
        self.purchase = purchase
        self.client = client
    }

    /// Gives the slot back; only the first call counts.
    public func release() {
        guard !released.exchange(true, ordering: .acquiringAndReleasing) else { return }
        slots.release(purchase: purchase, client: client)
    }

    deinit { release() }
}
