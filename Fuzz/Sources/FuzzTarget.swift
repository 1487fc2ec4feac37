import Foundation

/// The fuzz harnesses, one per way outside bytes enter Stockroom. `STOCKROOM_FUZZ_TARGET` (libFuzzer
/// builds) or the replay driver's first argument picks one by its raw value.
enum FuzzTarget: String, CaseIterable, Sendable {
    /// `JWSVerifier.verify` and `SignedTransactionVerifier.verify`.
    case jws
    /// `AppStoreNotification.verify`.
    case notification
    /// `ReceiptInspection.inspect`, `AppReceipt.readUntrusted`, `AppReceipt.decode(payload:)`.
    case receipt
    /// `VerifyReceiptClient` (and the verdict behind it) reading an answer from a fake upstream.
    case verifyReceipt = "verify-receipt"
    /// `AppStoreServerAPIClient.transaction` reading an answer from a fake upstream.
    case serverAPI = "server-api"
    /// `ByteRangeHeader.parse`, `ByteRangeSpec.resolve` and `ContentPlan`.
    case range
    /// `JSONSyntaxError.find`, `CatalogFile.decode` and `CatalogLoader.validate`.
    case catalog
    /// StockroomKit reading a server's answer: headers, waits, ranges, locations, names, JSON.
    case client

    /// Feeds one input to the harness; returns normally unless the code under test traps, or a
    /// harness invariant fails (which traps on purpose, so libFuzzer records the input).
    func run(_ input: [UInt8]) {
        switch self {
        case .jws: JWSHarness.run(input)
        case .notification: NotificationHarness.run(input)
        case .receipt: ReceiptHarness.run(input)
        case .verifyReceipt: UpstreamHarness.runVerifyReceipt(input)
        case .serverAPI: UpstreamHarness.runServerAPI(input)
        case .range: RangeHarness.run(input)
        case .catalog: CatalogHarness.run(input)
        case .client: ClientAnswerHarness.run(input)
        }
    }

    /// The target `STOCKROOM_FUZZ_TARGET` names for this process, or nil when unset or unknown.
    static let current: FuzzTarget? = ProcessInfo.processInfo.environment["STOCKROOM_FUZZ_TARGET"].flatMap(FuzzTarget.init(rawValue:))
}
