import HTTPTypes
public import Hummingbird
public import NIOCore
public import StockroomHTTP

/// The request context of every Stockroom route.
public struct AppRequestContext: RequestContext, RemoteAddressRequestContext, ClientAddressContext, ConnectionContext {
    public var coreContext: CoreRequestContextStorage
    /// The connection's peer; nil in router tests, which have no socket.
    public let remoteAddress: SocketAddress?
    private let channel: any Channel
    /// The proxies whose forwarding headers count (`--trusted-proxy`), set by
    /// `TrustedProxyMiddleware` before any route runs; none until then.
    public var trustedProxies = TrustedProxies.none

    public init(source: Source) {
        self.coreContext = .init(source: source)
        self.remoteAddress = source.channel.remoteAddress
        self.channel = source.channel
    }

    public func directBody() async -> DirectBody? {
        await DirectBody.of(channel)
    }

    /// Request bodies (receipts, JSON) are small; past 1 MiB is 413.
    public var maxUploadSize: Int { 1 << 20 }
    /// `request.decode` and `ResponseEncodable` answers, with Stockroom's JSON rules.
    public var requestDecoder: OperatorJSONDecoder { OperatorJSONDecoder() }
    public var responseEncoder: OperatorJSONEncoder { OperatorJSONEncoder() }

    /// The address per-client limits count for `request` (see `ClientAddress`).
    public func clientAddress(of request: Request) -> String {
        ClientAddress.of(peer: remoteAddress, forwardedFor: request.headers[.xForwardedFor], trusting: trustedProxies)
    }

    /// Whether the request came through a trusted proxy (whose `X-Forwarded-Proto` counts).
    public var isFromTrustedProxy: Bool {
        guard let peer = remoteAddress?.ipAddress else { return false }
        return trustedProxies.contains(peer)
    }
}

extension HTTPField.Name {
    static let xForwardedFor = Self("X-Forwarded-For")!
}

/// A request context that reaches its connection below Hummingbird's body writer.
public protocol ConnectionContext: RequestContext {
    /// The connection's `DirectBody`, nil when its pipeline has none (a router test's channel).
    func directBody() async -> DirectBody?
}

/// A request context that can tell which client a request comes from, for per-client limits.
public protocol ClientAddressContext: RequestContext {
    /// The address per-client limits count for `request`.
    func clientAddress(of request: Request) -> String
    /// Whether the connection's peer is a trusted proxy, whose forwarding headers count.
    var isFromTrustedProxy: Bool { get }
}

extension RemoteAddressRequestContext {
    /// The peer's IP address as text ("unknown" without one). Behind a proxy every client is the
    /// proxy: a `ClientAddressContext` answers `clientAddress(of:)` with the client the trusted
    /// proxy saw instead.
    var clientAddress: String { remoteAddress?.ipAddress ?? "unknown" }
}
