import StockroomCore

/// One purchase the simulator sold, and what happened to it since.
struct SimulatedTransaction: Sendable {
    var transactionID: String
    var originalTransactionID: String
    var productID: String
    var bundleID: String
    var environment: StoreEnvironment
    var deviceID: String
    var purchaseDateMilliseconds: Int64
    var originalPurchaseDateMilliseconds: Int64
    var cancellationDateMilliseconds: Int64?
    /// Apple's `cancellation_reason`: "1" an app issue, "0" another reason.
    var cancellationReason: String?
    /// The app account the purchase was made for: Apple signs it into every view of it (history).
    var appAccountToken: String?
    /// StoreKit 2's product type: `Non-Consumable`, `Consumable`, `Auto-Renewable Subscription`,
    /// `Non-Renewing Subscription`.
    var type: String = SimulatedTransaction.nonConsumable
    /// When a subscription ends.
    var expiresDateMilliseconds: Int64?

    static let nonConsumable = "Non-Consumable"
    static let autoRenewable = "Auto-Renewable Subscription"
    static let nonRenewing = "Non-Renewing Subscription"
    static let types: Set = [nonConsumable, "Consumable", autoRenewable, nonRenewing]

    /// Whether the subscription has ended at `now` (milliseconds); never for other products.
    func isExpired(at now: Int64) -> Bool {
        guard let expiresDateMilliseconds else { return false }
        return expiresDateMilliseconds <= now
    }
}
