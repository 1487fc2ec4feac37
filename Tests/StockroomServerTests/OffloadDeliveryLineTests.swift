import Foundation
import StockroomCore
import Testing
@testable import StockroomServer

/// nginx's delivery reports are outside input: the parser takes exactly the line nginx writes,
/// refuses everything else without trapping, and a report never claims more than was planned.
@Suite struct OffloadDeliveryLineTests {
    static let header = "<190>Nov 22 17:00:00 stockroom: "

    static func line(_ message: String) -> [UInt8] {
        Array((header + message).utf8)
    }

    @Test func aWholeDownloadLineIsRead() throws {
        let line = try #require(
            DeliveryLogLine.parse(Self.line("stockroom-delivery/1 tx=2000000123 method=GET status=200 sent=20000 completion=OK range=")))
        #expect(
            line
                == DeliveryLogLine(
                    transactionID: "2000000123", method: "GET", status: 200, bytesSent: 20000, completed: true, contentRange: nil))
    }

    @Test func aRangeLineWithHostnameAndNewlineIsRead() throws {
        let datagram = Array(
            """
            <190>Nov 22 17:00:00 web-1 stockroom: stockroom-delivery/1 tx=77 method=GET status=206 sent=12 completion= range=bytes \
            5-16/100\n
            """
            .utf8)
        let line = try #require(DeliveryLogLine.parse(datagram))
        #expect(line.completed == false)
        #expect(line.contentRange == DeliveryLogLine.ContentRange(first: 5, last: 16, total: 100))
        #expect(line.bytesSent == 12)
    }

    @Test func nginxsDashForAMissingValueIsNoRange() throws {
        let line = try #require(
            DeliveryLogLine.parse(Self.line("stockroom-delivery/1 tx=1 method=HEAD status=200 sent=0 completion=OK range=-")))
        #expect(line.contentRange == nil)
        #expect(line.method == "HEAD")
    }

    @Test(arguments: [
        "",
        "stockroom-delivery/1",
        "hello world",
        "stockroom-delivery/1 tx= method=GET status=200 sent=1 completion=OK range=",
        "stockroom-delivery/1 tx=- method=GET status=404 sent=153 completion=OK range=-",
        "stockroom-delivery/1 tx=-/../x method=GET status=200 sent=1 completion=OK range=",
        "stockroom-delivery/1 tx=1 method=PUT status=200 sent=1 completion=OK range=",
        "stockroom-delivery/1 tx=1 method=GET status=2000 sent=1 completion=OK range=",
        "stockroom-delivery/1 tx=1 method=GET status=099 sent=1 completion=OK range=",
        "stockroom-delivery/1 tx=1 method=GET status=200 sent=-1 completion=OK range=",
        "stockroom-delivery/1 tx=1 method=GET status=200 sent=+1 completion=OK range=",
        "stockroom-delivery/1 tx=1 method=GET status=200 sent=99999999999999999999 completion=OK range=",
        "stockroom-delivery/1 tx=1 method=GET status=200 sent=9223372036854775807 completion=OK range=",
        "stockroom-delivery/1 tx=1 method=GET status=200 sent=1 completion=YES range=",
        "stockroom-delivery/1 tx=1 method=GET status=200 sent=1 completion=OK",
        "stockroom-delivery/1 tx=1  method=GET status=200 sent=1 completion=OK range=",
        "stockroom-delivery/1 method=GET tx=1 status=200 sent=1 completion=OK range=",
        "stockroom-delivery/1 tx=1 method=GET status=200 sent=1 completion=OK extra=1 range=",
        "stockroom-delivery/1 tx=1 method=GET status=206 sent=1 completion=OK range=bytes 9-5/100",
        "stockroom-delivery/1 tx=1 method=GET status=206 sent=1 completion=OK range=bytes 5-100/100",
        "stockroom-delivery/1 tx=1 method=GET status=206 sent=1 completion=OK range=bytes */100",
        "stockroom-delivery/1 tx=1 method=GET status=206 sent=1 completion=OK range=bytes 0-1/99999999999999999999",
        "stockroom-delivery/1 tx=1 method=GET status=206 sent=1 completion=OK range=items 0-1/2",
        "stockroom-delivery/1 tx=1 method=GET status=206 sent=1 completion=OK range=bytes 0-1/2 ",
    ])
    func aMalformedLineIsRefused(_ message: String) {
        #expect(DeliveryLogLine.parse(Self.line(message)) == nil)
    }

    @Test func controlBytesNonASCIIAndOverlongDatagramsAreRefused() {
        let good = "stockroom-delivery/1 tx=1 method=GET status=200 sent=1 completion=OK range="
        #expect(DeliveryLogLine.parse(Self.line(good)) != nil)
        #expect(DeliveryLogLine.parse(Self.line(good) + [0]) == nil)
        #expect(DeliveryLogLine.parse(Self.line("stockroom-delivery/1 tx=1\u{7} method=GET status=200 sent=1 completion=OK range=")) == nil)
        #expect(DeliveryLogLine.parse(Self.line("stockroom-delivery/1 tx=1é method=GET status=200 sent=1 completion=OK range=")) == nil)
        let padded = Self.line(String(repeating: " ", count: DeliveryLogLine.maximumLength) + good)
        #expect(DeliveryLogLine.parse(padded) == nil)
        #expect(DeliveryLogLine.parse([UInt8](repeating: 0xff, count: 1 << 20)) == nil)
    }

    @Test func randomDatagramsNeverTrap() async {
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array("stockroom-delivery/1 tx=method=GET status=sent=completion=OK range=bytes 0123456789-/\n".utf8)
        for round in 0..<20_000 {
            if round.isMultiple(of: 200) { await Task.yield() }
            let count = Int.random(in: 0...160, using: &generator)
            let bytes: [UInt8] =
                round.isMultiple(of: 2)
                ? (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
                : (0..<count).map { _ in alphabet.randomElement(using: &generator) ?? 0 }
            if let line = DeliveryLogLine.parse(bytes) {
                #expect(TransactionID.isValid(line.transactionID) && line.bytesSent >= 0)
            }
        }
    }

    // MARK: From a line to the ledger's report

    static func report(
        _ status: Int, sent: Int64, completed: Bool = true, range: DeliveryLogLine.ContentRange? = nil, method: String = "GET",
        size: Int64 = 100
    )
        -> DeliveryReport?
    {
        OffloadDeliveryRecorder.report(
            for: DeliveryLogLine(
                transactionID: "1", method: method, status: status, bytesSent: sent, completed: completed, contentRange: range),
            fileSize: size)
    }

    @Test func aCompleteWholeBodyIsAReportThatReachesTheEnd() {
        #expect(Self.report(200, sent: 100) == DeliveryReport(range: 0...99, bytesSent: 100, complete: true))
        #expect(Self.report(200, sent: 0, size: 0) == DeliveryReport(range: nil, bytesSent: 0, complete: true))
    }

    @Test func aCutOrShortBodyIsInterrupted() {
        #expect(Self.report(200, sent: 40, completed: false) == DeliveryReport(range: 0...99, bytesSent: 40, complete: false))
        #expect(
            Self.report(200, sent: 40, completed: true) == DeliveryReport(range: 0...99, bytesSent: 40, complete: false),
            "OK with bytes missing")
    }

    @Test func aRangeReportsItsOwnBytes() {
        let range = DeliveryLogLine.ContentRange(first: 90, last: 99, total: 100)
        #expect(Self.report(206, sent: 10, range: range) == DeliveryReport(range: 90...99, bytesSent: 10, complete: true))
    }

    @Test func reportsThatDoNotAddUpRecordNothing() {
        #expect(Self.report(200, sent: 101) == nil, "more bytes than the file")
        #expect(Self.report(200, sent: 100, method: "HEAD") == nil)
        #expect(Self.report(206, sent: 10) == nil, "206 without a range")
        #expect(Self.report(206, sent: 10, range: .init(first: 0, last: 9, total: 5000)) == nil, "another file's size")
        #expect(Self.report(206, sent: 11, range: .init(first: 0, last: 9, total: 100)) == nil)
        for status in [304, 404, 416] { #expect(Self.report(status, sent: 0) == nil) }
    }

    @Test func nginxFailingToSendTheFileIsStockroomsSideFailing() {
        for status in [500, 503] {
            #expect(Self.report(status, sent: 0) == DeliveryReport(range: nil, bytesSent: 0, ending: .server))
        }
        #expect(Self.report(500, sent: 0, method: "HEAD") == nil)
    }
}
