/// Where verifyReceipt lives for each environment.
public struct AppStoreEndpoints: Sendable, Equatable {
    public var production: String
    public var sandbox: String

    public init(production: String, sandbox: String) {
        self.production = production
        self.sandbox = sandbox
    }

    /// Apple's hosts.
    public static let apple = AppStoreEndpoints(
        production: "https://buy.itunes.apple.com/verifyReceipt",
        sandbox: "https://sandbox.itunes.apple.com/verifyReceipt")

    /// One base URL serving both (the simulator): `/verifyReceipt` and `/sandbox/verifyReceipt`.
    public static func base(_ url: String) -> AppStoreEndpoints {
        let base = url.hasSuffix("/") ? String(url.dropLast()) : url
        return AppStoreEndpoints(production: base + "/verifyReceipt", sandbox: base + "/sandbox/verifyReceipt")
    }

    func url(for environment: StoreEnvironment) -> String {
        environment == .production ? production : sandbox
    }
}
