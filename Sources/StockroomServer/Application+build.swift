import Foundation
public import Hummingbird
public import Logging
import NIOPosix
public import Prometheus
import StockroomCore
import StockroomEntitlement
import AppStoreSimulator

/// Why the server refused to start; printed as one line by the executable.
public enum StartupError: Error, CustomStringConvertible {
    case content(ContentPathError)
    case catalog(CatalogError)
    case database(path: String, reason: String)
    case tokenSecret(path: String, reason: String)
    case simulatorNeedsPort
    case appStoreKey(path: String, reason: String)

    public var description: String {
        switch self {
        case .content(let error): "content: \(error)"
        case .catalog(let error):
            "catalogue refused (\(error.problems.count) problem\(error.problems.count == 1 ? "" : "s")): " + error.problems.joined(separator: "; ")
        case .database(let path, let reason): "database \"\(path)\" cannot be opened for writing: \(reason)"
        case .tokenSecret(let path, let reason): "the download-token secret \"\(path)\" cannot be read or created: \(reason)"
        case .simulatorNeedsPort: "the built-in simulator (--upstream simulator) needs a fixed --port, not 0"
        case .appStoreKey(let path, let reason): "the App Store Server API key \"\(path)\" cannot be used: \(reason)"
        }
    }
}

/// Builds the whole server from a configuration: used by `stockroom serve` and by the tests.
///
/// Everything that can refuse start-up (content folder, catalogue, database) is checked here,
/// before a port is bound.
public func buildApplication(
    configuration: ServerConfiguration,
    logger: Logger = Logger(label: "stockroom"),
    metrics: PrometheusCollectorRegistry = PrometheusCollectorRegistry()
) async throws -> some ApplicationProtocol {
    var logger = logger
    logger.logLevel = configuration.logLevel

    let jail: ContentJail
    do {
        jail = try ContentJail(folder: configuration.contentFolder)
    } catch {
        throw StartupError.content(error)
    }
    let loader = CatalogLoader(
        catalogFolder: configuration.catalogFolder, jail: jail,
        digests: DigestCache(file: configuration.digestCachePath))
    let catalog: Catalog
    do {
        catalog = try await NIOThreadPool.singleton.runIfActive { try loader.load() }
    } catch let error as CatalogError {
        throw StartupError.catalog(error)
    }
    let database: AppDatabase
    do {
        database = try AppDatabase(path: configuration.databasePath)
    } catch {
        throw StartupError.database(path: configuration.databasePath, reason: "\(error)")
    }
    let tokenKey: [UInt8]
    do {
        tokenKey = try DownloadTokenSigner.loadKey(configured: configuration.tokenSecret, file: configuration.tokenSecretPath)
    } catch {
        throw StartupError.tokenSecret(path: configuration.tokenSecretPath, reason: "\(error)")
    }
    if configuration.upstream == .simulator, configuration.port == 0 { throw StartupError.simulatorNeedsPort }
    let simulatorChain = configuration.upstream == .simulator ? try SigningChain() : nil
    let simulatorKey = configuration.upstream == .simulator ? try ServerAPIKey() : nil
    let trust: UpstreamTrust
    if let simulatorChain, let simulatorKey {
        // The simulator runs inside this server: trust its root and use its key directly.
        let endpoints = AppStoreServerAPIClient.Endpoints.base(configuration.simulatorURL)
        let credentials = AppStoreServerAPIClient.Credentials(
            issuerID: simulatorKey.issuerID, keyID: simulatorKey.keyID, bundleID: configuration.bundleID, privateKey: simulatorKey.privateKey)
        trust = UpstreamTrust(
            root: simulatorChain.root,
            serverAPI: AppStoreServerAPIClient(credentials: credentials, endpoints: endpoints, transport: CurlHTTPClient(), policy: configuration.verificationRetryPolicy, logger: logger))
    } else {
        trust = try await UpstreamTrust.discover(configuration: configuration, logger: logger)
    }
    let catalogStore = CatalogStore(catalog: catalog, loader: loader)
    let ledger = SQLiteLedger(database: database)
    let verifier = AppStoreReceiptVerifier(
        client: VerifyReceiptClient(
            transport: CurlHTTPClient(), endpoints: configuration.upstream.endpoints(simulatorURL: configuration.simulatorURL),
            sharedSecret: configuration.sharedSecret, policy: configuration.verificationRetryPolicy, logger: logger),
        bundleID: configuration.bundleID, cacheInterval: configuration.verificationCacheInterval)

    let router = Router(context: AppRequestContext.self, options: .autoGenerateHeadEndpoints)
    router.add(middleware: RequestLogMiddleware())
    router.add(middleware: MetricsMiddleware())
    router.add(middleware: ErrorMiddleware())
    HealthController(catalog: catalogStore, metrics: metrics).addRoutes(to: router)
    CatalogController(store: catalogStore).addRoutes(to: router.group("v1"))
    let signedTransactions = SignedTransactionVerifier(root: trust.root, bundleID: configuration.bundleID, environment: nil)
    let entitlements = Entitlements(
        ledger: ledger, receipts: verifier, signedTransactions: signedTransactions, serverAPI: trust.serverAPI,
        tokens: DownloadTokenSigner(key: tokenKey, lifetime: configuration.tokenLifetime),
        policy: EntitlementPolicy(reverifyAfter: configuration.reverifyInterval), logger: logger)
    NotificationController(entitlements: entitlements).addRoutes(to: router.group("v1"))
    DownloadController(
        catalog: catalogStore, entitlements: entitlements, responder: ContentResponder(store: LocalContentStore(jail: jail))
    ).addRoutes(to: router.group("v1"))
    if let adminToken = configuration.adminToken {
        AdminController(entitlements: entitlements, token: adminToken).addRoutes(to: router.group("v1"))
    }
    if let simulatorChain, simulatorKey != nil {
        var simulator = SimulatorConfiguration()
        simulator.bundleID = configuration.bundleID
        simulator.sharedSecret = configuration.sharedSecret
        simulator.notificationURL = "http://127.0.0.1:\(configuration.port)/v1/notifications/appstore"
        addSimulatorRoutes(to: router.group("simulator"), configuration: simulator, signingChain: simulatorChain, apiKey: simulatorKey!)
        logger.notice("verifying against the built-in App Store simulator", metadata: ["url": .string(configuration.simulatorURL)])
    }

    logger.info(
        "catalogue loaded",
        metadata: ["version": .string(catalog.version), "products": .stringConvertible(catalog.products.count)])
    return Application(
        router: router,
        configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: "Stockroom"),
        services: [CatalogWatcher(store: catalogStore, interval: configuration.catalogPollInterval, logger: logger)],
        logger: logger
    )
}

