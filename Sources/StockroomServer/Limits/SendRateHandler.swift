import NIOCore
import StockroomCore

/// Closes a connection whose reader takes the response slower than `--min-send-rate`: while
/// bytes wait to be sent, each `--send-timeout` window must see at least rate × window of them
/// reach the socket. A client that stops reading (a zero TCP window, which the kernel never times
/// out) therefore frees its stream slot and descriptor within one window; the download is
/// recorded interrupted and the client resumes later with `Range`.
///
/// It sits first in the pipeline, where writes are the bytes handed to the socket, and counts a
/// write as sent when its promise completes. A `sendfile` region is one write of up to a few
/// megabytes, which a reader at the minimum rate takes longer than a window to drain: a window
/// that saw no write complete asks the kernel how many bytes the reader's side acknowledged
/// meanwhile (Linux's `tcpi_bytes_acked`), so an honest slow reader is never cut for the size
/// of a write. Where the kernel cannot say, the completed writes alone count.
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
    /// The bytes the peer had acknowledged when the window started, when the kernel says.
    private var windowStartAcknowledged: UInt64?
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
        windowStartAcknowledged = nil
        Self.acknowledged(context.channel) { [self] in windowStartAcknowledged = $0 }
        check = context.eventLoop.assumeIsolated().scheduleTask(in: window) { [self] in
            check = nil
            guard waiting > 0, let context = self.context else { return }
            guard sent - windowStartSent < minimumBytes else { return startWindow(context) }
            let start = windowStartAcknowledged
            Self.acknowledged(context.channel) { [self] now in
                guard waiting > 0, let context = self.context else { return }
                if let start, let now, now >= start, now - start >= UInt64(minimumBytes) {
                    startWindow(context)
                } else {
                    StockroomMetrics.connectionCut(.slowReader)
                    context.close(promise: nil)
                }
            }
        }
    }

    /// The bytes the peer's TCP acknowledged on `channel` so far (`tcpi_bytes_acked`, Linux 4.1
    /// and later), or nil: another platform, an older kernel, or a channel without a socket. Read
    /// on the event loop, where `getsockopt` answers at once.
    private static func acknowledged(_ channel: any Channel, _ body: @escaping (UInt64?) -> Void) {
        #if os(Linux)
            guard let socket = channel as? any SocketOptionProvider else { return body(nil) }
            let info: EventLoopFuture<TCPInfoHead> = socket.unsafeGetSocketOption(level: .tcp, name: .tcp_info)
            info.assumeIsolated().whenComplete { result in
                guard case .success(let head) = result, head.bytesAcknowledged > 0 else { return body(nil) }
                body(head.bytesAcknowledged)
            }
        #else
            body(nil)
        #endif
    }
}

/// The first 128 bytes of Linux's `struct tcp_info` (`linux/tcp.h`; Glibc's copy of the struct
/// stops before the field read here). The kernel fills what it has and leaves the rest zero.
private struct TCPInfoHead: Sendable {
    private var words:
        (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) =
            (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)

    /// `tcpi_bytes_acked`, at byte 120 since Linux 4.1 (the ABI only grows at its end); zero
    /// when the kernel is older.
    var bytesAcknowledged: UInt64 { words.15 }
}
