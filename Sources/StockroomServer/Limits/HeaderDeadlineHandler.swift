import NIOCore
import NIOHTTPTypes

/// Closes a connection whose request head does not arrive in time (`--header-timeout`): counted
/// from the connection's start, and from the first byte of each later request. A client that
/// trickles header bytes (slowloris) holds no connection past it; waiting between requests is
/// the idle timeout's business. It also tells the connection gate whether a request is in
/// progress, so that the gate makes room by closing idle connections only.
///
/// It sits first in the pipeline to see raw bytes; `RequestHeadSignal`, after the HTTP decoder,
/// tells it when a head is complete and when a response has ended.
final class HeaderDeadlineHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = Any
    typealias OutboundOut = Any

    /// nil sets no deadline: the handler then only reports activity.
    private let timeout: TimeAmount?
    private let activity: ConnectionActivity?
    /// When the head under way must be complete; nil while no clock runs.
    private var deadline: NIODeadline?
    /// One timer at a time, checked when it fires: starting and stopping the clock at every
    /// request only sets `deadline` (a scheduled task made and cancelled per request cost a
    /// tenth of a small request's time).
    private var timer: Scheduled<Void>?
    /// Heads read whose responses have not ended.
    private var openRequests = 0

    init(timeout: TimeAmount?, activity: ConnectionActivity?) {
        self.timeout = timeout
        self.activity = activity
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { startDeadline(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        startDeadline(context)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if openRequests == 0, unwrapInboundIn(data).readableBytes > 0 { startDeadline(context) }
        context.fireChannelRead(data)
    }

    func triggerUserOutboundEvent(context: ChannelHandlerContext, event: Any, promise: EventLoopPromise<Void>?) {
        switch event {
        case RequestHeadSignal.Event.headRead:
            openRequests += 1
            activity?.requestStarted()
            cancelDeadline()
            promise?.succeed()
        case RequestHeadSignal.Event.responseEnded:
            if openRequests > 0 {
                openRequests -= 1
                activity?.requestEnded()
            }
            promise?.succeed()
        default:
            context.triggerUserOutboundEvent(event, promise: promise)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        stopTimer()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        stopTimer()
    }

    /// Starts the clock unless it runs already.
    private func startDeadline(_ context: ChannelHandlerContext) {
        guard deadline == nil, let timeout else { return }
        let due = NIODeadline.now() + timeout
        deadline = due
        if timer == nil { arm(context, at: due) }
    }

    private func cancelDeadline() {
        deadline = nil
    }

    /// A timer for `due`; when it fires, the clock may have been stopped (nothing to do) or
    /// restarted later (a timer for the new deadline).
    private func arm(_ context: ChannelHandlerContext, at due: NIODeadline) {
        timer = context.eventLoop.assumeIsolated().scheduleTask(deadline: due) { [self] in
            timer = nil
            guard let deadline else { return }
            if deadline > .now() {
                arm(context, at: deadline)
            } else {
                self.deadline = nil
                if openRequests == 0 { context.close(promise: nil) }
            }
        }
    }

    private func stopTimer() {
        deadline = nil
        timer?.cancel()
        timer = nil
    }
}

/// Tells `HeaderDeadlineHandler` (through outbound user events) when a request head has been
/// decoded and when a response has ended; passes every part through unchanged.
final class RequestHeadSignal: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    enum Event {
        case headRead, responseEnded
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .head = unwrapInboundIn(data) { context.triggerUserOutboundEvent(Event.headRead, promise: nil) }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data) { context.triggerUserOutboundEvent(Event.responseEnded, promise: nil) }
        context.write(data, promise: promise)
    }
}
