import HTTPTypes
public import Hummingbird
public import NIOCore

/// The request context of every Stockroom route.
public struct AppRequestContext: RequestContext, RemoteAddressRequestContext {
    public var coreContext: CoreRequestContextStorage
    /// The peer of the connection: what the per-client upstream limit counts by; nil in router
    /// tests, which have no socket.
    public let remoteAddress: SocketAddress?

    public init(source: ApplicationRequestContextSource) {
        self.coreContext = .init(source: source)
        self.remoteAddress = source.channel.remoteAddress
    }

    /// Request bodies (receipts, JSON) are small; past 1 MiB is 413.
    public var maxUploadSize: Int { 1 << 20 }

    /// The address per-client limits count for `request`: the peer, or behind a proxy on this
    /// machine the last `X-Forwarded-For` hop it added (see `ClientAddress`).
    public func clientAddress(of request: Request) -> String {
        ClientAddress.of(peer: remoteAddress, forwardedFor: request.headers[.xForwardedFor])
    }
}

extension RemoteAddressRequestContext {
    /// The client's IP address as text, for per-client limits ("unknown" for a Unix socket).
    var clientAddress: String { remoteAddress?.ipAddress ?? "unknown" }
}

extension HTTPField.Name {
    static let xForwardedFor = Self("X-Forwarded-For")!
}
