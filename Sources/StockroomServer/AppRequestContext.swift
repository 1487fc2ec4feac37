import HTTPTypes
public import Hummingbird
public import NIOCore

/// The request context of every Stockroom route.
public struct AppRequestContext: RequestContext, RemoteAddressRequestContext, ClientAddressContext {
    public var coreContext: CoreRequestContextStorage
    /// The connection's peer; nil in router tests, which have no socket.
    public let remoteAddress: SocketAddress?

    public init(source: Source) {
        self.coreContext = .init(source: source)
        self.remoteAddress = source.channel.remoteAddress
    }

    /// Request bodies (receipts, JSON) are small; past 1 MiB is 413.
    public var maxUploadSize: Int { 1 << 20 }

    /// The address per-client limits count for `request` (see `ClientAddress`).
    public func clientAddress(of request: Request) -> String {
        ClientAddress.of(peer: remoteAddress, forwardedFor: request.headers[.xForwardedFor])
    }
}

extension HTTPField.Name {
    static let xForwardedFor = Self("X-Forwarded-For")!
}

/// A request context that can tell which client a request comes from, for per-client limits.
public protocol ClientAddressContext: RequestContext {
    /// The address per-client limits count for `request`.
    func clientAddress(of request: Request) -> String
}

extension RemoteAddressRequestContext {
    /// The peer's IP address as text ("unknown" without one). Behind a local proxy every client
    /// is the proxy: a `ClientAddressContext` answers `clientAddress(of:)` with the proxy's
    /// last `X-Forwarded-For` hop instead.
    var clientAddress: String { remoteAddress?.ipAddress ?? "unknown" }
}
