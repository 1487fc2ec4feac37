import NIOCore
import NIOEmbedded
import Testing
@testable import StockroomServer

/// `ConnectionClock` driven event by event on an embedded channel, on its loop's own clock (time
/// moves only when the test says): the orders of events a loaded server meets that a live test
/// meets only by chance.
@Suite struct ConnectionClockTests {
    /// A connection with a request answered (head and end read), its response still being written.
    static func answering() throws -> EmbeddedChannel {
        let loop = EmbeddedEventLoop()
        let clock = ConnectionClock(headerTimeout: .milliseconds(400), idleTimeout: .seconds(60), activity: nil, clock: { loop.now })
        let channel = EmbeddedChannel(handler: clock, loop: loop)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        try channel.writeInbound(ByteBuffer(string: "GET /healthz HTTP/1.1\r\nHost: stockroom\r\n\r\n"))
        channel.pipeline.triggerUserOutboundEvent(ConnectionClock.Event.headRead, promise: nil)
        channel.pipeline.triggerUserOutboundEvent(ConnectionClock.Event.requestRead, promise: nil)
        return channel
    }

    /// A client may send its next request as soon as it has the answer's last byte, before the
    /// response's end has passed through the pipeline: a head trickled then still gets the header
    /// deadline from its first byte, not the idle timeout (it held the connection for the minute).
    @Test func aHeadStartedBeforeTheResponseEndedGetsTheHeaderDeadline() throws {
        let channel = try Self.answering()
        try channel.writeInbound(ByteBuffer(string: "GET /healthz HTTP/1.1\r\nHost: st"))
        channel.pipeline.triggerUserOutboundEvent(ConnectionClock.Event.responseEnded, promise: nil)
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(300))
        #expect(channel.isActive, "the header deadline runs from the head's first byte: 400 ms")
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(200))
        #expect(!channel.isActive, "a head still incomplete is cut at the header deadline")
    }

    @Test func aConnectionIdleAfterItsResponseWaitsForTheIdleTimeout() throws {
        let channel = try Self.answering()
        channel.pipeline.triggerUserOutboundEvent(ConnectionClock.Event.responseEnded, promise: nil)
        channel.embeddedEventLoop.advanceTime(by: .seconds(5))
        #expect(channel.isActive, "nothing was sent: the idle timeout (60 s) applies, not the header's")
        channel.embeddedEventLoop.advanceTime(by: .seconds(56))
        #expect(!channel.isActive)
    }

    /// A pipelined head that arrived whole before the response ended needs no deadline.
    @Test func aPipelinedHeadReadWholeIsNotCut() throws {
        let channel = try Self.answering()
        try channel.writeInbound(ByteBuffer(string: "GET /healthz HTTP/1.1\r\nHost: stockroom\r\n\r\n"))
        channel.pipeline.triggerUserOutboundEvent(ConnectionClock.Event.headRead, promise: nil)
        channel.pipeline.triggerUserOutboundEvent(ConnectionClock.Event.requestRead, promise: nil)
        channel.pipeline.triggerUserOutboundEvent(ConnectionClock.Event.responseEnded, promise: nil)
        channel.embeddedEventLoop.advanceTime(by: .seconds(5))
        #expect(channel.isActive, "its response is still to come")
    }
}
