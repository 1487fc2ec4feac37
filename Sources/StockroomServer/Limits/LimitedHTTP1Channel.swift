import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import ServiceLifecycle
import StockroomCore
import StockroomHTTP

/// Hummingbird's HTTP/1 channel with Stockroom's connection limits (`ConnectionLimits`): a cap on
/// open connections, an idle timeout, a header deadline, a body deadline and minimum rate, a
/// minimum send rate, and a bounded drain on graceful shutdown. A zero duration or rate turns
/// that one off.
struct LimitedHTTP1Channel: ServerChildChannel {
    typealias Value = HTTP1Channel.Value

    private let http1: HTTP1Channel
    private let limits: ConnectionLimits
    private let gate: ConnectionGate?
    private let catalog: CatalogFastPath?

    init(responder: @escaping HTTPChannelHandler.Responder, limits: ConnectionLimits, gate: ConnectionGate?, catalog: CatalogFastPath?) {
        self.limits = limits
        self.gate = gate
        self.catalog = catalog
        let body = limits.bodyTimeout > .zero ? TimeAmount(limits.bodyTimeout) : nil
        let rate = limits.bodyMinimumRate
        // No idle timeout of Hummingbird's: `ConnectionClock` keeps it, seeing every request.
        http1 = HTTP1Channel(
            responder: responder,
            configuration: .init(
                additionalChannelHandlers: [RequestHeadSignal()]
                    + (body.map { [BodyDeadlineHandler(timeout: $0, minimumRate: rate)] } ?? []),
                idleTimeout: nil))
    }

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        let activity = gate?.admit(channel)
        let refused = gate != nil && activity == nil
        let limits = self.limits
        return channel.eventLoop.makeCompletedFuture { [activity] in
            let pipeline = channel.pipeline.syncOperations
            if refused {
                // Answered 503 and closed once active; nothing it sends reaches a route.
                try pipeline.addHandler(ConnectionRefusal(), position: .first)
                return
            }
            if let catalog { try pipeline.addHandler(catalog.handler(), position: .first) }
            try pipeline.addHandler(
                ConnectionClock(
                    headerTimeout: limits.headerTimeout > .zero ? TimeAmount(limits.headerTimeout) : nil,
                    idleTimeout: limits.idleTimeout > .zero ? TimeAmount(limits.idleTimeout) : nil, activity: activity),
                position: .first)
            // Below the HTTP encoder and above the send-rate watch, which so counts a body
            // written through it (a file's sendfile regions) as it counts any other.
            try pipeline.addHandler(DirectBodyHandler(), position: .first)
            if limits.sendTimeout > .zero, limits.minimumSendRate > 0 {
                try pipeline.addHandler(
                    SendRateHandler(window: TimeAmount(limits.sendTimeout), minimumRate: limits.minimumSendRate), position: .first)
            }
        }.flatMap {
            http1.setup(channel: channel, logger: logger)
        }
    }

    func handle(value: Value, logger: Logger) async {
        let channel = value.channel
        let grace = limits.shutdownGrace
        await withGracefulShutdownHandler {
            await http1.handle(value: value, logger: logger)
        } onGracefulShutdown: {
            // Hummingbird lets the request in progress finish; a stream that outlasts the grace is cut.
            channel.eventLoop.scheduleTask(in: TimeAmount(grace)) {
                guard channel.isActive else { return }
                StockroomMetrics.connectionCut(.shutdown)
                channel.close(promise: nil)
            }
        }
    }
}

extension HTTPServerBuilder {
    /// HTTP/1 with the connection limits of `configuration`, counted by `gate`, and
    /// `GET /v1/catalog` answered by `catalog` on the event loop.
    static func http1(limits: ConnectionLimits, gate: ConnectionGate?, catalog: CatalogFastPath?) -> HTTPServerBuilder {
        HTTPServerBuilder { responder in
            LimitedHTTP1Channel(responder: responder, limits: limits, gate: gate, catalog: catalog)
        }
    }
}
