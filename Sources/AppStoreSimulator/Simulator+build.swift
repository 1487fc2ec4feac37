import Foundation
public import Hummingbird
public import Logging
import StockroomCore

/// Builds the App Store simulator: `stockroom simulator`, tests, and (in-process) `serve`.
public func buildSimulatorApplication(
    configuration: SimulatorConfiguration,
    logger: Logger = Logger(label: "stockroom.simulator")
) throws -> some ApplicationProtocol {
    let router = Router()
    addSimulatorRoutes(to: router.group(), configuration: configuration, signingChain: try SigningChain(), apiKey: try ServerAPIKey())
    return Application(
        router: router,
        configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: "AppStoreSimulator"),
        logger: logger)
}

/// Mounts the simulator's routes (`verifyReceipt`, `sandbox/verifyReceipt`, `sim/...`) on
/// `group`: how `stockroom serve` runs it in-process under `/simulator`.
public func addSimulatorRoutes<Context: RequestContext>(
    to group: RouterGroup<Context>, configuration: SimulatorConfiguration, signingChain: SigningChain, apiKey: ServerAPIKey
) {
    let state = SimulatorState(configuration: configuration, signingChain: signingChain, apiKey: apiKey)
    UpstreamController(state: state).addRoutes(to: group)
    LifecycleController(state: state).addRoutes(to: group)
    ControlController(state: state).addRoutes(to: group.group("sim"))
    group.get("sim/api-key") { _, _ in
        let body: [String: String] = ["keyId": apiKey.keyID, "issuerId": apiKey.issuerID, "privateKey": apiKey.privateKey.pem]
        return Response(
            status: .ok, headers: [.contentType: "application/json"],
            body: .init(byteBuffer: ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: body, options: [.sortedKeys]))))
    }
    group.get("sim/root.pem") { _, _ in
        Response(
            status: .ok, headers: [.contentType: "application/x-pem-file"],
            body: .init(byteBuffer: ByteBuffer(string: signingChain.root.pem)))
    }
    HistoryController(state: state).addRoutes(to: group)
}
