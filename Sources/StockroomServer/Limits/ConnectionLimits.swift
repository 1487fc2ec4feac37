/// The limits each client connection lives under (`serve`'s Limits flags), so that no flood of
/// connections, slow headers, slow bodies or slow readers holds the server: see
/// `LimitedHTTP1Channel`. A zero duration or rate turns that limit off.
public struct ConnectionLimits: Sendable, Equatable {
    /// Open client connections at once (`--max-connections`); nil derives it from the
    /// descriptor limit (`DescriptorLimit.defaultMaxConnections`).
    public var maxConnections: Int?
    /// A connection with no request in progress is closed after this (`--idle-timeout`).
    public var idleTimeout: Duration = .seconds(60)
    /// A request head must be complete this long after the connection opens or the request's
    /// first byte arrives (`--header-timeout`).
    public var headerTimeout: Duration = .seconds(10)
    /// A request body must be complete this long after its head (`--body-timeout`).
    public var bodyTimeout: Duration = .seconds(30)
    /// Bytes per second a request body must average after its first five seconds (`--body-min-rate`).
    public var bodyMinimumRate = 1024
    /// While response bytes wait, each window this long must send `minimumSendRate` × window of
    /// them (`--send-timeout`).
    public var sendTimeout: Duration = .seconds(30)
    /// Bytes per second a reader must take (`--min-send-rate`): 4 KiB/s, which a phone on EDGE
    /// (tens of KB/s) meets; a reader below it is cut and resumes later.
    public var minimumSendRate = 4096
    /// On SIGTERM, how long requests in progress may go on before their connections are closed
    /// (`--shutdown-grace`).
    public var shutdownGrace: Duration = .seconds(10)

    public init() {}
}
