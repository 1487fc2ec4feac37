import Testing
@testable import AppStoreSimulator

@Suite struct SimulatorConfigurationTests {
    /// The defaults: `stockroom simulator [--host 127.0.0.1] [--port 9090]`.
    @Test func defaultsMatchTheDesign() {
        let configuration = SimulatorConfiguration()
        #expect(configuration.host == "127.0.0.1")
        #expect(configuration.port == 9090)
    }
}
