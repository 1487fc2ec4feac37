import Foundation
import Logging
import StockroomCore
import StockroomSQLite
import StockroomEntitlement
import StockroomPostgres
import StockroomServer

/// What the operator commands work with: the server's ledger (a SQLite file or a PostgreSQL
/// database) and its upstream.
struct OperatorContext {
    let configuration: ServerConfiguration
    let ledger: any Ledger

    /// Opens the existing ledger named by the options; a missing SQLite file is an error, not a
    /// new ledger. A PostgreSQL ledger's pool runs for the rest of this (short-lived) process,
    /// and its schema is brought up to date before the first statement.
    init(options: ServerOptions) throws {
        var configuration = try options.configuration()
        try PendingProofOptions.applyEnvironment(to: &configuration)
        self.configuration = configuration
        if configuration.usesPostgres {
            ledger = Self.postgresLedger(configuration)
            return
        }
        guard FileManager.default.fileExists(atPath: configuration.databaseLocation) else {
            fail("no ledger at \(configuration.databaseLocation); pass --database or set STOCKROOM_DATABASE")
        }
        do {
            ledger = SQLiteLedger(database: try SQLiteDatabase(path: configuration.databaseLocation))
        } catch {
            fail("the ledger \(configuration.databaseLocation) cannot be opened: \(error)")
        }
    }

    /// The PostgreSQL ledger of `configuration`, its pool running until the process exits.
    static func postgresLedger(_ configuration: ServerConfiguration) -> PostgresLedger {
        let address: PostgresAddress
        do {
            address = try PostgresAddress(url: configuration.databaseLocation)
        } catch {
            fail("--database: \(error)")
        }
        var logger = Logger(label: "stockroom.ledger")
        logger.logLevel = .critical
        let database = PostgresPool(
            address: address, poolSize: configuration.databasePoolSize, checkoutTimeout: configuration.databaseTimeout, logger: logger)
        // The command's one background task: the pool, until the process exits.
        Task { try await database.run() }
        return PostgresLedger(database: database)
    }

    /// The entitlement component against the configured upstream, with no verdict cache: an
    /// operator's re-verification always asks the App Store. With `simulator`, the running
    /// server's (trusting JWS only under `--trust-root`, as with a URL).
    func entitlements(policy: EntitlementPolicy? = nil) async throws -> Entitlements {
        var logger = Logger(label: "stockroom.operator")
        logger.logLevel = .critical
        let trust = try UpstreamTrust.resolve(configuration: configuration, logger: logger)
        let client = VerifyReceiptClient(
            transport: CurlHTTPClient(), endpoints: configuration.upstream.endpoints(simulatorURL: configuration.simulatorURL),
            sharedSecret: configuration.sharedSecret, policy: configuration.verificationRetryPolicy, logger: logger)
        // Operator commands mint no download tokens; beside a PostgreSQL ledger there may be no
        // key file to read, and none is created for them.
        let tokenKey =
            configuration.usesPostgres && configuration.tokenSecret == nil
            ? (0..<32).map { _ in UInt8.random(in: .min ... .max) }
            : try DownloadTokenSigner.loadKey(configured: configuration.tokenSecret, file: configuration.tokenSecretPath)
        var signedTransactions = SignedTransactionVerifier(
            root: trust.root, otherRoots: trust.otherRoots, bundleID: configuration.bundleID, environment: nil)
        // An operator's re-verification checks revocation as the server does (`--ocsp`).
        signedTransactions.revocation = configuration.revocationChecker(logger: logger)
        return Entitlements(
            ledger: ledger, receipts: AppStoreReceiptVerifier(client: client, bundleID: configuration.bundleID, cacheInterval: .zero),
            signedTransactions: signedTransactions,
            serverAPI: trust.serverAPI, tokens: DownloadTokenSigner(key: tokenKey, lifetime: configuration.tokenLifetime),
            policy: policy
                ?? EntitlementPolicy(reverifyAfter: configuration.reverifyInterval, pendingProofs: configuration.pendingProofBounds),
            logger: logger)
    }
}
