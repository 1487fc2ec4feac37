import AppStoreSimulator
import Hummingbird
import StockroomCore

/// The App Store simulator that `serve --upstream simulator` mounts under `/simulator`: a test
/// tool, so it exists only with that setting, on a loopback host and a fixed port.
///
/// Its signing root and Server API key are trusted directly, in process, never fetched.
struct BuiltInSimulator {
    let chain: SigningChain
    let apiKey: ServerAPIKey

    /// Nil unless `configuration.upstream` is `simulator`; refuses a host others can reach.
    init?(configuration: ServerConfiguration) throws {
        guard configuration.upstream == .simulator else { return nil }
        guard LoopbackHost.contains(configuration.host) else { throw StartupError.simulatorNeedsLoopback(host: configuration.host) }
        guard configuration.port != 0 else { throw StartupError.simulatorNeedsPort }
        chain = try SigningChain()
        apiKey = try ServerAPIKey()
    }

    /// `configuration` trusting this simulator's root (before any `--trust-root`) and key.
    func trusting(_ configuration: ServerConfiguration) -> ServerConfiguration {
        var trusting = configuration
        trusting.trustedRoots = [chain.root] + configuration.trustedRoots
        trusting.serverAPICredentials = .init(
            issuerID: apiKey.issuerID, keyID: apiKey.keyID, bundleID: configuration.bundleID, privateKey: apiKey.privateKey)
        return trusting
    }

    /// Mounts the simulator's routes; its refund notifications post to this server.
    func addRoutes<Context: RequestContext>(to group: RouterGroup<Context>, configuration: ServerConfiguration) {
        var simulator = SimulatorConfiguration()
        simulator.bundleID = configuration.bundleID
        simulator.sharedSecret = configuration.sharedSecret
        simulator.notificationURL = configuration.ownURL + "/v1/notifications/appstore"
        addSimulatorRoutes(to: group, configuration: simulator, signingChain: chain, apiKey: apiKey)
    }
}
