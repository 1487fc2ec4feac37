import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import Metrics
import NIOCore
import NIOHTTPTypes
import StockroomCore

/// The `GET /v1/catalog` answer of one catalogue version, rendered once: the body in a buffer
/// every response shares, and the header fields of a 200 and of a 304. The route and the fast
/// path below both answer from it.
final class CatalogAnswer: Sendable {
    /// Clients may keep a copy but must revalidate (cheaply, by ETag) before using it.
    static let cacheControl = "public, no-cache"

    let etag: String
    let body: ByteBuffer
    let full: HTTPFields
    let notModified: HTTPFields

    init(_ catalog: Catalog) {
        etag = catalog.etag
        body = ByteBuffer(bytes: catalog.body)
        notModified = Self.fields(etag: etag)
        full = Self.fields(etag: etag, length: body.readableBytes)
    }

    /// The fields of a catalogue answer: a 304's without `length`, a 200's with it.
    static func fields(etag: String, length: Int? = nil) -> HTTPFields {
        var fields: HTTPFields = [.eTag: etag, .cacheControl: cacheControl]
        if let length {
            fields[.contentType] = "application/json; charset=utf-8"
            fields[.contentLength] = String(length)
        }
        return fields
    }

    /// 304 without a body when `ifNoneMatch` names this version, else 200 with it.
    func answer(ifNoneMatch: String?) -> (status: HTTPResponse.Status, fields: HTTPFields, body: ByteBuffer?) {
        if let ifNoneMatch, EntityTag.list(ifNoneMatch, matches: etag) { return (.notModified, notModified, nil) }
        return (.ok, full, body)
    }
}

/// `GET /v1/catalog` answered on the event loop, as a static file server answers: a lookup of
/// the rendered answer and one write, with no task, router or middleware between them. It is
/// the request every installed app makes at each launch, so it is the one that floods.
///
/// It answers only a plain `GET /v1/catalog` (any query ignored, as the router ignores it) with
/// no body and no `Connection: close`; every other request, `HEAD` included, goes on to
/// Hummingbird unchanged. What the middleware would add is added here the same way: the
/// `X-Request-Id`, the `Date` and `Server` fields, the request's log line at `info`, and the
/// `hb.requests` count and duration under the route's own labels.
final class CatalogFastPath: Sendable {
    static let path = "/v1/catalog"

    let store: CatalogStore
    let logger: Logger
    let serverName: String
    private let fullCount: Counter
    private let fullDuration: Metrics.Timer
    private let notModifiedCount: Counter
    private let notModifiedDuration: Metrics.Timer

    /// Made once the metrics system is bootstrapped: its counters are the middleware's series.
    init(store: CatalogStore, logger: Logger, serverName: String) {
        self.store = store
        self.logger = logger
        self.serverName = serverName
        func dimensions(_ status: HTTPResponse.Status) -> [(String, String)] {
            [("http.route", Self.path), ("http.request.method", "GET"), ("http.response.status_code", status.code.description)]
        }
        fullCount = Counter(label: "hb.requests", dimensions: dimensions(.ok))
        fullDuration = Metrics.Timer(label: "http.server.request.duration", dimensions: dimensions(.ok), preferredDisplayUnit: .seconds)
        notModifiedCount = Counter(label: "hb.requests", dimensions: dimensions(.notModified))
        notModifiedDuration = Metrics.Timer(label: "http.server.request.duration", dimensions: dimensions(.notModified), preferredDisplayUnit: .seconds)
    }

    /// Whether this request is one the fast path answers.
    func answers(_ request: HTTPRequest) -> Bool {
        guard request.method == .get, let path = request.path else { return false }
        let bare = path.firstIndex(of: "?").map { path[..<$0] } ?? path[...]
        guard bare == Self.path else { return false }
        let fields = request.headerFields
        if let length = fields[.contentLength], length != "0" { return false }
        return fields[.transferEncoding] == nil && fields[.expect] == nil && fields[.connection]?.lowercased() != "close"
    }

    /// Writes the answer of the catalogue being served now.
    func respond(to request: HTTPRequest, started: ContinuousClock.Instant, dates: inout DateField, context: ChannelHandlerContext) {
        let (status, fields, body) = store.answer.answer(ifNoneMatch: request.headerFields[.ifNoneMatch])
        let id = RequestID().description
        var head = HTTPResponse(status: status, headerFields: fields)
        head.headerFields[.requestID] = id
        head.headerFields[.date] = dates.now()
        head.headerFields[.server] = serverName
        context.write(NIOAny(HTTPResponsePart.head(head)), promise: nil)
        if let body { context.write(NIOAny(HTTPResponsePart.body(body)), promise: nil) }
        context.writeAndFlush(NIOAny(HTTPResponsePart.end(nil)), promise: nil)

        let elapsed = ContinuousClock.now - started
        let nanoseconds = elapsed.components.seconds * 1_000_000_000 + elapsed.components.attoseconds / 1_000_000_000
        if status == .ok {
            fullCount.increment()
            fullDuration.recordNanoseconds(nanoseconds)
        } else {
            notModifiedCount.increment()
            notModifiedDuration.recordNanoseconds(nanoseconds)
        }
        if logger.logLevel <= .info {
            var logger = self.logger
            logger[metadataKey: "hb.request.id"] = .string(id)
            logger.info(
                "request",
                metadata: [
                    "method": "GET", "path": .string(Self.path), "status": .stringConvertible(status.code),
                    "duration_us": .stringConvertible(nanoseconds / 1_000),
                ])
        }
    }

    /// The channel's handler, placed after Hummingbird's connection-state handler so that the
    /// idle timeout, a graceful shutdown and HTTP pipelining count these requests as any other.
    func handler() -> Handler { Handler(path: self) }

    final class Handler: ChannelDuplexHandler, RemovableChannelHandler {
        typealias InboundIn = HTTPRequestPart
        typealias InboundOut = HTTPRequestPart
        typealias OutboundIn = HTTPResponsePart
        typealias OutboundOut = HTTPResponsePart

        private enum State {
            case idle
            /// Its head was read: answered at its end.
            case answering(HTTPRequest, ContinuousClock.Instant)
            /// Hummingbird's, up to its end.
            case passing
        }

        private let path: CatalogFastPath
        private var state = State.idle
        /// Requests handed to Hummingbird whose response has not ended: while there is one, a
        /// catalogue request goes to the route too, behind it, so that answers keep their order
        /// (Hummingbird queues pipelined requests itself, after this handler).
        private var routed = 0
        private var dates = DateField()

        init(path: CatalogFastPath) {
            self.path = path
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let part = unwrapInboundIn(data)
            switch (state, part) {
            case (.idle, .head(let request)):
                if routed == 0, path.answers(request) {
                    state = .answering(request, .now)
                } else {
                    state = .passing
                    routed += 1
                    context.fireChannelRead(data)
                }
            case (.answering(let request, let started), .end):
                state = .idle
                path.respond(to: request, started: started, dates: &dates, context: context)
            case (.answering, _):
                break  // no body was announced; the decoder sends none
            case (.passing, .end):
                state = .idle
                context.fireChannelRead(data)
            default:
                context.fireChannelRead(data)
            }
        }

        func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
            if case .end = unwrapOutboundIn(data), routed > 0 { routed -= 1 }
            context.write(data, promise: promise)
        }
    }
}

/// The `Date` field of a connection's answers (RFC 9110 §6.6.1), formatted once a second.
struct DateField {
    private var second = -1
    private var text = ""

    mutating func now() -> String {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let current = Int(now.tv_sec)
        if current != second {
            second = current
            text = HTTPDate.format(current)
        }
        return text
    }
}
