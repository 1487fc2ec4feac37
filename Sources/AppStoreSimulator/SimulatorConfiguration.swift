/// Settings of the local App Store simulator (`stockroom simulator`).
///
/// The simulator's HTTP service (verifyReceipt, the Server API, the control API) arrives with
/// the upstream-verification work; the foundation only fixes where it lives.
public struct SimulatorConfiguration: Sendable {
    public var host = "127.0.0.1"
    public var port = 9090
    /// The bundle ID its receipts carry unless a purchase names another.
    public var bundleID = "com.example.stockroom.demo"

    public init() {}
}
