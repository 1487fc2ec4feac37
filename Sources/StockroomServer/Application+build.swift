import Foundation
public import Hummingbird
public import Logging
import NIOPosix
public import Prometheus
import StockroomCore
import StockroomSQLite
import StockroomHTTP
import StockroomEntitlement
import StockroomPostgres
import ServiceLifecycle

/// Why the server refused to start; printed as one line by the executable.
public enum StartupError: Error, CustomStringConvertible {
    case content(ContentPathError)
    case catalog(CatalogError)
    case database(path: String, reason: String)
    /// `path` is nil when the secret came from STOCKROOM_TOKEN_SECRET.
    case tokenSecret(path: String?, reason: String)
    case simulatorNeedsPort
    case simulatorNeedsLoopback(host: String)
    case trustRootWithApple
    case appStoreKey(path: String, reason: String)
    case appStoreKeyIncomplete
    case xcodeWithApple
    case objectStorage(String)
    case webhooks(String)

    public var description: String {
        switch self {
        case .content(let error): "content: \(error)"
        case .catalog(let error):
            "catalogue refused (\(error.problems.count) problem\(error.problems.count == 1 ? "" : "s")): "
                + error.problems.joined(separator: "; ")
        case .database(let path, let reason): "database \"\(path)\" cannot be opened for writing: \(reason)"
        case .tokenSecret(let path?, let reason): "the download-token secret \"\(path)\" cannot be used: \(reason)"
        case .tokenSecret(nil, let reason): reason
        case .simulatorNeedsPort: "the built-in simulator (--upstream simulator) needs a fixed --port, not 0"
        case .simulatorNeedsLoopback(let host):
            """
            the built-in simulator (--upstream simulator) is a test tool and serves only a loopback --host (127.0.0.1, ::1, \
            localhost), not \"\(host)\"
            """
        case .trustRootWithApple: "--trust-root is for --upstream URL; with --upstream apple only Apple's roots are trusted"
        case .appStoreKey(let path, let reason): "the App Store Server API key \"\(path)\" cannot be used: \(reason)"
        case .appStoreKeyIncomplete: "the App Store Server API needs --app-store-key, --app-store-key-id and --app-store-issuer-id together"
        case .xcodeWithApple: "--accept-xcode is for development: it refuses to run with --upstream apple"
        case .objectStorage(let detail): "object storage: \(detail)"
        case .webhooks(let detail): "webhooks: \(detail)"
        }
    }
}

/// Builds the whole server from a configuration: used by `stockroom serve` and by the tests.
///
/// Everything that can refuse start-up (upstream and trust, content folder, catalogue, database,
/// token secret) is checked here, before a port is bound.
public func buildApplication(
    configuration: ServerConfiguration,
    logger: Logger = Logger(label: "stockroom"),
    metrics: PrometheusCollectorRegistry = PrometheusCollectorRegistry()
) async throws -> some ApplicationProtocol {
    var logger = logger
    logger.logLevel = configuration.logLevel
    // Before anything opens a descriptor: the connection cap is derived from what this gives.
    let descriptors = DescriptorLimit.raise()

    // Upstream and trust first: a simulator on a public host or a half-given key refuses at once.
    let simulator = try BuiltInSimulator(configuration: configuration)
    let trust = try UpstreamTrust.resolve(configuration: simulator?.trusting(configuration) ?? configuration, logger: logger)
    // Content in a bucket: its store, credentials and bucket are checked before anything else opens.
    let objects = try await ObjectContent.open(configuration, logger: logger)
    let catalogStore: CatalogStore
    let jail: ContentJail?
    do {
        if let objects {
            jail = nil
            catalogStore = CatalogStore(catalog: try await objects.loader.load(), objects: objects.loader)
        } else {
            let folder: ContentJail
            do {
                folder = try ContentJail(folder: configuration.contentFolder)
            } catch {
                throw StartupError.content(error)
            }
            let loader = CatalogLoader(
                catalogFolder: configuration.catalogFolder, jail: folder, digests: DigestCache(file: configuration.digestCachePath))
            jail = folder
            catalogStore = CatalogStore(catalog: try await NIOThreadPool.catalog.runIfActive { try loader.load() }, loader: loader)
        }
    } catch let error as CatalogError {
        throw StartupError.catalog(error)
    }
    let catalog = catalogStore.catalog
    // Finish Transaction and Set App Account Token are queued only where they can be sent: with Server API credentials.
    let finishOn = trust.serverAPI == nil ? nil : configuration.finishOn
    let (ledger, ledgerServices) = try await openLedger(
        configuration, finishOn: finishOn, tellsAppleOfAccounts: trust.serverAPI != nil, logger: logger)
    let tokenKey: [UInt8]
    do {
        tokenKey = try DownloadTokenSigner.loadKey(configured: configuration.tokenSecret, file: configuration.tokenSecretPath)
    } catch {
        let path = configuration.tokenSecret.map { $0.isEmpty } ?? true ? configuration.tokenSecretPath : nil
        throw StartupError.tokenSecret(path: path, reason: error.description)
    }
    let webhookEndpoints = try configuration.webhookEndpoints(tokenKey: tokenKey)
    let webhooks = configuration.webhookSender(ledger: ledger, endpoints: webhookEndpoints, logger: logger)
    let verifier = AppStoreReceiptVerifier(
        client: VerifyReceiptClient(
            transport: CurlHTTPClient(), endpoints: configuration.upstream.endpoints(simulatorURL: configuration.simulatorURL),
            sharedSecret: configuration.sharedSecret, policy: configuration.verificationRetryPolicy, logger: logger),
        bundleID: configuration.bundleID, cacheInterval: configuration.verificationCacheInterval)

    let router = Router(context: AppRequestContext.self, options: .autoGenerateHeadEndpoints)
    router.add(middleware: TrustedProxyMiddleware(proxies: configuration.trustedProxies))
    router.add(middleware: RequestLogMiddleware())
    router.add(middleware: MetricsMiddleware())
    router.add(middleware: ErrorMiddleware())
    let slots = configuration.downloadSlots()
    let health = HealthController<AppRequestContext>(catalog: catalogStore, metrics: metrics, ledger: ledger, slots: slots)
    health.addRoutes(to: router, withMetrics: configuration.metricsAddress == nil)
    CatalogController(store: catalogStore).addRoutes(to: router.group("v1"))
    var signedTransactions = SignedTransactionVerifier(
        root: trust.root, otherRoots: trust.otherRoots, bundleID: configuration.bundleID, environment: nil)
    signedTransactions.xcode = trust.xcode
    signedTransactions.revocation = configuration.revocationChecker(logger: logger)
    let receipts: any ReceiptVerifier =
        trust.xcode == nil
        ? verifier : XcodeReceiptVerifier(upstream: verifier, bundleID: configuration.bundleID, pinned: configuration.xcodeCertificate)
    var entitlements = Entitlements(
        ledger: ledger, receipts: receipts, signedTransactions: signedTransactions, serverAPI: trust.serverAPI,
        tokens: DownloadTokenSigner(key: tokenKey, lifetime: configuration.tokenLifetime),
        policy: EntitlementPolicy(
            reverifyAfter: configuration.reverifyInterval, allowsSandbox: configuration.sandbox == .allow,
            proratedRefund: configuration.proratedRefund,
            pendingProofs: configuration.pendingProofBounds),
        gate: configuration.upstreamRateLimiter(), logger: logger)
    let sender = trust.serverAPI.map { client in
        ServerCallSender(
            ledger: ledger, client: client, catalog: catalogStore, refundPreference: configuration.refundPreference,
            interval: configuration.serverCallInterval, logger: logger)
    }
    if let sender { entitlements.serverCallQueued = { sender.wake() } }
    NotificationController(entitlements: entitlements).addRoutes(to: router.group("v1"))
    if let objects {
        let redirect =
            configuration.contentDelivery == .redirect
            ? PresignedRedirect(client: objects.client, lifetime: configuration.presignLifetime, logger: logger) : nil
        DownloadController(
            catalog: catalogStore, entitlements: entitlements,
            responder: ContentResponder(store: ObjectContentStore(client: objects.client, logger: logger)),
            slots: slots, redirect: redirect
        ).addRoutes(to: router.group("v1"))
    } else if let jail {
        let contentStore = LocalContentStore(jail: jail)
        DownloadController(
            catalog: catalogStore, entitlements: entitlements, responder: ContentResponder(store: contentStore),
            slots: slots, offload: configuration.offloadResponder(store: contentStore)
        ).addRoutes(to: router.group("v1"))
    }
    RestoreController(catalog: catalogStore, entitlements: entitlements).addRoutes(to: router.group("v1"))
    let reverificationJobs = configuration.adminToken == nil ? nil : ReverificationJobs(entitlements: entitlements, logger: logger)
    if let adminToken = configuration.adminToken, let reverificationJobs {
        AdminController(entitlements: entitlements, token: adminToken, jobs: reverificationJobs, webhooks: webhookEndpoints)
            .addRoutes(to: router.group("v1"))
        ConsoleController(entitlements: entitlements, adminToken: adminToken, webhooks: webhookEndpoints).addRoutes(to: router)
    }
    if let simulator {
        simulator.addRoutes(to: router.group("simulator"), configuration: configuration)
        logger.notice(
            "verifying against the built-in App Store simulator, a test tool", metadata: ["url": .string(configuration.simulatorURL)])
    }

    logger.info(
        "catalogue loaded",
        metadata: ["version": .string(catalog.version), "products": .stringConvertible(catalog.products.count)])
    let gate = ConnectionGate(limit: configuration.connectionLimits.maxConnections ?? descriptors.defaultMaxConnections)
    logger.info(
        "connection limits",
        metadata: [
            "descriptors": "\(descriptors.soft)", "descriptorsAtStart": "\(descriptors.before)", "descriptorsHard": "\(descriptors.hard)",
            "maxConnections": "\(gate.limit)",
        ])
    if gate.limit > descriptors.defaultMaxConnections {
        logger.warning(
            "--max-connections leaves less room than the descriptor limit needs for files, the ledger and upstream calls",
            metadata: ["maxConnections": "\(gate.limit)", "suggested": "\(descriptors.defaultMaxConnections)"])
    }
    let metricsListener = configuration.metricsAddress.map { address in
        let metricsRouter = Router()
        HealthController<BasicRequestContext>(catalog: catalogStore, metrics: metrics, ledger: ledger, slots: slots).addMetricsRoute(
            to: metricsRouter)
        return Application(
            router: metricsRouter, configuration: .init(address: .hostname(address.host, port: address.port), serverName: "Stockroom"),
            logger: logger)
    }
    return Application(
        router: router,
        server: .http1(
            limits: configuration.connectionLimits, gate: gate,
            catalog: CatalogFastPath(store: catalogStore, logger: logger, serverName: "Stockroom")),
        configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: "Stockroom"),
        // The ledger's pool comes first: services stop in reverse order, so it outlives the requests.
        services: ledgerServices + [
            CatalogWatcher(
                store: catalogStore, interval: objects == nil ? configuration.catalogPollInterval : configuration.objectPollInterval,
                logger: logger)
        ]
            + configuration.offloadServices(ledger: ledger, catalog: catalogStore, logger: logger) + (sender.map { [$0] } ?? [])
            + (reverificationJobs.map { [$0] } ?? []) + (metricsListener.map { [$0] } ?? []) + [webhooks],
        logger: logger
    )
}

/// The configured ledger, migrated, and the services it needs run (a PostgreSQL pool).
///
/// A `postgres://` address is migrated over a connection of its own before anything binds a
/// port, so a wrong address, password or database refuses start-up with the server's words.
func openLedger(
    _ configuration: ServerConfiguration, finishOn: FinishTrigger? = nil, tellsAppleOfAccounts: Bool = false, logger: Logger
) async throws -> (any Ledger, [any Service]) {
    guard configuration.usesPostgres else {
        do {
            return (
                SQLiteLedger(
                    database: try SQLiteDatabase(path: configuration.databaseLocation), finishOn: finishOn,
                    tellsAppleOfAccounts: tellsAppleOfAccounts), []
            )
        } catch {
            throw StartupError.database(path: configuration.databaseLocation, reason: "\(error)")
        }
    }
    let address: PostgresAddress
    do {
        address = try PostgresAddress(url: configuration.databaseLocation)
    } catch {
        throw StartupError.database(path: "postgres://…", reason: error.description)
    }
    do {
        try await PostgresPool.migrate(address: address, logger: logger)
    } catch {
        throw StartupError.database(path: address.description, reason: "\(error)")
    }
    if configuration.stateFolder == nil {
        // Beside no file: this instance's digest cache (and a generated token secret) go in .stockroom/.
        try? FileManager.default.createDirectory(
            atPath: ".stockroom", withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
    }
    if configuration.tokenSecret == nil {
        logger.notice(
            "instances sharing a PostgreSQL ledger must share STOCKROOM_TOKEN_SECRET; this one keeps its own",
            metadata: ["file": .string(configuration.tokenSecretPath)])
    }
    let database = PostgresPool(
        address: address, poolSize: configuration.databasePoolSize, checkoutTimeout: configuration.databaseTimeout, migrated: true,
        logger: logger)
    logger.info(
        "ledger on PostgreSQL",
        metadata: ["database": .string(address.description), "pool": .stringConvertible(configuration.databasePoolSize)])
    return (PostgresLedger(database: database, finishOn: finishOn, tellsAppleOfAccounts: tellsAppleOfAccounts), [database])
}
