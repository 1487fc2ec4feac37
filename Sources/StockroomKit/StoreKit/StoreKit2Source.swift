#if canImport(StoreKit)
import Foundation
import StoreKit

/// StoreKit 2's transactions as a `TransactionSource`: `Transaction.unfinished`, then
/// `Transaction.updates`. Start `TransactionQueue.run(StoreKit2Source())` in a task at launch.
///
/// Translation only: a verified transaction becomes a purchase proved by its
/// `jwsRepresentation`, an unverified one is passed on as such; `TransactionQueue` decides.
/// Not compiled on Linux (no StoreKit there): keep it this small.
@available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, *)
public struct StoreKit2Source: TransactionSource {
    public init() {}

    public func transactions() -> AsyncStream<StoreTransaction> {
        AsyncStream { continuation in
            let task = Task {
                for await result in Transaction.unfinished { continuation.yield(Self.translate(result)) }
                for await result in Transaction.updates { continuation.yield(Self.translate(result)) }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    /// A signed transaction is not refreshed: StoreKit 2 proofs are never stale.
    public func refreshedReceipt() async -> Data? { nil }

    static func translate(_ result: VerificationResult<Transaction>) -> StoreTransaction {
        switch result {
        case .verified(let transaction):
            let purchase = Purchase(
                productID: transaction.productID, transactionID: String(transaction.id), originalTransactionID: String(transaction.originalID),
                proof: .signedTransaction(result.jwsRepresentation), appAccountToken: transaction.appAccountToken)
            return StoreTransaction(transactionID: String(transaction.id), productID: transaction.productID, state: .purchased(purchase)) {
                await transaction.finish()
            }
        case .unverified(let transaction, let error):
            return StoreTransaction(transactionID: String(transaction.id), productID: transaction.productID, state: .unverified(reason: "\(error)")) {
                await transaction.finish()
            }
        }
    }
}
#endif
