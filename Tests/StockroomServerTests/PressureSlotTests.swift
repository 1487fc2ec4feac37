import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import StockroomCore
import StockroomPostgresTestSupport
import StockroomTestSupport
import Synchronization
import Testing
@testable import StockroomServer

/// Issue 17 case 2 through the live route: a reader that never reads cannot hold a slot, caps
/// count purchases and clients, and every way a stream ends gives its slot back.
@Suite struct PressureSlotTests {
    static let huge = AttackLimitTests.huge

    /// Entitles `purchase` to the huge product: a POST whose client stops after 64 KiB.
    static func entitle(_ fixture: DownloadFixture, _ purchase: SimulatorControl.Purchase) async throws {
        let body = try JSONSerialization.data(
            withJSONObject: ["productId": huge, "transactionId": purchase.transactionId, "receiptData": purchase.receiptData])
        _ = try? await CurlHTTPClient(configuration: .init(maximumResponseBytes: 64 * 1024))
            .send(
                UpstreamRequest(method: .post, url: "http://127.0.0.1:\(try #require(fixture.client.port))/v1/downloads", body: Array(body))
            )
        #expect(try await fixture.eventually { try await !fixture.ledger.attempts(of: purchase.transactionId).isEmpty })
    }

    /// A client that asks for the huge file, reads the head, and then reads nothing more.
    static func stall(_ fixture: DownloadFixture, _ transactionID: String, forwardedFor: String? = nil) async throws
        -> LimitsConnectionTests.RawConnection
    {
        let connection = try LimitsConnectionTests.RawConnection(port: try #require(fixture.client.port), receiveBuffer: 4096)
        let token = DownloadFixture.token(transactionID, product: huge)
        let forwarded = forwardedFor.map { "X-Forwarded-For: \($0)\r\n" } ?? ""
        connection.send(
            "GET /v1/downloads/\(transactionID)/content HTTP/1.1\r\nHost: s\r\nAuthorization: Bearer \(token)\r\n\(forwarded)\r\n")
        let head = await connection.receive().map { String(decoding: $0.prefix(200), as: UTF8.self) }
        #expect(head?.hasPrefix("HTTP/1.1 200") == true, "\(head ?? "closed")")
        return connection
    }

    /// The status of a 10-byte resume of `transactionID`, from a fresh connection.
    static func probe(_ fixture: DownloadFixture, _ transactionID: String, forwardedFor: String? = nil) async throws -> Int {
        var headers = [("Authorization", "Bearer \(DownloadFixture.token(transactionID, product: huge))"), ("Range", "bytes=0-9")]
        if let forwardedFor { headers.append(("X-Forwarded-For", forwardedFor)) }
        let response = try await CurlHTTPClient().send(
            UpstreamRequest(
                method: .get, url: "http://127.0.0.1:\(try #require(fixture.client.port))/v1/downloads/\(transactionID)/content",
                headers: headers.map { (name: $0.0, value: $0.1) }))
        return response.status
    }

    /// An honest buyer of the small book: a fresh purchase downloaded whole over its own connection.
    static func honestBuyer(_ fixture: DownloadFixture) async throws -> Int {
        let purchase = try await fixture.control.purchase(DownloadFixture.book)
        let body = try JSONSerialization.data(withJSONObject: [
            "productId": DownloadFixture.book, "signedTransaction": purchase.signedTransaction,
        ])
        let response = try await CurlHTTPClient().send(
            UpstreamRequest(method: .post, url: "http://127.0.0.1:\(try #require(fixture.client.port))/v1/downloads", body: Array(body)))
        if response.status == 200 { #expect(response.body == ServerFixture.book) }
        return response.status
    }

    /// Polls `condition` for up to `limit`.
    static func within(_ limit: Duration, _ condition: () async throws -> Bool) async throws -> Bool {
        let deadline = ContinuousClock.now + limit
        while ContinuousClock.now < deadline {
            if try await condition() { return true }
            try await Task.sleep(for: .milliseconds(100))
        }
        return try await condition()
    }

    @Test(arguments: LedgerEngine.allCases) func aStalledReaderIsCutByTheMinimumSendRateAndItsSlotComesBack(_ engine: LedgerEngine)
        async throws
    {
        try await DownloadFixture.run(
            engine: engine,
            {
                AttackLimitTests.withHugeProduct(&$0)
                $0.maxDownloadsPerPurchase = 1
                $0.connectionLimits.sendTimeout = .seconds(2)
                $0.connectionLimits.minimumSendRate = 1 << 20  // no 4 KiB receive buffer left unread meets 1 MiB/s
            }
        ) { fixture in
            let purchase = try await fixture.control.purchase(Self.huge)
            try await Self.entitle(fixture, purchase)
            let start = ContinuousClock.now
            let stalled = try await Self.stall(fixture, purchase.transactionId)
            #expect(try await Self.probe(fixture, purchase.transactionId) == 429, "the stalled stream holds the purchase's one slot")
            #expect(try await Self.honestBuyer(fixture) == 200, "another buyer is served meanwhile")
            let cut = try await Self.within(.seconds(20)) {
                try await fixture.ledger.attempts(of: purchase.transactionId).map(\.outcome) == [.interrupted, .interrupted]
            }
            #expect(cut, "the stalled stream is recorded interrupted")
            #expect(ContinuousClock.now - start < .seconds(12), "cut within a few send windows, not by the kernel")
            #expect(
                try await Self.within(.seconds(5)) { try await Self.probe(fixture, purchase.transactionId) == 206 }, "its slot came back")
            withExtendedLifetime(stalled) {}
        }
    }

    /// A reader above the minimum rate, but slower than one `sendfile` region per window (regions
    /// grow to 4 MiB; at 1.4 MiB/s one takes three 2 s windows to drain), reads on uncut: the
    /// watch counts the bytes it acknowledged, not only the writes that completed.
    @Test func aSlowHonestReaderIsNotCutWhileALargeRegionDrains() async throws {
        try await DownloadFixture.run({
            AttackLimitTests.withHugeProduct(&$0)
            $0.connectionLimits.sendTimeout = .seconds(2)
            $0.connectionLimits.minimumSendRate = 256 << 10
        }) { fixture in
            let purchase = try await fixture.control.purchase(Self.huge)
            try await Self.entitle(fixture, purchase)
            let connection = try LimitsConnectionTests.RawConnection(port: try #require(fixture.client.port), receiveBuffer: 256 << 10)
            let token = DownloadFixture.token(purchase.transactionId, product: Self.huge)
            connection.send(
                "GET /v1/downloads/\(purchase.transactionId)/content HTTP/1.1\r\nHost: s\r\nAuthorization: Bearer \(token)\r\n\r\n")
            let wanted = 20 << 20
            let (received, elapsed) = await CatalogFastPathTests.onThread { () -> (Int, Duration) in
                // 64 KiB every 45 ms, about 1.4 MiB/s, paced from the start (a late read catches up).
                let start = ContinuousClock.now
                var received = 0
                var buffer = [UInt8](repeating: 0, count: 64 << 10)
                while received < wanted {
                    let due = start + .milliseconds(45) * (received >> 16)
                    if ContinuousClock.now < due {
                        Thread.sleep(forTimeInterval: Double((due - ContinuousClock.now) / .microseconds(1)) / 1e6)
                    }
                    var descriptor = pollfd(fd: connection.descriptor, events: Int16(POLLIN), revents: 0)
                    guard poll(&descriptor, 1, 20_000) > 0 else { break }
                    let count = buffer.withUnsafeMutableBytes {
                        recv(connection.descriptor, $0.baseAddress, min($0.count, wanted - received), 0)
                    }
                    guard count > 0 else { break }
                    received += count
                }
                return (received, ContinuousClock.now - start)
            }
            #expect(received == wanted, "the connection was cut after \(received) bytes, \(elapsed)")
            #expect(elapsed > .seconds(8), "the reader was slower than a region per window (\(elapsed))")
        }
    }

    @Test func aBodyThatFailsMidStreamGivesItsSlotBack() async throws {
        let content = Mutex("")
        try await DownloadFixture.run({
            AttackLimitTests.withHugeProduct(&$0)
            $0.maxDownloads = 1
            $0.connectionLimits.minimumSendRate = 0
            let folder = $0.contentFolder
            content.withLock { $0 = folder }
        }) { fixture in
            let purchase = try await fixture.control.purchase(Self.huge)
            try await Self.entitle(fixture, purchase)
            let stalled = try await Self.stall(fixture, purchase.transactionId)
            #expect(try await Self.honestBuyer(fixture) == 429, "the one stream is taken")
            // The file shrinks under the stream: the next read fails, and so does the body.
            let file = try #require(FileHandle(forWritingAtPath: content.withLock { $0 } + "/huge.bin"))
            try file.truncate(atOffset: 1 << 20)
            try file.close()
            #expect(await stalled.timeUntilClosed() < .seconds(20), "the failed body closes the connection")
            #expect(try await Self.within(.seconds(5)) { try await Self.honestBuyer(fixture) == 200 }, "the failed body gave its slot back")
            #expect(try await fixture.ledger.attempts(of: purchase.transactionId).last?.outcome == .interrupted)
        }
    }

    @Test func aClientThatDisconnectsGivesItsSlotBack() async throws {
        try await DownloadFixture.run({
            AttackLimitTests.withHugeProduct(&$0)
            $0.maxDownloads = 1
            $0.connectionLimits.minimumSendRate = 0
        }) { fixture in
            let purchase = try await fixture.control.purchase(Self.huge)
            try await Self.entitle(fixture, purchase)
            var stalled: LimitsConnectionTests.RawConnection? = try await Self.stall(fixture, purchase.transactionId)
            #expect(try await Self.honestBuyer(fixture) == 429)
            withExtendedLifetime(stalled) {}
            stalled = nil  // closed with unread bytes: a reset
            #expect(try await Self.within(.seconds(5)) { try await Self.honestBuyer(fixture) == 200 })
            #expect(try await fixture.ledger.attempts(of: purchase.transactionId).last?.outcome == .interrupted)
        }
    }

    @Test(arguments: LedgerEngine.allCases) func aPurchaseHoldsNoMoreThanItsShareAcrossItsRestores(_ engine: LedgerEngine) async throws {
        try await DownloadFixture.run(
            engine: engine,
            {
                AttackLimitTests.withHugeProduct(&$0)
                $0.maxDownloadsPerPurchase = 2
                $0.connectionLimits.minimumSendRate = 0
            }
        ) { fixture in
            let original = try await fixture.control.purchase(Self.huge)
            var restores: [SimulatorControl.Purchase] = []
            for _ in 0..<2 {
                restores.append(
                    try await fixture.control.purchase(["productId": Self.huge, "originalTransactionId": original.originalTransactionId]))
            }
            for purchase in [original] + restores { try await Self.entitle(fixture, purchase) }
            #expect(Set(([original] + restores).map(\.transactionId)).count == 3, "three transaction IDs, one purchase")
            var first: LimitsConnectionTests.RawConnection? = try await Self.stall(fixture, original.transactionId)
            let second = try await Self.stall(fixture, restores[0].transactionId)
            #expect(
                try await Self.probe(fixture, restores[1].transactionId) == 429,
                "a third transaction of the same purchase finds its share taken")
            #expect(try await Self.honestBuyer(fixture) == 200, "another purchase is served")
            withExtendedLifetime(first) {}
            first = nil
            #expect(try await Self.within(.seconds(5)) { try await Self.probe(fixture, restores[1].transactionId) == 206 })
            withExtendedLifetime(second) {}
        }
    }

    @Test func aClientHoldsNoMoreThanItsShareWhicheverPurchasesItNames() async throws {
        try await DownloadFixture.run({
            AttackLimitTests.withHugeProduct(&$0)
            $0.maxDownloadsPerClient = 1
            $0.trustedProxies = try! TrustedProxies(parsing: ["127.0.0.1"])
            $0.connectionLimits.minimumSendRate = 0
        }) { fixture in
            let first = try await fixture.control.purchase(Self.huge)
            let second = try await fixture.control.purchase(Self.huge)
            try await Self.entitle(fixture, first)
            try await Self.entitle(fixture, second)
            let stalled = try await Self.stall(fixture, first.transactionId, forwardedFor: "198.51.100.1")
            #expect(
                try await Self.probe(fixture, second.transactionId, forwardedFor: "198.51.100.1") == 429,
                "the same client, another purchase")
            #expect(try await Self.probe(fixture, second.transactionId, forwardedFor: "198.51.100.2") == 206, "another client")
            withExtendedLifetime(stalled) {}
        }
    }
}
