import Hummingbird
import HummingbirdCore
import Logging
import NIOCore

/// Hummingbird's HTTP/1 channel with Stockroom's connection limits: its idle timeout
/// (`--idle-timeout`, closing a connection with no request in progress) and a header deadline
/// in front (`--header-timeout`). A zero duration turns either off.
struct LimitedHTTP1Channel: ServerChildChannel {
    typealias Value = HTTP1Channel.Value

    private let http1: HTTP1Channel
    private let headerTimeout: TimeAmount?

    init(responder: @escaping HTTPChannelHandler.Responder, idleTimeout: Duration, headerTimeout: Duration) {
        let idle = idleTimeout > .zero ? TimeAmount(idleTimeout) : nil
        self.headerTimeout = headerTimeout > .zero ? TimeAmount(headerTimeout) : nil
        let signal = self.headerTimeout != nil
        http1 = HTTP1Channel(
            responder: responder, configuration: .init(additionalChannelHandlers: signal ? [RequestHeadSignal()] : [], idleTimeout: idle))
    }

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        guard let headerTimeout else { return http1.setup(channel: channel, logger: logger) }
        return channel.eventLoop.makeCompletedFuture {
            try channel.pipeline.syncOperations.addHandler(HeaderDeadlineHandler(timeout: headerTimeout), position: .first)
        }.flatMap {
            http1.setup(channel: channel, logger: logger)
        }
    }

    func handle(value: Value, logger: Logger) async {
        await http1.handle(value: value, logger: logger)
    }
}

extension HTTPServerBuilder {
    /// HTTP/1 with the idle and header timeouts of `configuration`.
    static func http1(limitsOf configuration: ServerConfiguration) -> HTTPServerBuilder {
        let idle = configuration.idleTimeout
        let header = configuration.headerTimeout
        return HTTPServerBuilder { responder in
            LimitedHTTP1Channel(responder: responder, idleTimeout: idle, headerTimeout: header)
        }
    }
}
