import NIOCore
import NIOHTTPTypes

/// A connection's two clocks, kept by the one handler that sees every byte it reads:
///
/// - the header deadline (`--header-timeout`): a request head must arrive whole within it,
///   counted from the connection's start and from the first byte of each later request, so a
///   client that trickles header bytes (slowloris) holds no connection past it;
/// - the idle timeout (`--idle-timeout`): a connection with no request in progress (or only
///   one whose body it is still reading) that reads nothing and is answered nothing for that
///   long is closed. It was Hummingbird's; it is kept here because `CatalogFastPath` answers
///   requests Hummingbird never sees, and a connection busy with them is not idle.
///
/// It also tells the connection gate whether a request is in progress, so that the gate makes
/// room by closing idle connections only. It sits before the HTTP decoder to see raw bytes;
/// `RequestHeadSignal`, after the decoder, and `CatalogFastPath` tell it (outbound user events)
/// when a head is complete, a request read and a response ended.
///
/// Each clock is one timer, checked when it fires: moving a clock at every request only sets a
/// deadline (a task scheduled and cancelled per request cost a tenth of a small request's time).
final class ConnectionClock: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = Any
    typealias OutboundOut = Any

    enum Event {
        /// A request head was decoded.
        case headRead
        /// The request's last byte was read (its end, after any body).
        case requestRead
        /// Its response's last part was written.
        case responseEnded
        /// Bytes of a head are waiting again (`CatalogFastPath` hands them on): the header
        /// deadline runs from now unless it runs already.
        case headStarted
        /// A request read and answered whole, in one go (`CatalogFastPath`).
        case answered
    }

    /// nil sets no deadline, or no idle timeout.
    private let headerTimeout: TimeAmount?
    private let idleTimeout: TimeAmount?
    private let activity: ConnectionActivity?
    /// When the head under way must be complete; nil while that clock is stopped.
    private var headerDeadline: NIODeadline?
    private var headerTimer: Scheduled<Void>?
    /// When the connection last read a byte or ended a response.
    private var lastActive = NIODeadline.uptimeNanoseconds(0)
    private var idleTimer: Scheduled<Void>?
    /// Heads read whose responses have not ended.
    private var openRequests = 0
    /// A head was read and its request's end not yet.
    private var reading = false
    /// When bytes of the next head first came while a response was still being written: its
    /// header deadline runs from then once that response ends. (A client may send its next
    /// request as soon as it has read the last byte of an answer, before the response's end has
    /// passed through the pipeline.)
    private var nextHeadSince: NIODeadline?

    /// What time it is: the system's uptime clock, or a test's event loop's own.
    private let clock: () -> NIODeadline

    init(
        headerTimeout: TimeAmount?, idleTimeout: TimeAmount?, activity: ConnectionActivity?, clock: @escaping () -> NIODeadline = { .now() }
    ) {
        self.headerTimeout = headerTimeout
        self.idleTimeout = idleTimeout
        self.activity = activity
        self.clock = clock
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { start(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        start(context)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if unwrapInboundIn(data).readableBytes > 0 {
            lastActive = clock()
            if openRequests == 0 {
                startHeaderDeadline(context)
            } else if !reading, nextHeadSince == nil {
                nextHeadSince = lastActive
            }
        }
        context.fireChannelRead(data)
    }

    func triggerUserOutboundEvent(context: ChannelHandlerContext, event: Any, promise: EventLoopPromise<Void>?) {
        guard let event = event as? Event else { return context.triggerUserOutboundEvent(event, promise: promise) }
        switch event {
        case .headRead:
            openRequests += 1
            reading = true
            activity?.requestStarted()
            headerDeadline = nil
            nextHeadSince = nil
        case .requestRead:
            reading = false
        case .responseEnded:
            if openRequests > 0 {
                openRequests -= 1
                activity?.requestEnded()
            }
            if openRequests == 0, let since = nextHeadSince {
                nextHeadSince = nil
                startHeaderDeadline(context, from: since)
            }
            responseEnded(context)
        case .headStarted:
            if openRequests == 0 { startHeaderDeadline(context) }
        case .answered:
            headerDeadline = nil
            responseEnded(context)
        }
        promise?.succeed()
    }

    func channelInactive(context: ChannelHandlerContext) {
        stop()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        stop()
    }

    private func start(_ context: ChannelHandlerContext) {
        lastActive = clock()
        startHeaderDeadline(context)
        if let idleTimeout, idleTimer == nil { armIdle(context, at: lastActive + idleTimeout) }
    }

    private func responseEnded(_ context: ChannelHandlerContext) {
        lastActive = clock()
        if let idleTimeout, idleTimer == nil, context.channel.isActive { armIdle(context, at: lastActive + idleTimeout) }
    }

    /// Starts the header clock (from `start`, or now) unless it runs already.
    private func startHeaderDeadline(_ context: ChannelHandlerContext, from start: NIODeadline? = nil) {
        guard headerDeadline == nil, let headerTimeout else { return }
        let due = (start ?? clock()) + headerTimeout
        headerDeadline = due
        if headerTimer == nil { armHeader(context, at: due) }
    }

    /// When it fires, the clock may have been stopped (nothing to do) or restarted later (a
    /// timer for the new deadline).
    private func armHeader(_ context: ChannelHandlerContext, at due: NIODeadline) {
        headerTimer = context.eventLoop.assumeIsolated().scheduleTask(deadline: due) { [self] in
            headerTimer = nil
            guard let headerDeadline else { return }
            if headerDeadline > clock() {
                armHeader(context, at: headerDeadline)
            } else {
                self.headerDeadline = nil
                if openRequests == 0 { context.close(promise: nil) }
            }
        }
    }

    /// While a request is being answered the idle clock waits; the response's end starts it again.
    private func armIdle(_ context: ChannelHandlerContext, at due: NIODeadline) {
        idleTimer = context.eventLoop.assumeIsolated().scheduleTask(deadline: due) { [self] in
            idleTimer = nil
            guard let idleTimeout, openRequests == 0 || reading else { return }
            let expiry = lastActive + idleTimeout
            if expiry > clock() {
                armIdle(context, at: expiry)
            } else {
                context.close(promise: nil)
            }
        }
    }

    private func stop() {
        headerDeadline = nil
        nextHeadSince = nil
        headerTimer?.cancel()
        headerTimer = nil
        idleTimer?.cancel()
        idleTimer = nil
    }
}

/// Tells `ConnectionClock` (through outbound user events) when a request head has been decoded,
/// when the request has been read and when its response has ended; passes every part through
/// unchanged.
final class RequestHeadSignal: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head: context.triggerUserOutboundEvent(ConnectionClock.Event.headRead, promise: nil)
        case .end: context.triggerUserOutboundEvent(ConnectionClock.Event.requestRead, promise: nil)
        case .body: break
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data) { context.triggerUserOutboundEvent(ConnectionClock.Event.responseEnded, promise: nil) }
        context.write(data, promise: promise)
    }
}
