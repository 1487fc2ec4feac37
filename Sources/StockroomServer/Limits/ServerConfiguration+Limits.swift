extension ServerConfiguration {
    /// The stream limiter of `maxDownloads` and `maxDownloadsPerTransaction`: build one per
    /// server and share it between the routes that stream content.
    public func downloadSlots() -> DownloadSlots {
        DownloadSlots(total: maxDownloads, perTransaction: maxDownloadsPerTransaction)
    }

    /// The per-address limiter of `upstreamRate`, or nil when it is off.
    public func upstreamRateLimiter() -> UpstreamRateLimiter? {
        upstreamRate.map { UpstreamRateLimiter(rate: $0) }
    }
}
