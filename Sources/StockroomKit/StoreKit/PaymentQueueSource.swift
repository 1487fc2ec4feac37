#if canImport(StoreKit)
    import Foundation
    import StoreKit

    /// The original API's transactions as a `TransactionSource`: an `SKPaymentTransactionObserver`
    /// added once at launch (`start()`) and never removed.
    ///
    /// `SKPaymentQueue` does not retain its observers: keep this source alive for the app's whole
    /// lifetime (a property of the app delegate, say), or transactions stop arriving.
    ///
    /// Translation only: each state goes to `TransactionQueue`, which finishes `.failed` at once,
    /// does nothing on `.purchasing` and `.deferred`, and delivers `.purchased` and `.restored` with
    /// the app receipt before finishing them. Deprecated with the original API it adapts (iOS 18,
    /// macOS 15); `StoreKit2Source` is the way forward. Not compiled on Linux (no StoreKit there):
    /// keep it this small.
    @available(iOS, deprecated: 18.0, message: "The original In-App Purchase API is deprecated: use StoreKit2Source.")
    @available(macOS, deprecated: 15.0, message: "The original In-App Purchase API is deprecated: use StoreKit2Source.")
    @available(tvOS, deprecated: 18.0, message: "The original In-App Purchase API is deprecated: use StoreKit2Source.")
    @available(watchOS, deprecated: 11.0, message: "The original In-App Purchase API is deprecated: use StoreKit2Source.")
    @available(visionOS, deprecated: 2.0, message: "The original In-App Purchase API is deprecated: use StoreKit2Source.")
    public final class PaymentQueueSource: NSObject, SKPaymentTransactionObserver, TransactionSource, @unchecked Sendable {
        private let queue: SKPaymentQueue
        private let stream: AsyncStream<StoreTransaction>
        private let continuation: AsyncStream<StoreTransaction>.Continuation

        public init(queue: SKPaymentQueue = .default()) {
            self.queue = queue
            (stream, continuation) = AsyncStream<StoreTransaction>.makeStream()
            super.init()
        }

        /// Adds the observer: call once, at launch, before anything else touches the queue.
        public func start() {
            queue.add(self)
        }

        public func transactions() -> AsyncStream<StoreTransaction> { stream }

        public func refreshedReceipt() async -> Data? {
            await ReceiptRefresh().run()
            return Self.appReceipt()
        }

        public func paymentQueue(_ queue: SKPaymentQueue, updatedTransactions transactions: [SKPaymentTransaction]) {
            for transaction in transactions { continuation.yield(translate(transaction)) }
        }

        private func translate(_ transaction: SKPaymentTransaction) -> StoreTransaction {
            let id = transaction.transactionIdentifier ?? ""
            let productID = transaction.payment.productIdentifier
            let handle = TransactionHandle(queue: queue, transaction: transaction)
            let finish: @Sendable () async -> Void = { handle.finish() }
            let state: StoreTransaction.State
            switch transaction.transactionState {
            case .purchasing: state = .purchasing
            case .deferred: state = .deferred
            case .failed: state = .failed(reason: transaction.error?.localizedDescription ?? "failed")
            case .purchased, .restored:
                let purchase = Purchase(
                    productID: productID, transactionID: id, originalTransactionID: transaction.original?.transactionIdentifier ?? id,
                    proof: .appReceipt(Self.appReceipt() ?? Data()))
                state = transaction.transactionState == .restored ? .restored(purchase) : .purchased(purchase)
            @unknown default: state = .purchasing
            }
            return StoreTransaction(transactionID: id, productID: productID, state: state, finish: finish)
        }

        /// The app receipt; without one (a fresh install before its first refresh) an empty one,
        /// which the server answers `receipt_empty`, and the queue refreshes it.
        private static func appReceipt() -> Data? {
            Bundle.main.appStoreReceiptURL.flatMap { try? Data(contentsOf: $0) }
        }
    }

    /// Carries a transaction and its queue into the finish closure; StoreKit's queue is thread-safe.
    @available(iOS, deprecated: 18.0)
    @available(macOS, deprecated: 15.0)
    @available(tvOS, deprecated: 18.0)
    @available(watchOS, deprecated: 11.0)
    @available(visionOS, deprecated: 2.0)
    private final class TransactionHandle: @unchecked Sendable {
        let queue: SKPaymentQueue
        let transaction: SKPaymentTransaction

        init(queue: SKPaymentQueue, transaction: SKPaymentTransaction) {
            self.queue = queue
            self.transaction = transaction
        }

        func finish() { queue.finishTransaction(transaction) }
    }

    /// One `SKReceiptRefreshRequest`, awaited.
    @available(iOS, deprecated: 18.0)
    @available(macOS, deprecated: 15.0)
    @available(tvOS, deprecated: 18.0)
    @available(watchOS, deprecated: 11.0)
    @available(visionOS, deprecated: 2.0)
    private final class ReceiptRefresh: NSObject, SKRequestDelegate, @unchecked Sendable {
        private var continuation: CheckedContinuation<Void, Never>?
        private var request: SKReceiptRefreshRequest?

        func run() async {
            await withCheckedContinuation { continuation in
                self.continuation = continuation
                let request = SKReceiptRefreshRequest()
                request.delegate = self
                self.request = request
                request.start()
            }
        }

        func requestDidFinish(_ request: SKRequest) { done() }
        func request(_ request: SKRequest, didFailWithError error: any Error) { done() }

        private func done() {
            continuation?.resume()
            continuation = nil
            request = nil
        }
    }
#endif
