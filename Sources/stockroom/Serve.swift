import ArgumentParser
import Foundation
import Hummingbird
import Logging
import Metrics
import Prometheus
import ServiceLifecycle
import StockroomCore
import StockroomServer

/// `stockroom serve`: runs the HTTP server until SIGTERM or SIGINT.
struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the server: catalogue, downloads, ledger.",
        discussion: """
            With no options it serves the sample catalogue from ./catalog and ./content, keeps its \
            ledger in ./stockroom.sqlite, and verifies receipts with Apple. --upstream simulator \
            (what `make serve` passes) mounts the App Store simulator under /simulator for \
            development, on a loopback --host only.

            It refuses to start, with one line saying why, on a bad catalogue, a port in use, a \
            database it cannot write, a secret shorter than 32 bytes, or the simulator on a public \
            host. A malformed limit is a usage error. SIGTERM or SIGINT stops it gracefully.
            """
    )

    @OptionGroup var options: ServerOptions
    @OptionGroup(title: "Limits") var limits: LimitOptions
    @OptionGroup(title: "Connections under pressure") var pressure: PressureOptions
    @OptionGroup(title: "nginx offload") var offload: OffloadOptions
    @OptionGroup(title: "Purchase lifecycle") var lifecycle: LifecycleOptions
    @OptionGroup(title: "Pending proofs") var pendingProofs: PendingProofOptions
    @OptionGroup(title: "Webhooks") var webhooks: WebhookOptions

    func run() async throws {
        var configuration: StockroomServer.ServerConfiguration
        do {
            configuration = try options.configuration()
        } catch let refusal as ConfigurationRefusal {
            fail(refusal.description)
        }
        try limits.apply(to: &configuration)
        try pressure.apply(to: &configuration)
        try offload.apply(to: &configuration)
        try lifecycle.apply(to: &configuration)
        try pendingProofs.apply(to: &configuration)
        try webhooks.apply(to: &configuration)
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
            // Each connection is closed once --shutdown-grace has passed; should anything still
            // hold on a little after that, the group cancels it.
            var group = ServiceGroupConfiguration(
                services: [application], gracefulShutdownSignals: [.sigterm, .sigint], logger: application.logger)
            group.maximumGracefulShutdownDuration = configuration.connectionLimits.shutdownGrace + .seconds(5)
            try await ServiceGroup(configuration: group).run()
        } catch {
            fail("could not serve on \(configuration.host):\(configuration.port): \(error)")
        }
    }
}

/// The limits a serious operator sets (`serve` only), each also read from `STOCKROOM_<NAME>`.
struct LimitOptions: ParsableArguments {
    private static let defaults = StockroomServer.ServerConfiguration()

    private static func duration(_ what: String, _ variable: String, _ value: Duration) -> ArgumentHelp {
        ArgumentHelp("\(what) (STOCKROOM_\(variable); default \(DurationArgument.format(value))).", valueName: "duration")
    }

    @Option(
        help: LimitOptions.duration(
            "Close a connection with no request in progress after this; 0s never", "IDLE_TIMEOUT", LimitOptions.defaults.idleTimeout))
    var idleTimeout: String?

    @Option(
        help: LimitOptions.duration(
            "Close a connection whose request head is not complete this long after it opens or the request starts; 0s off",
            "HEADER_TIMEOUT", LimitOptions.defaults.headerTimeout))
    var headerTimeout: String?

    @Option(
        help: ArgumentHelp(
            """
            Concurrent content streams in total; past it, 429 with Retry-After (STOCKROOM_MAX_DOWNLOADS; default \
            \(LimitOptions.defaults.maxDownloads)).
            """,
            valueName: "count"))
    var maxDownloads: Int?

    @Option(
        help: ArgumentHelp(
            """
            Concurrent content streams of one purchase, its original transaction, restores included \
            (STOCKROOM_MAX_DOWNLOADS_PER_PURCHASE; default \(LimitOptions.defaults.maxDownloadsPerPurchase)).
            """,
            valueName: "count"))
    var maxDownloadsPerPurchase: Int?

    /// The earlier name, which counted transaction IDs; it now sets the per-purchase share.
    @Option(help: .hidden)
    var maxDownloadsPerTransaction: Int?

    @Option(
        help: ArgumentHelp(
            """
            Requests that reach the App Store per client address, as requests/period (30/m, 100/h, 10/30s) or off \
            (STOCKROOM_UPSTREAM_RATE; default \(UpstreamRate.default)).
            """,
            valueName: "rate"))
    var upstreamRate: String?

    @Option(
        help: LimitOptions.duration(
            "Serve a transaction verified this recently without asking Apple again", "REVERIFY_AFTER",
            LimitOptions.defaults.reverifyInterval))
    var reverifyAfter: String?

    @Option(
        help: LimitOptions.duration(
            "Reuse a valid App Store answer for this long; 0s never", "VERDICT_CACHE", LimitOptions.defaults.verificationCacheInterval))
    var verdictCache: String?

    @Option(
        help: LimitOptions.duration("How long a download token authorises content", "TOKEN_LIFETIME", LimitOptions.defaults.tokenLifetime))
    var tokenLifetime: String?

    @Option(
        help: ArgumentHelp(
            "Serve sandbox purchases (App Review buys there): allow or deny (STOCKROOM_SANDBOX; default allow).", valueName: "allow|deny"))
    var sandbox: String?

    /// Sets the limits given by flag or variable; a malformed one is a usage error naming the flag.
    func apply(
        to configuration: inout StockroomServer.ServerConfiguration, environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws {
        func value(_ flag: String?, _ name: String) -> String? { flag ?? environment["STOCKROOM_\(name)"] }
        func duration(_ flag: String?, _ name: String, _ option: String) throws -> Duration? {
            guard let text = value(flag, name) else { return nil }
            do {
                return try DurationArgument.parse(text)
            } catch {
                throw ValidationError("--\(option): \(error)")
            }
        }
        func count(_ flag: Int?, _ name: String, _ option: String) throws -> Int? {
            guard let text = value(flag.map(String.init), name) else { return nil }
            guard let count = Int(text), (1...1_000_000).contains(count) else {
                throw ValidationError("--\(option) must be a number from 1 to 1000000, not \"\(text)\"")
            }
            return count
        }
        if let idle = try duration(idleTimeout, "IDLE_TIMEOUT", "idle-timeout") { configuration.idleTimeout = idle }
        if let header = try duration(headerTimeout, "HEADER_TIMEOUT", "header-timeout") { configuration.headerTimeout = header }
        if let total = try count(maxDownloads, "MAX_DOWNLOADS", "max-downloads") { configuration.maxDownloads = total }
        if let share = try count(maxDownloadsPerTransaction, "MAX_DOWNLOADS_PER_TRANSACTION", "max-downloads-per-transaction") {
            configuration.maxDownloadsPerPurchase = share
        }
        if let share = try count(maxDownloadsPerPurchase, "MAX_DOWNLOADS_PER_PURCHASE", "max-downloads-per-purchase") {
            configuration.maxDownloadsPerPurchase = share
        }
        if let text = value(upstreamRate, "UPSTREAM_RATE") {
            do {
                configuration.upstreamRate = try UpstreamRate.parse(text)
            } catch {
                throw ValidationError("--upstream-rate: \(error)")
            }
        }
        if let reverify = try duration(reverifyAfter, "REVERIFY_AFTER", "reverify-after") { configuration.reverifyInterval = reverify }
        if let cache = try duration(verdictCache, "VERDICT_CACHE", "verdict-cache") { configuration.verificationCacheInterval = cache }
        if let lifetime = try duration(tokenLifetime, "TOKEN_LIFETIME", "token-lifetime") {
            guard lifetime > .zero else { throw ValidationError("--token-lifetime must be longer than 0s") }
            configuration.tokenLifetime = lifetime
        }
        if let text = value(sandbox, "SANDBOX") {
            guard let policy = SandboxPolicy(rawValue: text) else {
                throw ValidationError("--sandbox must be allow or deny, not \"\(text)\"")
            }
            configuration.sandbox = policy
        }
    }
}

/// Whether nginx sends content bytes (`serve` only), each also read from `STOCKROOM_<NAME>`.
struct OffloadOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            """
            Who sends content bytes: off (Stockroom streams them) or x-accel-redirect (nginx sends them; `stockroom deploy nginx` \
            prints its site) (STOCKROOM_OFFLOAD; default off).
            """,
            valueName: "mode"))
    var offload: String?

    @Option(
        help: ArgumentHelp(
            "The URI prefix of nginx's internal content location (STOCKROOM_OFFLOAD_PREFIX; default /_protected/).", valueName: "prefix"))
    var offloadPrefix: String?

    @Option(
        help: ArgumentHelp(
            """
            Loopback address:port where nginx's syslog delivery reports arrive (STOCKROOM_OFFLOAD_REPORT; default \
            \(StockroomServer.OffloadReportAddress.default)).
            """,
            valueName: "addr:port"))
    var offloadReport: String?

    /// Sets the offload given by flag or variable; a malformed one is a usage error naming the flag.
    func apply(
        to configuration: inout StockroomServer.ServerConfiguration, environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws {
        let mode = offload ?? environment["STOCKROOM_OFFLOAD"] ?? "off"
        do {
            configuration.offload = try ContentOffload.parse(
                mode: mode, prefix: offloadPrefix ?? environment["STOCKROOM_OFFLOAD_PREFIX"],
                report: offloadReport ?? environment["STOCKROOM_OFFLOAD_REPORT"])
        } catch {
            throw ValidationError(error.description)
        }
    }
}
