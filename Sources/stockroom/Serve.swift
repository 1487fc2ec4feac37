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
            ledger in ./stockroom.sqlite, and verifies against the built-in App Store simulator.
            It refuses to start, with one line saying why, on a bad catalogue, a port in use, or
            a database it cannot write. SIGTERM or SIGINT stops it gracefully.
            """
    )

    @OptionGroup var options: ServerOptions

    func run() async throws {
        let configuration = try options.configuration()
        StreamingMemory.bound()
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = configuration.logLevel
            return handler
        }
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))

        let application: any ApplicationProtocol
        do {
            application = try await buildApplication(configuration: configuration, metrics: registry)
        } catch let error as StartupError {
            fail(error.description)
        }
        do {
            try await application.runService()
        } catch {
            fail("could not serve on \(configuration.host):\(configuration.port): \(error)")
        }
    }
}
