import NIOCore
import StockroomCore

/// Closes a connection whose reader takes the response slower than `--min-send-rate`: while
/// bytes wait to be sent, each `--send-timeout` window must see at least rate × window of them
/// reach the socket. A client that stops reading (a zero TCP window, which the kernel never times
/// out) therefore frees its stream slot and descriptor within one window; the download is
/// recorded interrupted and the client resumes later with `Range`.
///
/// It sits first in the pipeline, where writes are the bytes handed to the socket, and counts a
/// write as sent when its promise completes.
final class SendRateHandler: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = IOData
    typealias OutboundOut = IOData

    private let window: TimeAmount
    private let minimumBytes: Int

    /// Bytes written to the socket since the connection opened.
    private var sent = 0
    /// Bytes handed to the pipeline and not yet written.
    private var waiting = 0
    private var windowStartSent = 0
    private var check: Scheduled<Void>?
    private var context: ChannelHandlerContext?

    /// `minimumRate` bytes per second over each `window`.
    init(window: TimeAmount, minimumRate: Int) {
        self.window = window
        self.minimumBytes = max(1, Int(Double(minimumRate) * Double(window.nanoseconds) / 1e9))
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        check?.cancel()
        check = nil
        self.context = nil
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let size = unwrapOutboundIn(data).readableBytes
        guard size > 0 else { return context.write(data, promise: promise) }
        if waiting == 0 { startWindow(context) }
        waiting += size
        let written = promise ?? context.eventLoop.makePromise()
        written.futureResult.assumeIsolated().whenComplete { [self] result in
            waiting -= size
            if case .success = result { sent += size }
        }
        context.write(data, promise: written)
    }

    /// Bytes are waiting: the window starts now, unless one runs already.
    private func startWindow(_ context: ChannelHandlerContext) {
        guard check == nil else { return }
        windowStartSent = sent
        check = context.eventLoop.assumeIsolated().scheduleTask(in: window) { [self] in
            check = nil
            guard waiting > 0, let context = self.context else { return }
            if sent - windowStartSent < minimumBytes {
                StockroomMetrics.connectionCut(.slowReader)
                context.close(promise: nil)
            } else {
                startWindow(context)
            }
        }
    }
}
