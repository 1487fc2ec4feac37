import Synchronization

/// Bounds concurrent content streams: `--max-downloads` in total and
/// `--max-downloads-per-transaction` for one transaction, so that neither many clients nor one
/// shared token can tie up every file descriptor and buffer.
///
/// `acquire` hands out a `DownloadSlot` or nil when full (the route answers 429 with
/// `Retry-After`); the slot goes back exactly once, when the body finishes or fails.
public final class DownloadSlots: Sendable {
    /// Concurrent streams in total.
    public let total: Int
    /// Concurrent streams of one transaction.
    public let perTransaction: Int
    private let state = Mutex(Counts())

    private struct Counts {
        var inUse = 0
        /// Only transactions with a slot out: never more entries than `total`.
        var byTransaction: [String: Int] = [:]
    }

    /// Limits below 1 are raised to 1.
    public init(total: Int, perTransaction: Int) {
        self.total = max(1, total)
        self.perTransaction = max(1, perTransaction)
    }

    /// A slot for one stream of `transactionID`, or nil when the total or the transaction's share
    /// is taken.
    public func acquire(transactionID: String) -> DownloadSlot? {
        let granted = state.withLock { counts -> Bool in
            let held = counts.byTransaction[transactionID, default: 0]
            guard counts.inUse < total, held < perTransaction else { return false }
            counts.inUse += 1
            counts.byTransaction[transactionID] = held + 1
            return true
        }
        return granted ? DownloadSlot(slots: self, transactionID: transactionID) : nil
    }

    /// Streams running now.
    public var inUse: Int { state.withLock { $0.inUse } }

    /// Streams of `transactionID` running now.
    public func inUse(transactionID: String) -> Int { state.withLock { $0.byTransaction[transactionID, default: 0] } }

    fileprivate func release(transactionID: String) {
        state.withLock { counts in
            counts.inUse -= 1
            let held = counts.byTransaction[transactionID, default: 1] - 1
            counts.byTransaction[transactionID] = held > 0 ? held : nil
        }
    }
}

/// One stream's share of `DownloadSlots`. `release()` returns it (later calls do nothing); a slot
/// dropped without `release()` returns itself when freed, so a path that forgets cannot leak it.
public final class DownloadSlot: Sendable {
    private let slots: DownloadSlots
    /// The transaction whose stream holds the slot.
    public let transactionID: String
    private let released = Atomic(false)

    fileprivate init(slots: DownloadSlots, transactionID: String) {
        self.slots = slots
        self.transactionID = transactionID
    }

    /// Gives the slot back; only the first call counts.
    public func release() {
        guard !released.exchange(true, ordering: .acquiringAndReleasing) else { return }
        slots.release(transactionID: transactionID)
    }

    deinit { release() }
}
