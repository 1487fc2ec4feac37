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
/// every response shares, the header fields of a 200 and of a 304 for the route, and the same
/// heads as bytes for `CatalogFastPath`, up to the fields that change per response.
final class CatalogAnswer: Sendable {
    /// Clients may keep a copy but must revalidate (cheaply, by ETag) before using it.
    static let cacheControl = "public, no-cache"

    let etag: String
    let body: ByteBuffer
    let full: HTTPFields
    let notModified: HTTPFields
    /// The status line and the fields above, encoded as Hummingbird's encoder writes them,
    /// through `X-Request-Id: `.
    let fullHead: ByteBuffer
    let notModifiedHead: ByteBuffer

    init(_ catalog: ProductCatalog) {
        etag = catalog.etag
        body = ByteBuffer(bytes: catalog.body)
        notModified = Self.fields(etag: etag)
        full = Self.fields(etag: etag, length: body.readableBytes)
        func encoded(_ status: HTTPResponse.Status, _ fields: HTTPFields) -> ByteBuffer {
            var text = "HTTP/1.1 \(status.code) \(status.reasonPhrase)\r\n"
            for field in fields { text += "\(field.name.rawName): \(field.value)\r\n" }
            return ByteBuffer(string: text + "X-Request-Id: ")
        }
        fullHead = encoded(.ok, full)
        notModifiedHead = encoded(.notModified, notModified)
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

/// `GET /v1/catalog` answered from the bytes of the connection, before the HTTP decoder, as a
/// static file server answers: a request read, a lookup of the rendered answer, one write. It is
/// the request every installed app makes at each launch, so it is the one that floods; through
/// the decoder, Hummingbird's pipeline and a task it ran at 0.4 of nginx serving the same JSON.
///
/// It reads only what it can read exactly, and hands everything else on unread:
/// - a connection's requests, from its first, each whole in the bytes at hand and each exactly
///   `GET /v1/catalog` (any query ignored, as the router ignores it) over `HTTP/1.1`, with at
///   most 100 header lines of token names and visible values, no body (`Content-Length`,
///   `Transfer-Encoding`), no `Expect`, `Upgrade`, or `Connection` or `Proxy-Connection` (which
///   the decoder reads as `Connection`) other than `keep-alive`, at most one `If-None-Match`,
///   within 8 KiB;
/// - at the first request that is not one of those (a partial head included), it stops for good
///   on that connection and hands the bytes from that request's first byte to the decoder: from
///   then on Hummingbird answers everything, in order, and nothing was read twice or skipped.
/// - when the socket stops taking answers (a client that pipelines and does not read), it stops
///   the same way, and Hummingbird's back-pressure takes over.
///
/// What the route's middleware would add is added the same way: `X-Request-Id`, `Date` and
/// `Server`, the request's log line at `info`, and the `hb.requests` count and duration under the
/// route's own labels. `ConnectionClock` hears of each answer, so the header deadline and the idle
/// timeout count these requests as any other.
final class CatalogFastPath: Sendable {
    static let path = "/v1/catalog"
    /// The longest head read here; a longer one is the decoder's.
    static let maximumHead = 8 << 10
    /// The most header lines read here; the decoder refuses more than 1,000, so a head near that
    /// is the decoder's to refuse.
    static let maximumFields = 100

    let store: CatalogStore
    let logger: Logger
    /// `"\r\nDate: "` … and the `Server` field, up to the blank line.
    private let serverTail: ByteBuffer
    private let fullCount: Counter
    private let fullDuration: Metrics.Timer
    private let notModifiedCount: Counter
    private let notModifiedDuration: Metrics.Timer

    /// Made once the metrics system is bootstrapped: its counters are the middleware's series.
    init(store: CatalogStore, logger: Logger, serverName: String) {
        self.store = store
        self.logger = logger
        serverTail = ByteBuffer(string: "\r\nServer: \(serverName)\r\n\r\n")
        func dimensions(_ status: HTTPResponse.Status) -> [(String, String)] {
            [("http.route", Self.path), ("http.request.method", "GET"), ("http.response.status_code", status.code.description)]
        }
        fullCount = Counter(label: "hb.requests", dimensions: dimensions(.ok))
        fullDuration = Metrics.Timer(label: "http.server.request.duration", dimensions: dimensions(.ok), preferredDisplayUnit: .seconds)
        notModifiedCount = Counter(label: "hb.requests", dimensions: dimensions(.notModified))
        notModifiedDuration = Metrics.Timer(
            label: "http.server.request.duration", dimensions: dimensions(.notModified), preferredDisplayUnit: .seconds)
    }

    /// The channel's handler: between `ConnectionClock` and the HTTP decoder.
    func handler() -> Handler { Handler(path: self) }

    /// Writes the answer of the catalogue being served now to a request read at `started`.
    fileprivate func respond(
        ifNoneMatch: UnsafeRawBufferPointer?, started: NIODeadline, dates: inout DateField, context: ChannelHandlerContext
    ) {
        let answer = store.answer
        let matched = ifNoneMatch.map { EntityTag.list(String(decoding: $0, as: UTF8.self), matches: answer.etag) } ?? false
        let id = RequestID().description
        var head = matched ? answer.notModifiedHead : answer.fullHead
        head.writeString(id)
        head.writeString("\r\nDate: ")
        head.writeString(dates.now())
        head.writeImmutableBuffer(serverTail)
        if matched {
            context.write(NIOAny(head), promise: nil)
        } else {
            context.write(NIOAny(head), promise: nil)
            context.write(NIOAny(answer.body), promise: nil)
        }

        let nanoseconds = (NIODeadline.now() - started).nanoseconds
        if matched {
            notModifiedCount.increment()
            notModifiedDuration.recordNanoseconds(nanoseconds)
        } else {
            fullCount.increment()
            fullDuration.recordNanoseconds(nanoseconds)
        }
        if logger.logLevel <= .info {
            var logger = self.logger
            logger[metadataKey: "hb.request.id"] = .string(id)
            logger.info(
                "request",
                metadata: [
                    "method": "GET", "path": .string(Self.path), "status": .stringConvertible(matched ? 304 : 200),
                    "duration_us": .stringConvertible(nanoseconds / 1_000),
                ])
        }
    }

    final class Handler: ChannelInboundHandler, RemovableChannelHandler {
        typealias InboundIn = ByteBuffer
        typealias InboundOut = ByteBuffer
        typealias OutboundOut = ByteBuffer

        private let path: CatalogFastPath
        /// False for good once a request was handed on.
        private var answering = true
        private var dates = DateField()

        init(path: CatalogFastPath) {
            self.path = path
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            guard answering else { return context.fireChannelRead(data) }
            var bytes = unwrapInboundIn(data)
            var answered = false
            // A socket that stopped taking answers gets no more from here, in this read or any
            // later one: the request is handed on, behind Hummingbird's back-pressure.
            while bytes.readableBytes > 0, context.channel.isWritable {
                let started = NIODeadline.now()
                let length = bytes.withUnsafeReadableBytes { buffer -> Int? in
                    guard let request = CatalogRequest(buffer) else { return nil }
                    path.respond(ifNoneMatch: request.ifNoneMatch, started: started, dates: &dates, context: context)
                    return request.length
                }
                guard let length else { break }
                bytes.moveReaderIndex(forwardBy: length)
                answered = true
                context.triggerUserOutboundEvent(ConnectionClock.Event.answered, promise: nil)
            }
            if answered { context.flush() }
            guard bytes.readableBytes > 0 else { return }
            // The first request not answered here, and all after it, are the decoder's.
            answering = false
            context.triggerUserOutboundEvent(ConnectionClock.Event.headStarted, promise: nil)
            context.fireChannelRead(NIOAny(bytes))
        }
    }
}

/// One `GET /v1/catalog` request read from the front of a connection's bytes, or nil when they do
/// not begin with one (`CatalogFastPath` says which).
struct CatalogRequest {
    /// Its bytes, head and blank line.
    let length: Int
    /// The `If-None-Match` value, trimmed, within the bytes read.
    let ifNoneMatch: UnsafeRawBufferPointer?

    init?(_ bytes: UnsafeRawBufferPointer) {
        let prefix = "GET /v1/catalog"
        guard bytes.count > prefix.utf8.count, bytes.starts(with: prefix.utf8) else { return nil }
        var at = prefix.utf8.count
        if bytes[at] == UInt8(ascii: "?") {
            at += 1
            while at < bytes.count, (0x21...0x7E).contains(bytes[at]) { at += 1 }
        }
        let version = " HTTP/1.1\r\n"
        guard bytes.count - at >= version.utf8.count,
            UnsafeRawBufferPointer(rebasing: bytes[at..<(at + version.utf8.count)]).elementsEqual(version.utf8)
        else { return nil }
        at += version.utf8.count
        var ifNoneMatch: UnsafeRawBufferPointer?
        var fields = 0
        while true {
            guard at + 1 < bytes.count, at < CatalogFastPath.maximumHead, fields <= CatalogFastPath.maximumFields else { return nil }
            if bytes[at] == 0x0D {
                guard bytes[at + 1] == 0x0A else { return nil }
                at += 2
                break
            }
            // name ":" OWS value OWS CRLF, the value visible ASCII, spaces and tabs only
            let nameStart = at
            while at < bytes.count, Self.isToken(bytes[at]) { at += 1 }
            guard at > nameStart, at < bytes.count, bytes[at] == UInt8(ascii: ":") else { return nil }
            let name = UnsafeRawBufferPointer(rebasing: bytes[nameStart..<at])
            at += 1
            while at < bytes.count, bytes[at] == 0x20 || bytes[at] == 0x09 { at += 1 }
            let valueStart = at
            while at < bytes.count, (0x20...0x7E).contains(bytes[at]) || bytes[at] == 0x09 { at += 1 }
            var valueEnd = at
            guard at + 1 < bytes.count, bytes[at] == 0x0D, bytes[at + 1] == 0x0A else { return nil }
            at += 2
            while valueEnd > valueStart, bytes[valueEnd - 1] == 0x20 || bytes[valueEnd - 1] == 0x09 { valueEnd -= 1 }
            let value = UnsafeRawBufferPointer(rebasing: bytes[valueStart..<valueEnd])
            fields += 1
            if Self.named(name, "if-none-match") {
                guard ifNoneMatch == nil else { return nil }
                ifNoneMatch = value
            } else if Self.named(name, "connection") || Self.named(name, "proxy-connection") {
                guard Self.named(value, "keep-alive") else { return nil }
            } else if Self.refused.contains(where: { Self.named(name, $0) }) {
                return nil
            }
        }
        length = at
        self.ifNoneMatch = ifNoneMatch
    }

    /// Fields that give the request a body or another protocol: the decoder's to read.
    private static let refused = ["content-length", "transfer-encoding", "expect", "upgrade", "http2-settings"]

    private static func named(_ bytes: UnsafeRawBufferPointer, _ name: String) -> Bool {
        bytes.count == name.utf8.count && zip(bytes, name.utf8).allSatisfy { $0 | 0x20 == $1 }
    }

    /// RFC 9110 §5.6.2 tchar.
    private static func isToken(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
        case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"), UInt8(ascii: "'"),
            UInt8(ascii: "*"),
            UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "^"), UInt8(ascii: "_"), UInt8(ascii: "`"),
            UInt8(ascii: "|"),
            UInt8(ascii: "~"):
            true
        default: false
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
