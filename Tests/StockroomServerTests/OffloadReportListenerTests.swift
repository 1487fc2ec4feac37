import Foundation
import HTTPTypes
import StockroomCore
import StockroomTestSupport
import Testing
@testable import StockroomServer

#if canImport(Glibc)
    import Glibc
#endif

/// The server side of offload without nginx: the headers-only answer, and the report port fed
/// by hand with what nginx, or anything else on this machine, might send.
@Suite struct OffloadReportListenerTests {
    static func withOffload<Value: Sendable>(_ body: @Sendable @escaping (DownloadFixture, UDPSender) async throws -> Value) async throws
        -> Value
    {
        let port = try FreePort.make(SOCK_DGRAM)
        let offload = ContentOffload(report: try OffloadReportAddress(host: "127.0.0.1", port: port))
        return try await DownloadFixture.run({ $0.offload = offload }) { fixture in
            try await body(fixture, try UDPSender(port: port))
        }
    }

    @Test func stockroomAnswersWithItsHeadersAndXAccelRedirectAndNoBody() async throws {
        try await Self.withOffload { fixture, _ in
            let purchase = try await fixture.control.purchase(DownloadFixture.book)
            let response = try await fixture.post(purchase)
            #expect(response.status == .ok)
            #expect(response.body.readableBytes == 0)
            #expect(response.headers[.init("X-Accel-Redirect")!] == "/_protected/books/book.epub")
            #expect(response.headers[.eTag] == "\"\(ByteEncoding.hex(SHA256.hash(ServerFixture.book)))\"")
            #expect(response.headers[.init("X-Transaction-Id")!] == purchase.transactionId)
            #expect(response.headers[.init("X-Download-Token")!]?.hasPrefix("v1.") == true)
            #expect(response.headers[.contentType] == "application/epub+zip")
            let token = DownloadFixture.token(purchase.transactionId)
            let resumed = try await fixture.get(
                "/v1/downloads/\(purchase.transactionId)/content", token: token, headers: [.range: "bytes=99999-"])
            #expect(resumed.status == .ok, "nginx, not Stockroom, answers the range (416 here)")
            #expect(resumed.headers[.init("X-Accel-Redirect")!] == "/_protected/books/book.epub")
            let row = try #require(try await fixture.ledger.fulfilment(purchase.transactionId))
            #expect(row.state == .verified, "delivered only when nginx reports it")
            #expect(row.attempts == 2)
        }
    }

    @Test func hostileDatagramsChangeNothingAndAReportOnlyLogsAnAttempt() async throws {
        try await Self.withOffload { fixture, sender in
            let purchase = try await fixture.control.purchase(DownloadFixture.book)
            #expect(try await fixture.post(purchase).status == .ok)
            let tx = purchase.transactionId
            let before = try await fixture.snapshot()
            let header = "<190>Nov 22 17:00:00 stockroom: stockroom-delivery/1 "
            let hostile: [[UInt8]] = [
                [], [0], [UInt8](repeating: 0xff, count: 1500), Array(String(repeating: "A", count: 60_000).utf8),
                Array(
                    (header + "tx=\(tx) method=GET status=200 sent=20000 completion=OK range=" + String(repeating: " ", count: 2000)).utf8),
                Array((header + "tx=990000000000002 method=GET status=200 sent=20000 completion=OK range=").utf8),  // unknown
                Array((header + "tx=\(tx) method=GET status=206 sent=10 completion=OK range=bytes 0-9/50000").utf8),  // another file
                Array((header + "tx=\(tx) method=GET status=200 sent=20001 completion=OK range=").utf8),  // more than the file
                Array((header + "tx=\(tx) method=HEAD status=200 sent=0 completion=OK range=").utf8),
                Array((header + "tx=\(tx) method=GET status=416 sent=0 completion=OK range=").utf8),
                Array((header + "tx=\(tx) method=GET status=200 sent=99999999999999999999999 completion=OK range=").utf8),
            ]
            for datagram in hostile { sender.send(datagram) }
            // Reports are handled one at a time, in order: once this one shows, the others were read.
            sender.send(Array((header + "tx=\(tx) method=GET status=200 sent=100 completion= range=").utf8))
            #expect(try await fixture.eventually { try await !fixture.ledger.attempts(of: tx).isEmpty })
            let attempts = try await fixture.ledger.attempts(of: tx)
            #expect(attempts.map(\.outcome) == [.interrupted])
            #expect(attempts.first?.bytes == 100)
            let row = try #require(try await fixture.ledger.fulfilment(tx))
            #expect(row.state == .verified)
            #expect(row.bytesDelivered == 100)
            #expect(row.attempts == 1)
            #expect(try await fixture.ledger.fulfilment("990000000000002") == nil)
            #expect(before.first?.contains("bytes=0") == true)
            #expect(try await fixture.client.execute(uri: "/healthz", method: .get).status == .ok)
        }
    }
}

/// A UDP socket that sends datagrams to a loopback port, as nginx's syslog client does.
final class UDPSender: Sendable {
    let descriptor: Int32
    let port: Int

    init(port: Int) throws {
        descriptor = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        guard descriptor >= 0 else { throw POSIXError(.EMFILE) }
        self.port = port
    }

    deinit { close(descriptor) }

    func send(_ bytes: [UInt8]) {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        _ = bytes.withUnsafeBytes { buffer in
            withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(descriptor, buffer.baseAddress, buffer.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
        }
    }
}
