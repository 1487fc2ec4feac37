public import NIOCore

/// Sits in each connection's pipeline between the HTTP encoder and the socket, below
/// Hummingbird's body writer, so that a response's body can go straight to the channel after the
/// head Hummingbird wrote: a file as `sendfile` regions (no copy through user space), or a
/// store's bytes with a promise each (so a buffer is known to be free again). Everything else
/// passes through it untouched.
///
/// Only a body whose length the head announced (`Content-Length`) may be written here: the HTTP
/// encoder above never sees these bytes, so it cannot frame them.
public final class DirectBodyHandler: ChannelOutboundHandler, RemovableChannelHandler {
    public typealias OutboundIn = IOData
    public typealias OutboundOut = IOData

    fileprivate var context: ChannelHandlerContext?

    public init() {}

    public func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    public func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }
}

/// A response body's way to its connection below Hummingbird's writer (`DirectBodyHandler`).
///
/// Order: Hummingbird hands the head to the event loop before it calls the body's closure (its
/// writer's `write` returns once the event loop has the part, or has it queued), and each write
/// here is queued on the same event loop after it, so the head always goes first; the body's
/// closure then calls the writer's `finish`, which goes after these.
public struct DirectBody: Sendable {
    private let handler: NIOLoopBound<DirectBodyHandler>

    private init(handler: NIOLoopBound<DirectBodyHandler>) {
        self.handler = handler
    }

    public var eventLoop: any EventLoop { handler.eventLoop }

    /// The connection's, or nil for a channel without the handler (a router test's).
    public static func of(_ channel: any Channel) async -> DirectBody? {
        let eventLoop = channel.eventLoop
        return try? await channel.pipeline.handler(type: DirectBodyHandler.self).map { handler in
            DirectBody(handler: NIOLoopBound(handler, eventLoop: eventLoop))
        }.get()
    }

    /// Closes the connection: what is queued fails, and so does the response.
    public func close() {
        let handler = self.handler
        eventLoop.execute { handler.value.context?.close(promise: nil) }
    }

    /// Writes and flushes `data`; the future succeeds once the socket took all of it, and fails
    /// when the connection closed first.
    public func write(_ data: IOData) -> EventLoopFuture<Void> {
        let handler = self.handler
        let eventLoop = self.eventLoop
        return eventLoop.flatSubmit {
            guard let context = handler.value.context, context.channel.isActive else {
                return eventLoop.makeFailedFuture(ChannelError.ioOnClosedChannel)
            }
            let promise = eventLoop.makePromise(of: Void.self)
            context.writeAndFlush(handler.value.wrapOutboundOut(data), promise: promise)
            return promise.futureResult
        }
    }
}
