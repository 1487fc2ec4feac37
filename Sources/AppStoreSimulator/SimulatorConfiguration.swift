/// Settings of the local App Store simulator (`stockroom simulator`).
public struct SimulatorConfiguration: Sendable {
    public var host = "127.0.0.1"
    public var port = 9090
    /// The bundle ID purchases carry unless they name another.
    public var bundleID = "com.example.stockroom.demo"
    /// When set, verifyReceipt answers 21004 to any other `password`, as Apple does.
    public var sharedSecret: String?
    /// Where refunds post their App Store Server Notification V2; nil posts none.
    public var notificationURL: String?
    /// Added before every upstream answer, to simulate Apple's latency.
    public var latency: Duration = .zero

    public init() {}
}
