import ArgumentParser
import Foundation
import StockroomServer

/// The limits that keep floods, slow clients and shutdowns from holding the server (`serve`
/// only), each also read from `STOCKROOM_<NAME>`.
struct PressureOptions: ParsableArguments {
    private static let defaults = StockroomServer.ConnectionLimits()

    private static func duration(_ what: String, _ variable: String, _ value: Duration) -> ArgumentHelp {
        ArgumentHelp("\(what) (STOCKROOM_\(variable); default \(DurationArgument.format(value))).", valueName: "duration")
    }

    @Option(
        help: ArgumentHelp(
            """
            Client connections open at once; past it, a new one is answered 503 and closed (STOCKROOM_MAX_CONNECTIONS; default: from \
            the descriptor limit, which serve raises to its hard limit at start, leaving room for files, the ledger and upstream \
            calls).
            """,
            valueName: "count"))
    var maxConnections: Int?

    @Option(
        help: PressureOptions.duration(
            "Close a connection whose request body is not complete this long after its head; 0s off", "BODY_TIMEOUT", defaults.bodyTimeout))
    var bodyTimeout: String?

    @Option(
        help: ArgumentHelp(
            """
            Bytes per second a request body must average after its first 5 seconds; 0 off (STOCKROOM_BODY_MIN_RATE; default \
            \(defaults.bodyMinimumRate)).
            """,
            valueName: "bytes"))
    var bodyMinRate: Int?

    @Option(
        help: ArgumentHelp(
            """
            Bytes per second a client must read a response at, measured over each --send-timeout window while bytes wait; a slower \
            stream is closed and recorded interrupted, and the client resumes; 0 off (STOCKROOM_MIN_SEND_RATE; default \
            \(defaults.minimumSendRate)).
            """,
            valueName: "bytes"))
    var minSendRate: Int?

    @Option(help: PressureOptions.duration("The window --min-send-rate is measured over; 0s off", "SEND_TIMEOUT", defaults.sendTimeout))
    var sendTimeout: String?

    @Option(
        help: PressureOptions.duration(
            "On SIGTERM, how long requests in progress may go on before their connections are closed", "SHUTDOWN_GRACE",
            defaults.shutdownGrace))
    var shutdownGrace: String?

    @Option(
        help: ArgumentHelp(
            """
            A proxy whose X-Forwarded-For and X-Forwarded-Proto count, as an address or CIDR block; repeatable \
            (STOCKROOM_TRUSTED_PROXY, comma-separated; default none: every client is its connection's peer). `stockroom deploy nginx` \
            says which to name.
            """,
            valueName: "address"))
    var trustedProxy: [String] = []

    @Option(
        help: ArgumentHelp(
            """
            Serve /metrics on this loopback host:port only, not on the public port (STOCKROOM_METRICS_ADDRESS; default: on the main \
            port).
            """,
            valueName: "host:port"))
    var metricsAddress: String?

    @Option(
        help: ArgumentHelp(
            """
            Concurrent content streams to one client address, an IPv6 /64 counted as one (STOCKROOM_MAX_DOWNLOADS_PER_CLIENT; default \
            \(StockroomServer.ServerConfiguration().maxDownloadsPerClient)).
            """,
            valueName: "count"))
    var maxDownloadsPerClient: Int?

    /// Sets the limits given by flag or variable; a malformed one is a usage error naming the flag.
    func apply(
        to configuration: inout StockroomServer.ServerConfiguration, environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws {
        let flags = FlagValues(environment: environment)
        let counts = 1...100_000_000, rates = 0...100_000_000
        var limits = configuration.connectionLimits
        if let count = try flags.number(maxConnections, "MAX_CONNECTIONS", option: "max-connections", in: counts) {
            limits.maxConnections = count
        }
        if let body = try flags.duration(bodyTimeout, "BODY_TIMEOUT", option: "body-timeout") { limits.bodyTimeout = body }
        if let rate = try flags.number(bodyMinRate, "BODY_MIN_RATE", option: "body-min-rate", in: rates) { limits.bodyMinimumRate = rate }
        if let rate = try flags.number(minSendRate, "MIN_SEND_RATE", option: "min-send-rate", in: rates) { limits.minimumSendRate = rate }
        if let window = try flags.duration(sendTimeout, "SEND_TIMEOUT", option: "send-timeout") { limits.sendTimeout = window }
        if let grace = try flags.duration(shutdownGrace, "SHUTDOWN_GRACE", option: "shutdown-grace") { limits.shutdownGrace = grace }
        configuration.connectionLimits = limits
        let proxies =
            trustedProxy.isEmpty
            ? (environment["STOCKROOM_TRUSTED_PROXY"]?.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } ?? [])
            : trustedProxy
        do {
            configuration.trustedProxies = try TrustedProxies(parsing: proxies)
            if let address = flags.text(metricsAddress, "METRICS_ADDRESS") {
                configuration.metricsAddress = try MetricsAddress(parsing: address)
            }
        } catch let error as TrustedProxyError {
            throw ValidationError(error.description)
        } catch let error as MetricsAddressError {
            throw ValidationError(error.description)
        }
        if let share = try flags.number(maxDownloadsPerClient, "MAX_DOWNLOADS_PER_CLIENT", option: "max-downloads-per-client", in: counts) {
            configuration.maxDownloadsPerClient = share
        }
    }
}
