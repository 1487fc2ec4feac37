import Foundation

/// Takes each transaction from a `TransactionSource` and acts on it: every decision about a
/// StoreKit transaction is made here, where the Linux tests reach it.
///
/// - `.failed` → finished at once; `.purchasing`, `.deferred` → nothing.
/// - `.purchased`, `.restored` of a catalogue product → delivered; finished when the outcome
///   says so (delivered, revoked); kept unfinished and retried after `Retry-After` or the
///   backoff; after a stale receipt, delivered once more with a refreshed one.
/// - unverified → reported, left unfinished; a product not in the catalogue → left to the app.
/// - the same purchase again while it is handled, or after it was finished (StoreKit 2's
///   `updates` replays what `unfinished` lists; the app hands in its purchase result while
///   `updates` brings the same transaction) → dropped: each is delivered, finished and
///   reported once.
public final class TransactionQueue: Sendable {
    /// What happened to a transaction, for the app's interface and log.
    public enum Report: Sendable, Equatable {
        case finished(transactionID: String, outcome: String)
        /// Kept unfinished; delivered again after `after`.
        case retrying(transactionID: String, after: Duration, reason: String)
        /// Kept unfinished: the app decides (the outcome's reason).
        case needsDecision(transactionID: String, reason: OutcomeReason)
        case unverified(transactionID: String, reason: String)
        /// Not in the catalogue: not Stockroom's to deliver.
        case notInCatalogue(transactionID: String, productID: String)
        /// `.purchasing` or `.deferred`: nothing done.
        case waiting(transactionID: String)
    }

    private let delivery: Delivery
    private let productIDs: Set<String>?
    private let sleep: @Sendable (Duration) async throws -> Void
    private let continuation: AsyncStream<Report>.Continuation
    private let seen = Seen()
    /// Every report, in order.
    public let reports: AsyncStream<Report>

    /// - Parameters:
    ///   - productIDs: the catalogue's products (`Catalog.productIDs`); nil delivers any product.
    ///   - sleep: how a retry waits (the tests shorten it).
    public init(
        delivery: Delivery, productIDs: Set<String>? = nil,
        sleep: @escaping @Sendable (Duration) async throws -> Void = { try await Task.sleep(for: $0) }
    ) {
        self.delivery = delivery
        self.productIDs = productIDs
        self.sleep = sleep
        (reports, continuation) = AsyncStream<Report>.makeStream()
    }

    /// Ends `reports` (when the app, or a test, is done with this queue).
    public func finishReports() {
        continuation.finish()
    }

    /// Acts on every transaction of `source` until it ends or the task is cancelled; each
    /// purchase is delivered in its own child task, so several go at once.
    public func run(_ source: some TransactionSource) async {
        await withTaskGroup(of: Void.self) { group in
            for await transaction in source.transactions() {
                group.addTask { await self.handle(transaction, source: source) }
            }
        }
    }

    /// The decision for one transaction: what `run` does with each, and what the app calls with
    /// the transaction of a purchase it made (`StoreKit2Source.transaction(from:)` of
    /// `Product.purchase()`'s result). A transaction handled already is dropped.
    public func handle(_ transaction: StoreTransaction, source: some TransactionSource) async {
        let id = transaction.transactionID
        switch transaction.state {
        case .purchasing, .deferred:
            continuation.yield(.waiting(transactionID: id))
        case .failed:
            await transaction.finish()
            continuation.yield(.finished(transactionID: id, outcome: "failed"))
        case .unverified(let reason):
            continuation.yield(.unverified(transactionID: id, reason: reason))
        case .purchased(let purchase), .restored(let purchase):
            if let productIDs, !productIDs.contains(purchase.productID) {
                continuation.yield(.notInCatalogue(transactionID: id, productID: purchase.productID))
                return
            }
            // Only a purchase is dropped when it comes again: its ID is the App Store's; a
            // state update (purchasing, then purchased) is never taken for a replay.
            guard seen.begin(id) else { return }
            let finished = await deliver(purchase, transaction, source: source)
            seen.end(id, finished: finished)
        }
    }

    /// Whether the transaction was finished.
    private func deliver(_ purchase: Purchase, _ transaction: StoreTransaction, source: some TransactionSource) async -> Bool {
        var purchase = purchase
        var refreshed = false
        while !Task.isCancelled {
            let outcome = await delivery.deliver(purchase)
            switch outcome.transactionAction {
            case .finish:
                await transaction.finish()
                continuation.yield(.finished(transactionID: purchase.transactionID, outcome: outcome.code))
                return true
            case .keepUnfinishedAndRetry:
                guard case .retryLater(let after, let reason) = outcome else { return false }
                continuation.yield(.retrying(transactionID: purchase.transactionID, after: after, reason: reason.code))
                do { try await sleep(after) } catch { return false }
            case .refreshReceiptAndRetryOnce:
                guard !refreshed, let receipt = await source.refreshedReceipt(), case .refreshReceipt(let reason) = outcome else {
                    if case .refreshReceipt(let reason) = outcome {
                        continuation.yield(.needsDecision(transactionID: purchase.transactionID, reason: reason))
                    }
                    return false
                }
                _ = reason
                refreshed = true
                purchase.proof = .appReceipt(receipt)
            case .appDecides:
                if case .refused(let reason) = outcome {
                    continuation.yield(.needsDecision(transactionID: purchase.transactionID, reason: reason))
                }
                return false
            }
        }
        return false
    }
}

/// The transactions being handled, and those finished in this process: a replay of either is
/// dropped. An unfinished one that was let go (the app decides) may come again.
private final class Seen: @unchecked Sendable {
    private let lock = NSLock()
    private var handling: Set<String> = []
    private var finished: Set<String> = []

    /// False when `id` is being handled or was finished.
    func begin(_ id: String) -> Bool {
        lock.withLock { finished.contains(id) ? false : handling.insert(id).inserted }
    }

    func end(_ id: String, finished wasFinished: Bool) {
        lock.withLock {
            handling.remove(id)
            if wasFinished { finished.insert(id) }
        }
    }
}
