extension ServerConfiguration {
    /// The stream limiter of `maxDownloads`, `maxDownloadsPerPurchase` and
    /// `maxDownloadsPerClient`: build one per server and share it between the routes that stream.
    public func downloadSlots() -> DownloadSlots {
        DownloadSlots(total: maxDownloads, perPurchase: maxDownloadsPerPurchase, perClient: maxDownloadsPerClient)
    }

    /// The per-address limiter of `upstreamRate`, or nil when it is off.
    public func upstreamRateLimiter() -> UpstreamRateLimiter? {
        upstreamRate.map { UpstreamRateLimiter(rate: $0) }
    }

    /// A connection with no request in progress is closed after this; zero never closes it.
    public var idleTimeout: Duration {
        get { connectionLimits.idleTimeout }
        set { connectionLimits.idleTimeout = newValue }
    }

    /// A request head must be complete this long after the connection opens or the request's
    /// first byte arrives; zero waits as long as the idle timeout allows.
    public var headerTimeout: Duration {
        get { connectionLimits.headerTimeout }
        set { connectionLimits.headerTimeout = newValue }
    }
}
