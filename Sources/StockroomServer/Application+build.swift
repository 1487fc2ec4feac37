import Foundation
public import Hummingbird
public import Logging
import NIOPosix
public import Prometheus
import StockroomCore

/// Why the server refused to start; printed as one line by the executable.
public enum StartupError: Error, CustomStringConvertible {
    case content(ContentPathError)
    case catalog(CatalogError)
    case database(path: String, reason: String)

    public var description: String {
        switch self {
        case .content(let error): "content: \(error)"
        case .catalog(let error):
            "catalogue refused (\(error.problems.count) problem\(error.problems.count == 1 ? "" : "s")): " + error.problems.joined(separator: "; ")
        case .database(let path, let reason): "database \"\(path)\" cannot be opened for writing: \(reason)"
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
    do {
        _ = try AppDatabase(path: configuration.databasePath)
    } catch {
        throw StartupError.database(path: configuration.databasePath, reason: "\(error)")
    }
    let catalogStore = CatalogStore(catalog: catalog, loader: loader)

    let router = Router(context: AppRequestContext.self, options: .autoGenerateHeadEndpoints)
    router.add(middleware: RequestLogMiddleware())
    router.add(middleware: MetricsMiddleware())
    router.add(middleware: ErrorMiddleware())
    HealthController(catalog: catalogStore, metrics: metrics).addRoutes(to: router)
    CatalogController(store: catalogStore).addRoutes(to: router.group("v1"))

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
