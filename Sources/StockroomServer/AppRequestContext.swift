public import Hummingbird

/// The request context of every Stockroom route.
public struct AppRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage

    public init(source: Source) {
        self.coreContext = .init(source: source)
    }

    /// Request bodies (receipts, JSON) are small; past 1 MiB is 413.
    public var maxUploadSize: Int { 1 << 20 }
}
