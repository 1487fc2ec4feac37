public import Hummingbird
public import Logging
public import StockroomCore

/// Builds the App Store simulator: `stockroom simulator`, tests, and (in-process) `serve`.
public func buildSimulatorApplication(
    configuration: SimulatorConfiguration,
    logger: Logger = Logger(label: "stockroom.simulator")
) throws -> some ApplicationProtocol {
    let router = Router()
    addSimulatorRoutes(to: router.group(), configuration: configuration, signingChain: try SigningChain())
    return Application(
        router: router,
        configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: "AppStoreSimulator"),
        logger: logger)
}

/// Mounts the simulator's routes (`verifyReceipt`, `sandbox/verifyReceipt`, `sim/...`) on
/// `group`: how `stockroom serve` runs it in-process under `/simulator`.
public func addSimulatorRoutes<Context: RequestContext>(
    to group: RouterGroup<Context>, configuration: SimulatorConfiguration, signingChain: SigningChain
) {
    let state = SimulatorState(configuration: configuration, signingChain: signingChain)
    UpstreamController(state: state).addRoutes(to: group)
    ControlController(state: state).addRoutes(to: group.group("sim"))
    group.get("sim/root.pem") { _, _ in
        Response(status: .ok, headers: [.contentType: "application/x-pem-file"], body: .init(byteBuffer: ByteBuffer(string: signingChain.root.pem)))
    }
}
