import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import StockroomCore
import StockroomTestSupport
import Testing
@testable import StockroomServer

/// Issue 17 cases 1 and 5 and the framing point, through a live server: the connection cap
/// makes room from idle connections, slow bodies are closed, malformed framing is a 400, the
/// client address is the operator's word, and `/metrics` can leave the public port.
@Suite struct PressureConnectionTests {
    typealias RawConnection = LimitsConnectionTests.RawConnection

    /// Reads what the server sends until it closes (or 20 s of silence).
    static func readToClose(_ connection: RawConnection) async -> String {
        var text = ""
        while let bytes = await connection.receive() { text += String(decoding: bytes, as: UTF8.self) }
        return text
    }

    @Test func atTheConnectionCapIdleConnectionsMakeRoomForABuyer() async throws {
        try await DownloadFixture.run({ $0.connectionLimits.maxConnections = 8 }) { fixture in
            let port = try #require(fixture.client.port)
            let idle = try await PressureProcessTests.connections(40, to: port)
            // The flood taken in first (32 of the 40 closed to make room): a buyer who arrived
            // while the server was still admitting it would be the oldest idle connection, its
            // head not yet read, and make room for the rest of the flood.
            #expect(
                try await PressureSlotTests.within(.seconds(20)) {
                    var closed = 0
                    for connection in idle where await !connection.isOpen() { closed += 1 }
                    return closed >= 32
                })
            #expect(try await PressureSlotTests.honestBuyer(fixture) == 200, "a buyer gets in past 40 idle connections")
            #expect(try await PressureSlotTests.honestBuyer(fixture) == 200)
            withExtendedLifetime(idle) {}
        }
    }

    @Test func whenEveryConnectionIsBusyANewOneIs503AndClosed() async throws {
        try await DownloadFixture.run({
            AttackLimitTests.withHugeProduct(&$0)
            $0.connectionLimits.maxConnections = 3
            $0.connectionLimits.minimumSendRate = 0
        }) { fixture in
            let purchase = try await fixture.control.purchase(PressureSlotTests.huge)
            try await PressureSlotTests.entitle(fixture, purchase)
            // Three streams in progress: none of them is idle, so none is closed to make room.
            let busy = try await (0..<3).asyncMap { _ in try await PressureSlotTests.stall(fixture, purchase.transactionId) }
            let late = try RawConnection(port: try #require(fixture.client.port))
            let answer = await Self.readToClose(late)
            #expect(answer.hasPrefix("HTTP/1.1 503"), "\(answer.prefix(80))")
            #expect(answer.contains("\"too_many_connections\""))
            withExtendedLifetime(busy) {}
        }
    }

    /// Starts a POST whose body (400 bytes announced) comes a byte every `interval`, and returns
    /// how long until the server closes it (nil when still open after `limit`).
    static func timeUntilBodyIsCut(_ fixture: DownloadFixture, every interval: Duration, limit: Duration) async throws -> Duration? {
        let connection = try RawConnection(port: try #require(fixture.client.port))
        connection.send("POST /v1/downloads HTTP/1.1\r\nHost: s\r\nContent-Type: application/json\r\nContent-Length: 400\r\n\r\n{")
        let start = ContinuousClock.now
        while ContinuousClock.now - start < limit {
            connection.send(" ")
            try await Task.sleep(for: interval)
            if await !connection.isOpen() { return ContinuousClock.now - start }
        }
        return nil
    }

    @Test func aTrickledBodyIsClosedAtTheBodyDeadlineAndChangesNothing() async throws {
        try await DownloadFixture.run({
            $0.connectionLimits.bodyTimeout = .seconds(3)
            $0.connectionLimits.bodyMinimumRate = 0
        }) { fixture in
            let cut = try await Self.timeUntilBodyIsCut(fixture, every: .milliseconds(500), limit: .seconds(40))
            #expect(cut != nil, "a body trickled a byte every half second is not waited for")
            #expect(cut.map { $0 >= .seconds(2) && $0 < .seconds(30) } == true, "\(String(describing: cut))")
            #expect(try await fixture.snapshot() == [])
        }
    }

    @Test func aBodyBelowTheMinimumRateIsClosed() async throws {
        try await DownloadFixture.run({
            $0.connectionLimits.bodyTimeout = .seconds(120)
            $0.connectionLimits.bodyMinimumRate = 1024
        }) { fixture in
            // Cut at about 6 s; the bound leaves room for a full test run's first minute on two cores.
            let cut = try await Self.timeUntilBodyIsCut(fixture, every: .seconds(1), limit: .seconds(60))
            #expect(cut.map { $0 < .seconds(45) } == true, "closed once its first 5 s show a byte a second, not at the 120 s deadline")
            #expect(try await fixture.snapshot() == [])
        }
    }

    @Test func malformedChunkedFramingIsA400AndChangesNothing() async throws {
        try await DownloadFixture.run { fixture in
            let connection = try RawConnection(port: try #require(fixture.client.port))
            connection.send(
                """
                POST /v1/downloads HTTP/1.1\r\nHost: s\r\nContent-Type: application/json\r\nTransfer-Encoding: \
                chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n
                """
            )
            let answer = await Self.readToClose(connection)
            #expect(answer.hasPrefix("HTTP/1.1 400"), "\(answer.prefix(80))")
            #expect(answer.contains("\"code\":\"bad_request\""))
            #expect(answer.lowercased().contains("connection: close"))
            #expect(try await fixture.snapshot() == [])
        }
    }

    @Test func forwardedForFromAnUntrustedPeerIsNotAClientAddress() async throws {
        // 30 requests, each claiming another address: without --trusted-proxy they are one client.
        try await DownloadFixture.run({ $0.upstreamRate = UpstreamRate(requests: 2, per: .seconds(3600)) }) { fixture in
            var statuses: [HTTPResponse.Status] = []
            for index in 0..<6 {
                let purchase = try await fixture.control.purchase(DownloadFixture.book)
                statuses.append(try await Self.post(fixture, purchase, forwardedFor: "198.51.100.\(index + 1)").status)
            }
            // The first two reach the App Store (200, or 503 when a loaded machine makes the
            // simulator miss the fixture's 3 s budget); every later one is held back as the same client.
            #expect(!statuses.prefix(2).contains(.tooManyRequests), "\(statuses)")
            #expect(statuses.suffix(4) == [.tooManyRequests, .tooManyRequests, .tooManyRequests, .tooManyRequests], "\(statuses)")
        }
    }

    @Test func behindATrustedProxyIPv6ClientsCountPerSlash64() async throws {
        try await DownloadFixture.run({
            $0.upstreamRate = UpstreamRate(requests: 2, per: .seconds(3600))
            $0.trustedProxies = try! TrustedProxies(parsing: ["127.0.0.1"])
        }) { fixture in
            var statuses: [HTTPResponse.Status] = []
            for client in ["2001:db8:0:1::1", "2001:db8:0:1::2", "2001:db8:0:1:ffff::3", "2001:db8:0:2::1", "198.51.100.1"] {
                let purchase = try await fixture.control.purchase(DownloadFixture.book)
                statuses.append(try await Self.post(fixture, purchase, forwardedFor: client).status)
            }
            #expect(statuses == [.ok, .ok, .tooManyRequests, .ok, .ok], "one /64 is one client; another /64 or address is another")
        }
    }

    static func post(_ fixture: DownloadFixture, _ purchase: SimulatorControl.Purchase, forwardedFor: String) async throws -> TestResponse {
        let body = try JSONSerialization.data(withJSONObject: [
            "productId": DownloadFixture.book, "signedTransaction": purchase.signedTransaction,
        ])
        return try await fixture.client.execute(
            uri: "/v1/downloads", method: .post, headers: [HTTPField.Name("X-Forwarded-For")!: forwardedFor], body: ByteBuffer(bytes: body))
    }

    @Test func metricsCanMoveToTheirOwnLoopbackPort() async throws {
        let port = try FreePort.make(SOCK_STREAM)
        try await DownloadFixture.run({ $0.metricsAddress = try! MetricsAddress(parsing: "127.0.0.1:\(port)") }) { fixture in
            #expect(try await fixture.client.execute(uri: "/metrics", method: .get).status == .notFound, "not on the public port")
            let scrape = try await PressureSlotTests.within(.seconds(10)) {
                (try? await CurlHTTPClient().send(UpstreamRequest(method: .get, url: "http://127.0.0.1:\(port)/metrics")))?.status == 200
            }
            #expect(scrape)
            let scraped = try await CurlHTTPClient().send(UpstreamRequest(method: .get, url: "http://127.0.0.1:\(port)/metrics"))
            #expect(
                scraped.headers.first { $0.key.lowercased() == "content-type" }?.value.hasPrefix("text/plain") == true, "Prometheus text")
        }
        #expect(throws: MetricsAddressError.self) { try MetricsAddress(parsing: "0.0.0.0:9100") }
        #expect(throws: MetricsAddressError.self) { try MetricsAddress(parsing: "9100") }
    }
}

extension LimitsConnectionTests.RawConnection {
    /// Whether the server has not closed the connection (reading and dropping anything it sent).
    func isOpen() async -> Bool {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
        if count > 0 { return true }
        return count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
    }
}

extension Sequence where Element: Sendable {
    /// `map` with an async transform, one element after another.
    func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var values: [T] = []
        for element in self { values.append(try await transform(element)) }
        return values
    }
}
