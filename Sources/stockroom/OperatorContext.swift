import Foundation
import Logging
import StockroomCore
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

    /// Re-fulfilment against the configured upstream; with `simulator`, the running server's
    /// (trusting JWS only under `--trust-root`, as with a URL).
    func refulfilment() async throws -> Refulfilment {
        var logger = Logger(label: "stockroom.operator")
        logger.logLevel = .critical
        let trust = try UpstreamTrust.resolve(configuration: configuration, logger: logger)
        let client = VerifyReceiptClient(
            transport: CurlHTTPClient(), endpoints: configuration.upstream.endpoints(simulatorURL: configuration.simulatorURL),
            sharedSecret: configuration.sharedSecret, policy: configuration.verificationRetryPolicy, logger: logger)
        return Refulfilment(
            ledger: ledger, verifier: AppStoreReceiptVerifier(client: client, bundleID: configuration.bundleID, cacheInterval: .zero),
            signedTransactions: SignedTransactionVerifier(root: trust.root, bundleID: configuration.bundleID, environment: nil),
            serverAPI: trust.serverAPI)
    }
}
