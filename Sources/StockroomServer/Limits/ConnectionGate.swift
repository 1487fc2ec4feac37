import NIOCore
import StockroomCore
import Synchronization

/// Caps the client connections open at once (`--max-connections`), so a flood of idle or slow
/// connections never takes the descriptors the process needs for its ledger, content files and
/// upstream calls.
///
/// At the cap, a new connection takes the place of the oldest one with no request in progress
/// (idle between requests, or still trickling its head): a flood of idle connections cannot
/// keep a buyer out. Only when every connection is busy is the new one answered 503 and closed.
public final class ConnectionGate: Sendable {
    /// Connections allowed open at once.
    public let limit: Int
    private let registry = Mutex(Registry())

    private struct Registry {
        var open: [ObjectIdentifier: Entry] = [:]
        var arrivals: UInt64 = 0
    }

    private struct Entry {
        let channel: any Channel
        let activity: ConnectionActivity
        let arrival: UInt64
    }

    public init(limit: Int) {
        self.limit = max(1, limit)
        StockroomMetrics.registerConnectionCuts()
    }

    /// Connections open now.
    public var count: Int { registry.withLock { $0.open.count } }

    /// Counts `channel` in and returns what its handlers report its requests to; at the cap,
    /// closes the oldest idle connection to make room, or, with none idle, returns nil: the
    /// channel then gets `ConnectionRefusal`, which answers 503 and closes it. An admitted
    /// channel is counted out when it closes.
    func admit(_ channel: any Channel) -> ConnectionActivity? {
        let activity = ConnectionActivity()
        let key = ObjectIdentifier(channel)
        let (admitted, evicted, open) = registry.withLock { registry -> (Bool, (any Channel)?, Int) in
            var evicted: (any Channel)?
            if registry.open.count >= limit {
                var oldest: (key: ObjectIdentifier, entry: Entry)?
                for (key, entry) in registry.open where entry.activity.isIdle && entry.arrival < (oldest?.entry.arrival ?? .max) {
                    oldest = (key, entry)
                }
                guard let oldest else { return (false, nil, registry.open.count) }
                registry.open[oldest.key] = nil
                evicted = oldest.entry.channel
            }
            registry.arrivals += 1
            registry.open[key] = Entry(channel: channel, activity: activity, arrival: registry.arrivals)
            return (true, evicted, registry.open.count)
        }
        StockroomMetrics.connectionsOpen(open)
        if let evicted {
            StockroomMetrics.connectionCut(.overCapacity)
            evicted.close(promise: nil)
        }
        guard admitted else {
            StockroomMetrics.connectionCut(.overCapacity)
            return nil
        }
        channel.closeFuture.whenComplete { [self] _ in
            let open = registry.withLock { registry in
                registry.open[key] = nil
                return registry.open.count
            }
            StockroomMetrics.connectionsOpen(open)
        }
        return activity
    }

    /// What a connection past the cap reads before it is closed: the API's JSON error shape.
    static let busy: String = {
        let body = #"{"error":{"code":"too_many_connections","message":"The server is at its connection limit; retry shortly."}}"#
        return "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json; charset=utf-8\r\nretry-after: 1\r\n"
            + "connection: close\r\ncontent-length: \(body.utf8.count)\r\n\r\n" + body
    }()
}

/// Whether a connection has a request in progress (a head read whose response has not ended):
/// set by its `ConnectionClock`, read by `ConnectionGate` when it needs room.
final class ConnectionActivity: Sendable {
    private let requests = Atomic(0)

    var isIdle: Bool { requests.load(ordering: .relaxed) == 0 }

    func requestStarted() { requests.wrappingAdd(1, ordering: .relaxed) }

    func requestEnded() { requests.wrappingSubtract(1, ordering: .relaxed) }
}

/// A connection the gate refused: it reads nothing, answers 503 as soon as it is active, and
/// closes.
final class ConnectionRefusal: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer

    func channelActive(context: ChannelHandlerContext) {
        let context = context.loopBound
        context.value.writeAndFlush(NIOAny(ByteBuffer(string: ConnectionGate.busy))).whenComplete { _ in
            context.value.close(promise: nil)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {}
}
