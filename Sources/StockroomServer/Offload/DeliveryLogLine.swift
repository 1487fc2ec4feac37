import Foundation
import StockroomCore

/// One line of nginx's delivery log, as `NginxSite.logFormat` writes it and syslog carries it:
/// `<190>Nov 22 17:00:00 stockroom: stockroom-delivery/1 tx=… method=GET status=206 sent=5000
/// completion=OK range=bytes 15000-19999/20000`.
///
/// It is outside input (anything on this machine can send a datagram), so parsing is total:
/// bounded length, printable ASCII only, every number range-checked; anything else is nil.
public struct DeliveryLogLine: Sendable, Equatable {
    /// The `Content-Range` nginx sent: `first...last` of a `total`-byte file.
    public struct ContentRange: Sendable, Equatable {
        public var first: Int64
        public var last: Int64
        public var total: Int64
    }

    /// Stockroom's `X-Transaction-Id` of the offloaded response.
    public var transactionID: String
    /// `GET` or `HEAD` (nginx turns an offloaded `POST` into `GET`; `POST` is read as `GET`).
    public var method: String
    public var status: Int
    /// `$body_bytes_sent`.
    public var bytesSent: Int64
    /// `$request_completion` was `OK`: the whole response went to the socket.
    public var completed: Bool
    /// `$sent_http_content_range`, on a 206.
    public var contentRange: ContentRange?

    /// What starts the message, after syslog's header.
    public static let marker = "stockroom-delivery/1 "
    /// Longer datagrams are refused unread: the real line is under 200 bytes.
    public static let maximumLength = 1024

    /// The line in `datagram`, or nil when it is not one exactly.
    public static func parse(_ datagram: some Collection<UInt8>) -> DeliveryLogLine? {
        guard datagram.count <= maximumLength else { return nil }
        var bytes = Array(datagram)
        while let last = bytes.last, last == UInt8(ascii: "\n") || last == UInt8(ascii: "\r") { bytes.removeLast() }
        guard bytes.allSatisfy({ (0x20...0x7e).contains($0) }) else { return nil }
        let text = String(decoding: bytes, as: UTF8.self)
        // syslog's header (`<PRI>date [host] tag: `) comes first and holds no marker.
        guard let start = text.range(of: marker) else { return nil }
        let body = text[start.upperBound...]
        guard let rangeStart = body.range(of: " range=") else { return nil }
        let fields = body[..<rangeStart.lowerBound].split(separator: " ", omittingEmptySubsequences: false)
        let keys = ["tx", "method", "status", "sent", "completion"]
        guard fields.count == keys.count else { return nil }
        var values: [Substring] = []
        for (field, key) in zip(fields, keys) {
            guard field.hasPrefix(key + "=") else { return nil }
            values.append(field.dropFirst(key.count + 1))
        }
        let transactionID = String(values[0])
        // nginx writes `-` for a response without Stockroom's header (a client probing the prefix).
        guard transactionID != "-", TransactionID.isValid(transactionID) else { return nil }
        guard ["GET", "HEAD", "POST"].contains(String(values[1])) else { return nil }
        guard let status = number(values[2], digits: 3), (100...599).contains(status),
            let sent = number(values[3], digits: 18)
        else { return nil }
        guard values[4] == "OK" || values[4].isEmpty || values[4] == "-" else { return nil }
        let rangeText = body[rangeStart.upperBound...]
        var contentRange: ContentRange?
        if !rangeText.isEmpty && rangeText != "-" {
            guard let range = parseContentRange(rangeText) else { return nil }
            contentRange = range
        }
        return DeliveryLogLine(
            transactionID: transactionID, method: String(values[1]), status: Int(status), bytesSent: sent, completed: values[4] == "OK",
            contentRange: contentRange)
    }

    /// `bytes first-last/total` with `first <= last < total`.
    static func parseContentRange(_ text: Substring) -> ContentRange? {
        guard text.hasPrefix("bytes ") else { return nil }
        let spec = text.dropFirst(6)
        guard let dash = spec.firstIndex(of: "-"), let slash = spec.firstIndex(of: "/"), dash < slash else { return nil }
        guard let first = number(spec[..<dash], digits: 18), let last = number(spec[spec.index(after: dash)..<slash], digits: 18),
            let total = number(spec[spec.index(after: slash)...], digits: 18), first <= last, last < total
        else { return nil }
        return ContentRange(first: first, last: last, total: total)
    }

    /// A decimal of 1 to `digits` ASCII digits (no sign): at most 18 always fits in `Int64`.
    static func number(_ text: Substring, digits: Int) -> Int64? {
        guard (1...min(digits, 18)).contains(text.utf8.count),
            text.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) })
        else { return nil }
        return Int64(text)
    }
}
