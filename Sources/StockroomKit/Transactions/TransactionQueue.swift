import Foundation

/// Takes each transaction from a `TransactionSource` and acts on it: every decision about a
/// StoreKit transaction is made here, where the Linux tests reach it.
///
/// - `.failed` → finished at once; `.purchasing`, `.deferred` → nothing.
/// - `.purchased`, `.restored` of a catalogue product → delivered; finished when the outcome
///   says so (delivered, revoked); kept unfinished and retried after `Retry-After` or the
///   backoff; after a stale receipt, delivered once more with a refreshed one.
/// - unverified → reported, left unfinished; a product not in the catalogue → left to the app.
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

    /// The decision for one transaction.
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
            await deliver(purchase, transaction, source: source)
        }
    }

    private func deliver(_ purchase: Purchase, _ transaction: StoreTransaction, source: some TransactionSource) async {
        var purchase = purchase
        var refreshed = false
        while !Task.isCancelled {
            let outcome = await delivery.deliver(purchase)
            switch outcome.transactionAction {
            case .finish:
                await transaction.finish()
                continuation.yield(.finished(transactionID: purchase.transactionID, outcome: outcome.code))
                return
            case .keepUnfinishedAndRetry:
                guard case .retryLater(let after, let reason) = outcome else { return }
                continuation.yield(.retrying(transactionID: purchase.transactionID, after: after, reason: reason.code))
                do { try await sleep(after) } catch { return }
            case .refreshReceiptAndRetryOnce:
                guard !refreshed, let receipt = await source.refreshedReceipt(), case .refreshReceipt(let reason) = outcome else {
                    if case .refreshReceipt(let reason) = outcome { continuation.yield(.needsDecision(transactionID: purchase.transactionID, reason: reason)) }
                    return
                }
                _ = reason
                refreshed = true
                purchase.proof = .appReceipt(receipt)
            case .appDecides:
                if case .refused(let reason) = outcome { continuation.yield(.needsDecision(transactionID: purchase.transactionID, reason: reason)) }
                return
            }
        }
    }
}
