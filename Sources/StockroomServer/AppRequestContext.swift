public import Hummingbird
public import NIOCore

/// The request context of every Stockroom route.
public struct AppRequestContext: RequestContext, RemoteAddressRequestContext {
    public var coreContext: CoreRequestContextStorage
    /// The peer of the connection: what the per-client upstream limit counts by.
    public let remoteAddress: SocketAddress?

    public init(source: ApplicationRequestContextSource) {
        self.coreContext = .init(source: source)
        self.remoteAddress = source.channel.remoteAddress
    }

    /// Request bodies (receipts, JSON) are small; past 1 MiB is 413.
    public var maxUploadSize: Int { 1 << 20 }
}

extension RemoteAddressRequestContext {
    /// The client's IP address as text, for per-client limits ("unknown" for a Unix socket).
    var clientAddress: String { remoteAddress?.ipAddress ?? "unknown" }
}
