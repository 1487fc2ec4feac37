public import Hummingbird
public import Logging

/// Builds the App Store simulator: `stockroom simulator`, tests, and (in-process) `serve`.
public func buildSimulatorApplication(
    configuration: SimulatorConfiguration,
    logger: Logger = Logger(label: "stockroom.simulator")
) -> some ApplicationProtocol {
    let state = SimulatorState(configuration: configuration)
    let router = Router()
    UpstreamController(state: state).addRoutes(to: router)
    ControlController(state: state).addRoutes(to: router.group("sim"))
    return Application(
        router: router,
        configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: "AppStoreSimulator"),
        logger: logger)
}
