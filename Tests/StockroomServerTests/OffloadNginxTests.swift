import Foundation
import StockroomCore
import StockroomTestSupport
import Testing
@testable import StockroomServer

/// Real nginx in front of a live server with `--offload x-accel-redirect`: nginx sends the
/// bytes, Stockroom decides and sets the headers, and nginx's syslog reports keep the ledger.
@Suite struct OffloadNginxTests {
    static let bookDigest = SHA256.hash(ServerFixture.book)

    @Test func aPurchaseThroughNginxGetsTheFileWithStockroomsHeadersAndIsRecordedDelivered() async throws {
        try await OffloadNginxFixture.run { nginx in
            let purchase = try await nginx.server.control.purchase(DownloadFixture.book)
            let response = try await nginx.post(purchase)
            #expect(response.status == 200)
            #expect(SHA256.hash(response.body) == Self.bookDigest)
            let headers = response.headers
            #expect(headers["content-length"] == "20000")
            #expect(headers["etag"] == "\"\(ByteEncoding.hex(Self.bookDigest))\"")
            #expect(headers["repr-digest"] == "sha-256=:\(ByteEncoding.base64(Self.bookDigest)):")
            #expect(headers["x-transaction-id"] == purchase.transactionId)
            #expect(headers["x-download-token"]?.hasPrefix("v1.") == true)
            #expect(headers["location"] == "/v1/downloads/\(purchase.transactionId)/content")
            #expect(headers["content-type"] == "application/epub+zip")
            #expect(headers["cache-control"] == "no-store")
            #expect(headers["accept-ranges"] == "bytes")
            #expect(headers["x-accel-redirect"] == nil, "nginx consumes it")
            #expect(headers["last-modified"] == nil, "a date must not satisfy If-Range")

            let ledger = nginx.server.ledger
            #expect(try await nginx.server.eventually { try await ledger.fulfilment(purchase.transactionId)?.state == .delivered })
            let row = try #require(try await ledger.fulfilment(purchase.transactionId))
            #expect(row.attempts == 1)
            #expect(row.bytesDelivered == 20_000)
            let attempts = try await ledger.attempts(of: purchase.transactionId)
            #expect(attempts.map(\.outcome) == [.complete])
            #expect(attempts.first.map { [$0.rangeStart, $0.rangeEnd, $0.bytes] } == [0, 19_999, 20_000])
            // Delivered through nginx, so the app may acknowledge.
            let token = try #require(headers["x-download-token"])
            let ack = try await nginx.send(
                .post, "/v1/downloads/\(purchase.transactionId)/ack", headers: [("Authorization", "Bearer \(token)")])
            #expect(ack.status == 200)
        }
    }

    @Test func aResumeThroughNginxGets206WithTheRightBytesAndIfRangeOnStockroomsETag() async throws {
        try await OffloadNginxFixture.run { nginx in
            let purchase = try await nginx.server.control.purchase(DownloadFixture.book)
            let first = try await nginx.post(purchase)
            let token = try #require(first.headers["x-download-token"])
            let etag = try #require(first.headers["etag"])
            let tx = purchase.transactionId

            let tail = try await nginx.content(tx, token: token, headers: [("Range", "bytes=15000-"), ("If-Range", etag)])
            #expect(tail.status == 206)
            #expect(tail.body == Array(ServerFixture.book[15000...]))
            #expect(tail.headers["content-range"] == "bytes 15000-19999/20000")
            #expect(tail.headers["etag"] == etag)
            #expect(tail.headers["x-transaction-id"] == tx)
            #expect(tail.headers["x-download-token"] == nil, "a resume hands out no new token")
            let suffix = try await nginx.content(tx, token: token, headers: [("Range", "bytes=-100")])
            #expect(suffix.status == 206)
            #expect(suffix.body == Array(ServerFixture.book.suffix(100)))
            let stale = try await nginx.content(tx, token: token, headers: [("Range", "bytes=15000-"), ("If-Range", "\"old\"")])
            #expect(stale.status == 200)
            #expect(stale.body == ServerFixture.book)
            let dated = try await nginx.content(
                tx, token: token, headers: [("Range", "bytes=15000-"), ("If-Range", "Sun, 22 Nov 2026 10:00:00 GMT")])
            #expect(dated.status == 200, "a date never matches Stockroom's strong ETag")
            let several = try await nginx.content(tx, token: token, headers: [("Range", "bytes=0-1,5-6")])
            #expect(several.status == 200, "several ranges get the whole file, as from Stockroom")
            #expect(several.body == ServerFixture.book)

            let ledger = nginx.server.ledger
            #expect(try await nginx.server.eventually { try await ledger.attempts(of: tx).count == 6 })
            let attempts = try await ledger.attempts(of: tx)
            #expect(attempts.contains { $0.rangeStart == 15000 && $0.rangeEnd == 19999 && $0.bytes == 5000 && $0.outcome == .complete })
            #expect(attempts.contains { $0.rangeStart == 19900 && $0.rangeEnd == 19999 && $0.bytes == 100 })
            #expect(try await ledger.fulfilment(tx)?.attempts == 6)
        }
    }

    @Test func aFileNameThatNeedsEncodingArrivesWhole() async throws {
        try await OffloadNginxFixture.run { nginx in
            let purchase = try await nginx.server.control.purchase(OffloadNginxFixture.oddProduct)
            let response = try await nginx.post(purchase, product: OffloadNginxFixture.oddProduct)
            #expect(response.status == 200)
            #expect(response.body == OffloadNginxFixture.oddBytes)
        }
    }

    @Test func refusalsAreStockroomsJSONAndNginxSendsNoFileBytes() async throws {
        let adminToken = "offload-admin-token-0123456789abcdef"
        try await OffloadNginxFixture.run({ $0.adminToken = adminToken }) { nginx in
            let purchase = try await nginx.server.control.purchase(DownloadFixture.book)
            let tx = purchase.transactionId
            let token = try #require(try await nginx.post(purchase).headers["x-download-token"])
            #expect(try await nginx.server.eventually { try await nginx.server.ledger.fulfilment(tx)?.state == .delivered })
            let revoked = try await nginx.server.admin(.post, "fulfilments/\(tx)/revoke", token: adminToken, body: ["reason": "chargeback"])
            #expect(revoked.status == .ok)
            let before = try await nginx.server.snapshot()

            let cases: [(String, String, String, Int)] = [
                ("revoked", tx, token, 403),
                ("token_expired", tx, DownloadFixture.token(tx, issuedAt: Date(timeIntervalSinceNow: -7200)), 401),
                ("unknown_transaction", "990000000000001", DownloadFixture.token("990000000000001"), 404),
            ]
            for (code, transaction, bearer, status) in cases {
                let direct = try await nginx.server.get("/v1/downloads/\(transaction)/content", token: bearer)
                let proxied = try await nginx.content(transaction, token: bearer)
                #expect(direct.status.code == status)
                #expect(try DownloadFixture.code(direct) == code)
                #expect(proxied.status == status, "\(code)")
                #expect(proxied.headers["content-type"] == "application/json; charset=utf-8")
                #expect(proxied.body == Array(buffer: direct.body), "\(code): Stockroom's own JSON answer")
                #expect(proxied.body.count < 1000 && !Self.contains(proxied.body, Array(ServerFixture.book.prefix(64))))
            }
            // The internal location is nginx's alone.
            #expect(try await nginx.send(.get, OffloadNginxFixture.prefix + "books/book.epub").status == 404)
            try await Task.sleep(for: .milliseconds(300))  // any report would have arrived
            #expect(try await nginx.server.snapshot() == before)

            let refusedPost = try await nginx.post(purchase)
            #expect(refusedPost.status == 403)
            #expect(refusedPost.headers["content-type"] == "application/json; charset=utf-8")
            #expect(refusedPost.body.count < 1000)
        }
    }

    @Test func aClientThatCutsTheDownloadShortIsRecordedInterruptedNotDelivered() async throws {
        try await OffloadNginxFixture.run { nginx in
            let size = Int64(128 << 20)
            let purchase = try await nginx.server.control.purchase(AttackLimitTests.huge)
            await #expect(throws: UpstreamError.responseTooLarge(limit: 256 * 1024)) {
                _ = try await nginx.post(purchase, product: AttackLimitTests.huge, limit: 256 * 1024)
            }
            let ledger = nginx.server.ledger
            #expect(try await nginx.server.eventually { try await !ledger.attempts(of: purchase.transactionId).isEmpty })
            let row = try #require(try await ledger.fulfilment(purchase.transactionId))
            #expect(row.state == .verified)
            #expect(row.bytesDelivered > 0 && row.bytesDelivered < size)
            #expect(try await ledger.attempts(of: purchase.transactionId).map(\.outcome) == [.interrupted])
        }
    }

    @Test func anOffloadedDownloadHoldsNoSlotWhileNginxSendsIt() async throws {
        try await OffloadNginxFixture.run({ $0.maxDownloadsPerPurchase = 1 }) { nginx in
            let purchase = try await nginx.server.control.purchase(AttackLimitTests.huge)
            let token = DownloadFixture.token(purchase.transactionId, product: AttackLimitTests.huge)
            let tx = purchase.transactionId
            _ = try? await nginx.post(purchase, product: AttackLimitTests.huge, limit: 64 * 1024)  // entitled; cut short
            // A client that asks nginx for the file and does not read.
            let stalled = try LimitsConnectionTests.RawConnection(port: nginx.port, receiveBuffer: 4096)
            stalled.send("GET /v1/downloads/\(tx)/content HTTP/1.1\r\nHost: s\r\nAuthorization: Bearer \(token)\r\n\r\n")
            let head = await stalled.receive().map { String(decoding: $0.prefix(200), as: UTF8.self) }
            #expect(head?.hasPrefix("HTTP/1.1 200") == true)
            // With one slot per transaction, a streamed download would answer 429 now.
            let second = try await nginx.content(tx, token: token, headers: [("Range", "bytes=0-99")])
            #expect(second.status == 206)
            #expect(second.body == [UInt8](repeating: 0, count: 100))
        }
    }

    @Test func parallelRequestsOfOnePurchaseAreAllServedWhenNginxSendsTheBytes() async throws {
        // A multi-connection downloader (aria2c, a background session's parallel ranges): with
        // offload, authorising takes no stream slot, so the per-purchase and per-client caps
        // (here 1 each) do not turn its ranges away.
        try await OffloadNginxFixture.run({
            $0.maxDownloadsPerPurchase = 1; $0.maxDownloadsPerClient = 1
        }) { nginx in
            let purchase = try await nginx.server.control.purchase(AttackLimitTests.huge)
            let token = DownloadFixture.token(purchase.transactionId, product: AttackLimitTests.huge)
            _ = try? await nginx.post(purchase, product: AttackLimitTests.huge, limit: 64 * 1024)
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for index in 0..<8 {
                    group.addTask {
                        let start = index * 1_000_000
                        return try await nginx.content(
                            purchase.transactionId, token: token, headers: [("Range", "bytes=\(start)-\(start + 999_999)")]
                        ).status
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(statuses == Array(repeating: 206, count: 8))
        }
    }

    @Test func theSiteKeepsOperatorSurfacesOffItsPublicSide() async throws {
        try await OffloadNginxFixture.run { nginx in
            let metrics = try await nginx.send(.get, "/metrics")
            #expect(metrics.status == 404, "metrics are scraped from Stockroom itself")
            #expect(try await nginx.send(.get, "/openapi.json").status == 200, "this machine may read the contract")
            #expect(try await nginx.send(.get, "/v1/catalog").status == 200)
        }
        let site = try NginxSite(listen: "443", stockroom: "http://127.0.0.1:8080", contentFolder: "/srv/content")
        for location in ["location = /openapi.json {", "location ^~ /v1/admin/ {", "location ^~ /console {"] {
            let block = try #require(site.serverBlock.components(separatedBy: location).dropFirst().first)
            #expect(block.components(separatedBy: "}").first?.contains("deny all;") == true, "\(location) answers an allow list only")
        }
        #expect(site.httpInclude.contains("--trusted-proxy 127.0.0.1"))
    }

    static func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard needle.count <= haystack.count else { return false }
        return (0...(haystack.count - needle.count)).contains { Array(haystack[$0..<($0 + needle.count)]) == needle }
    }
}
