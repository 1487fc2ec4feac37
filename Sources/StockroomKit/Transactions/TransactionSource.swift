import Foundation

/// Where the core takes StoreKit's transactions from: a small protocol, so the StoreKit
/// adapters stay thin and the tests script the same sequence with simulator purchases.
public protocol TransactionSource: Sendable {
    /// Every transaction as StoreKit hands it over: first those left unfinished, then new ones,
    /// until the app ends (or, in a test, the script does).
    func transactions() -> AsyncStream<StoreTransaction>
    /// A refreshed app receipt (`SKReceiptRefreshRequest`), or nil when there is none to be had.
    func refreshedReceipt() async -> Data?
}

/// One transaction as StoreKit reported it, translated: its state, the purchase to deliver, and
/// the closure that finishes it (`finish()` or `finishTransaction(_:)`).
public struct StoreTransaction: Sendable {
    /// The states of `SKPaymentTransactionState`, and StoreKit 2's verification.
    public enum State: Sendable {
        /// `.purchasing`: nothing to do yet.
        case purchasing
        /// `.deferred`: waiting for Ask to Buy; nothing to do.
        case deferred
        /// `.failed`: finished at once (the user may be sent to fix their account, then buy again).
        case failed(reason: String)
        /// `.purchased`, or a verified StoreKit 2 transaction: deliver, then finish.
        case purchased(Purchase)
        /// `.restored`: deliver, then finish.
        case restored(Purchase)
        /// A StoreKit 2 transaction whose signature did not verify: left unfinished, reported.
        case unverified(reason: String)
    }

    public var transactionID: String
    public var productID: String
    public var state: State
    /// Finishes the transaction with StoreKit.
    public var finish: @Sendable () async -> Void

    public init(transactionID: String, productID: String, state: State, finish: @escaping @Sendable () async -> Void) {
        self.transactionID = transactionID
        self.productID = productID
        self.state = state
        self.finish = finish
    }
}
