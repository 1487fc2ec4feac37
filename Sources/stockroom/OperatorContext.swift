import Foundation
import Logging
import StockroomCore
import StockroomEntitlement
import StockroomServer

/// What the operator commands work with: the server's ledger file and its upstream.
struct OperatorContext {
    let configuration: ServerConfiguration
    let ledger: SQLiteLedger

    /// Opens the existing ledger named by the options; a missing file is an error, not a new ledger.
    init(options: ServerOptions) throws {
        configuration = try options.configuration()
        guard FileManager.default.fileExists(atPath: configuration.databasePath) else {
            fail("no ledger at \(configuration.databasePath); pass --database or set STOCKROOM_DATABASE")
        }
        do {
            ledger = SQLiteLedger(database: try AppDatabase(path: configuration.databasePath))
        } catch {
            fail("the ledger \(configuration.databasePath) cannot be opened: \(error)")
        }
    }

    /// The entitlement component against the configured upstream, with no verdict cache: an
    /// operator's re-verification always asks the App Store. With `simulator`, the running
    /// server's (trusting JWS only under `--trust-root`, as with a URL).
    func entitlements() async throws -> Entitlements {
        var logger = Logger(label: "stockroom.operator")
        logger.logLevel = .critical
        let trust = try UpstreamTrust.resolve(configuration: configuration, logger: logger)
        let client = VerifyReceiptClient(
            transport: CurlHTTPClient(), endpoints: configuration.upstream.endpoints(simulatorURL: configuration.simulatorURL),
            sharedSecret: configuration.sharedSecret, policy: configuration.verificationRetryPolicy, logger: logger)
        let tokenKey = try DownloadTokenSigner.loadKey(configured: configuration.tokenSecret, file: configuration.tokenSecretPath)
        return Entitlements(
            ledger: ledger, receipts: AppStoreReceiptVerifier(client: client, bundleID: configuration.bundleID, cacheInterval: .zero),
            signedTransactions: SignedTransactionVerifier(root: trust.root, otherRoots: trust.otherRoots, bundleID: configuration.bundleID, environment: nil),
            serverAPI: trust.serverAPI, tokens: DownloadTokenSigner(key: tokenKey, lifetime: configuration.tokenLifetime),
            policy: EntitlementPolicy(reverifyAfter: configuration.reverifyInterval), logger: logger)
    }
}
