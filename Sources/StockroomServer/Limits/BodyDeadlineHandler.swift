import NIOCore
import NIOHTTPTypes
import StockroomCore

/// Closes a connection whose request body does not arrive in time (`--body-timeout`) or trickles
/// in slower than `--body-min-rate` once it has had a few seconds: a body sent a byte every few
/// seconds holds no descriptor past either. Counted from the request head; a request without a
/// body ends at once.
///
/// It sits after the HTTP decoder, beside `RequestHeadSignal`, and passes every part through.
final class BodyDeadlineHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart

    /// How long a body may take in all.
    private let timeout: TimeAmount
    /// Bytes per second a body must average once `rateGrace` has passed; 0 checks no rate.
    private let minimumRate: Int
    /// How long a body may take before its rate counts: a phone's first packets can be slow.
    static let rateGrace = TimeAmount.seconds(5)
    private static let tick = TimeAmount.seconds(1)

    private var started: NIODeadline?
    private var received = 0
    private var check: Scheduled<Void>?

    init(timeout: TimeAmount, minimumRate: Int) {
        self.timeout = timeout
        self.minimumRate = minimumRate
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head:
            started = .now()
            received = 0
            schedule(context)
        case .body(let buffer):
            received += buffer.readableBytes
        case .end:
            stop()
        }
        context.fireChannelRead(data)
    }

    func channelInactive(context: ChannelHandlerContext) {
        stop()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        stop()
    }

    private func schedule(_ context: ChannelHandlerContext) {
        check?.cancel()
        check = context.eventLoop.assumeIsolated().scheduleTask(in: Self.tick) { [self] in
            check = nil
            guard let started else { return }
            let elapsed = NIODeadline.now() - started
            let tooLong = elapsed >= timeout
            let seconds = Double(elapsed.nanoseconds) / 1e9
            let tooSlow = minimumRate > 0 && elapsed >= Self.rateGrace && Double(received) < Double(minimumRate) * seconds
            if tooLong || tooSlow {
                stop()
                StockroomMetrics.connectionCut(.slowBody)
                context.close(promise: nil)
            } else {
                schedule(context)
            }
        }
    }

    private func stop() {
        started = nil
        check?.cancel()
        check = nil
    }
}
