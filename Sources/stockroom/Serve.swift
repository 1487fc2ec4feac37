import ArgumentParser
import Hummingbird
import Logging
import Metrics
import Prometheus
import StockroomCore
import StockroomServer

/// `stockroom serve`: runs the HTTP server until SIGTERM or SIGINT.
struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the server: catalogue, downloads, ledger.",
        discussion: """
            With no options it serves the sample catalogue from ./catalog and ./content, keeps its
            ledger in ./stockroom.sqlite, and verifies with Apple. --upstream simulator (what
            `make serve` passes) mounts the App Store simulator under /simulator for development,
            on a loopback --host only. It refuses to start, with one line saying why, on a bad
            catalogue, a port in use, a database it cannot write, a secret shorter than 32 bytes,
            or the simulator on a public host. SIGTERM or SIGINT stops it gracefully.
            """
    )

    @OptionGroup var options: ServerOptions

    func run() async throws {
        let configuration: StockroomServer.ServerConfiguration
        do {
            configuration = try options.configuration()
        } catch let refusal as ConfigurationRefusal {
            fail(refusal.description)
        }
        StreamingMemory.bound()
        let logLevel = configuration.logLevel
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = logLevel
            return handler
        }
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))

        let application: any ApplicationProtocol
        do {
            application = try await buildApplication(configuration: configuration, metrics: registry)
        } catch let error as StartupError {
            fail(error.description)
        } catch {
            fail("the server cannot start: \(error)")
        }
        do {
            try await application.runService()
        } catch {
            fail("could not serve on \(configuration.host):\(configuration.port): \(error)")
        }
    }
}
