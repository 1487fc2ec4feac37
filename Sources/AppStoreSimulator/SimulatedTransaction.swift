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
    /// StoreKit 2's `revocationType` (`REFUND_FULL`, `REFUND_PRORATED`, `FAMILY_REVOKE`) once revoked.
    var revocationType: String?
    /// With `REFUND_PRORATED`: the refunded share in milliunits (0...100 000).
    var revocationPercentage: Int?
    /// When the server called Finish Transaction first.
    var finishedDateMilliseconds: Int64?
    /// The last Send Consumption Information body Apple accepted, verbatim.
    var consumption: [UInt8]?
    /// How many consumption bodies Apple accepted for it.
    var consumptionAnswers = 0

    static let nonConsumable = "Non-Consumable"
    static let autoRenewable = "Auto-Renewable Subscription"
    static let nonRenewing = "Non-Renewing Subscription"
    static let consumable = "Consumable"
    static let types: Set = [nonConsumable, consumable, autoRenewable, nonRenewing]

    /// Whether a purchase of it raises ONE_TIME_CHARGE: every product but an auto-renewable subscription.
    var isOneTimeCharge: Bool { type != Self.autoRenewable }

    /// Whether the subscription has ended at `now` (milliseconds); never for other products.
    func isExpired(at now: Int64) -> Bool {
        guard let expiresDateMilliseconds else { return false }
        return expiresDateMilliseconds <= now
    }
}
