import StockroomCore

/// The bodies of `POST /sim/purchases`: what a test or a developer asks for, and the artefacts
/// the simulator answers with.
extension SimulatorState {
    struct PurchaseRequest: Decodable {
        var productId: String
        var bundleId: String?
        var environment: StoreEnvironment?
        var originalTransactionId: String?
        var deviceId: String?
        var appAccountToken: String?
        /// `Non-Consumable` (default), `Consumable`, `Auto-Renewable Subscription` (the default
        /// with `expiresInSeconds`) or `Non-Renewing Subscription`.
        var type: String?
        /// A subscription's length from now; negative makes one that has already ended.
        var expiresInSeconds: Int?
        /// `app` (default) or `transaction`: the latter also returns an iOS 6 transaction receipt.
        var receiptStyle: String?
    }

    struct PurchaseResult: Encodable {
        var transactionId: String
        var originalTransactionId: String
        var productId: String
        var bundleId: String
        var environment: StoreEnvironment
        var deviceId: String
        var receiptData: String
        var signedTransaction: String
        var type: String
        var expiresDate: Int64?
        var transactionReceipt: String?
    }

    /// The furthest a simulated subscription may end from now, either way: ten years.
    static let expiryBound = 10 * 365 * 86400
}
