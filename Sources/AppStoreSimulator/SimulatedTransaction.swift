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
}
