/// The `environment` an App Store payload names: Apple's four, or one it adds later. A purchase
/// is recorded under a `StoreEnvironment`, production or sandbox, which `storeEnvironment` gives.
///
/// See https://developer.apple.com/documentation/appstoreserverapi/environment
public enum PayloadEnvironment: AppleEnumeration {
    case production
    case sandbox
    /// StoreKit Testing in Xcode.
    case xcode
    /// StoreKit Testing in Xcode with a local server (Apple's `LocalTesting`).
    case localTesting
    case unrecognized(String)

    public static let recognized: [PayloadEnvironment] = [.production, .sandbox, .xcode, .localTesting]

    public var rawValue: String {
        switch self {
        case .production: "Production"
        case .sandbox: "Sandbox"
        case .xcode: "Xcode"
        case .localTesting: "LocalTesting"
        case .unrecognized(let raw): raw
        }
    }

    /// The ledger's environment for it: Production and Sandbox only.
    public var storeEnvironment: StoreEnvironment? {
        switch self {
        case .production: .production
        case .sandbox: .sandbox
        default: nil
        }
    }

    public init(_ environment: StoreEnvironment) {
        self = environment == .production ? .production : .sandbox
    }
}
