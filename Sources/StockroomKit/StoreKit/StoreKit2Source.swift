#if canImport(StoreKit)
    import Foundation
    import StoreKit

    /// StoreKit 2's transactions as a `TransactionSource`: `Transaction.updates`, listened to from the
    /// moment `transactions()` is called (start `TransactionQueue.run(StoreKit2Source())` in a task at
    /// launch, as Apple asks), and `Transaction.unfinished` beside it. `updates` also replays
    /// unfinished transactions, so one may arrive twice: `TransactionQueue` drops the second.
    ///
    /// A purchase made in the app comes back from `Product.purchase()`, not through `updates`: hand
    /// it to the queue with `transaction(from:)`.
    ///
    /// Translation only: a verified transaction becomes a purchase proved by its
    /// `jwsRepresentation`, an unverified one is passed on as such; `TransactionQueue` decides.
    /// Not compiled on Linux (no StoreKit there): keep it this small.
    @available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, *)
    public struct StoreKit2Source: TransactionSource {
        public init() {}

        public func transactions() -> AsyncStream<StoreTransaction> {
            AsyncStream { continuation in
                let updates = Task {
                    for await result in Transaction.updates { continuation.yield(Self.translate(result)) }
                    continuation.finish()
                }
                let unfinished = Task {
                    for await result in Transaction.unfinished { continuation.yield(Self.translate(result)) }
                }
                continuation.onTermination = { _ in
                    updates.cancel()
                    unfinished.cancel()
                }
            }
        }

        /// A signed transaction is not refreshed: StoreKit 2 proofs are never stale.
        public func refreshedReceipt() async -> Data? { nil }

        /// The transaction of a purchase the app made, for `TransactionQueue.handle(_:source:)`;
        /// nil when the purchase was cancelled or is pending (Ask to Buy: it comes through `updates`).
        ///
        /// ```swift
        /// if let transaction = StoreKit2Source.transaction(from: try await product.purchase()) {
        ///     await queue.handle(transaction, source: source)
        /// }
        /// ```
        public static func transaction(from result: Product.PurchaseResult) -> StoreTransaction? {
            switch result {
            case .success(let verification): translate(verification)
            case .userCancelled, .pending: nil
            @unknown default: nil
            }
        }

        static func translate(_ result: VerificationResult<Transaction>) -> StoreTransaction {
            switch result {
            case .verified(let transaction):
                let purchase = Purchase(
                    productID: transaction.productID, transactionID: String(transaction.id),
                    originalTransactionID: String(transaction.originalID),
                    proof: .signedTransaction(result.jwsRepresentation), appAccountToken: transaction.appAccountToken)
                return StoreTransaction(
                    transactionID: String(transaction.id), productID: transaction.productID, state: .purchased(purchase)
                ) {
                    await transaction.finish()
                }
            case .unverified(let transaction, let error):
                return StoreTransaction(
                    transactionID: String(transaction.id), productID: transaction.productID, state: .unverified(reason: "\(error)")
                ) {
                    await transaction.finish()
                }
            }
        }
    }
#endif
