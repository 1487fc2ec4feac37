import Foundation
public import Logging
public import StockroomCore

/// What the server (and the operator commands) trust and use upstream, decided once at start
/// from the configuration alone: the roots StoreKit 2 JWS must chain to, and the App Store
/// Server API client when credentials exist.
///
/// Nothing is fetched: trust is never taken from the network. With `apple`, Apple Root CA - G3
/// only; with a URL (or the CLI's `simulator`), the `--trust-root` certificates, else Apple's;
/// the built-in simulator's root is handed in by `buildApplication` as a trusted root.
public struct UpstreamTrust: Sendable {
    /// The root verifiers use; the first of `roots`.
    public let root: Certificate
    /// Further trusted roots (several `--trust-root`): a chain may end at any of them.
    public let otherRoots: [Certificate]
    /// The App Store Server API client, when credentials were given; nil means no Server API.
    public let serverAPI: AppStoreServerAPIClient?
    /// With `--accept-xcode`: verifies StoreKit Testing in Xcode's signed transactions locally.
    public internal(set) var xcode: XcodeTransactionVerifier?

    /// Trust given directly; `resolve(configuration:logger:)` is how the server and CLI build it.
    public init(root: Certificate, otherRoots: [Certificate] = [], serverAPI: AppStoreServerAPIClient?) {
        self.root = root
        self.otherRoots = otherRoots
        self.serverAPI = serverAPI
    }

    /// Every trusted root, `root` first.
    public var roots: [Certificate] { [root] + otherRoots }

    /// The trust `configuration` names; refuses `--trust-root` with Apple's upstream, and a Server
    /// API key given only in part.
    public static func resolve(configuration: ServerConfiguration, logger: Logger) throws -> UpstreamTrust {
        var root = try AppleRootCertificates.rootCAG3()
        if let first = configuration.trustedRoots.first {
            guard configuration.upstream != .apple else { throw StartupError.trustRootWithApple }
            root = first
            logger.notice(
                "trusting roots named in the configuration for signed transactions",
                metadata: [
                    "upstream": .string(configuration.upstream.description),
                    "roots": .string(configuration.trustedRoots.map(\.subject).joined(separator: "; ")),
                ])
        }
        let credentials = try configuration.serverAPICredentials ?? keyFileCredentials(configuration)
        let endpoints: AppStoreServerAPIClient.Endpoints =
            switch configuration.upstream {
            case .apple: .apple
            case .simulator: .base(configuration.simulatorURL)
            case .url(let url): .base(url.hasSuffix("/") ? String(url.dropLast()) : url)
            }
        let serverAPI = credentials.map {
            AppStoreServerAPIClient(
                credentials: $0, endpoints: endpoints, transport: CurlHTTPClient(), policy: configuration.verificationRetryPolicy,
                logger: logger)
        }
        var trust = UpstreamTrust(root: root, otherRoots: Array(configuration.trustedRoots.dropFirst()), serverAPI: serverAPI)
        if configuration.acceptsXcode {
            guard configuration.upstream != .apple else { throw StartupError.xcodeWithApple }
            trust.xcode = XcodeTransactionVerifier(pinned: configuration.xcodeCertificate)
            logger.warning("accepting StoreKit Testing in Xcode's purchases, verified locally: development only")
        }
        return trust
    }

    /// The credentials of `--app-store-key`, `--app-store-key-id` and `--app-store-issuer-id`:
    /// all three, or none (no Server API).
    private static func keyFileCredentials(_ configuration: ServerConfiguration) throws -> AppStoreServerAPIClient.Credentials? {
        let parts = [configuration.appStoreKeyPath, configuration.appStoreKeyID, configuration.appStoreIssuerID]
        guard let path = parts[0], let keyID = parts[1], let issuerID = parts[2] else {
            if parts.contains(where: { $0 != nil }) { throw StartupError.appStoreKeyIncomplete }
            return nil
        }
        guard let pem = FileManager.default.contents(atPath: path) else {
            throw StartupError.appStoreKey(path: path, reason: "cannot be read")
        }
        do {
            let key = try ECPrivateKey(pem: String(decoding: pem, as: UTF8.self))
            return .init(issuerID: issuerID, keyID: keyID, bundleID: configuration.bundleID, privateKey: key)
        } catch {
            throw StartupError.appStoreKey(path: path, reason: "\(error)")
        }
    }
}
