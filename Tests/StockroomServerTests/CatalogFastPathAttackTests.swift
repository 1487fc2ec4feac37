import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import NIOEmbedded
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1
import StockroomCore
import StockroomTestSupport
import Testing
@testable import StockroomServer

#if canImport(Glibc)
    import Glibc
#endif

/// `CatalogFastPath` attacked: what it reads against what the HTTP decoder behind it reads, what
/// a client that does not read can make it hold, and how a connection ends.
@Suite struct CatalogFastPathAttackTests {
    typealias RawConnection = LimitsConnectionTests.RawConnection

    static let catalogue = CatalogFastPathTests.catalogue

    // MARK: - Helpers

    /// The fixture's catalogue, loaded as `buildApplication` loads it.
    static func store(_ fixture: ServerFixture) throws -> CatalogStore {
        let jail = try ContentJail(folder: fixture.configuration.contentFolder)
        let loader = CatalogLoader(
            catalogFolder: fixture.configuration.catalogFolder, jail: jail, digests: DigestCache(file: fixture.root.path + "/digests.json"))
        return CatalogStore(catalog: try loader.load(), loader: loader)
    }

    /// A catalogue whose `GET /v1/catalog` body is about `title` bytes long.
    static func writeCatalogue(_ root: String, title: Int) throws {
        let text = ServerFixture.catalog([
            ServerFixture.entry("com.example.book", file: "books/book.epub", title: String(repeating: "a", count: title))
        ])
        try FileManager.default.createDirectory(atPath: root + "/catalog", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: root + "/content/books", withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: root + "/content/books/book.epub", contents: Data(ServerFixture.book))
        _ = FileManager.default.createFile(atPath: root + "/catalog/products.json", contents: Data(text.utf8))
    }

    /// `stockroom serve` as a process (its own metrics system), on a catalogue of `title` bytes.
    static func serve(title: Int, _ extra: [String] = []) async throws -> (StockroomProcess, String) {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("stockroom-fastpath-\(UUID().uuidString)").path
        try writeCatalogue(root, title: title)
        let port = try FreePort.make(SOCK_STREAM)
        let server = try StockroomProcess.serve(
            try StockroomProcess.binary(), folder: root, port: port,
            arguments: [
                "--upstream", "simulator", "--catalog", root + "/catalog", "--content", root + "/content", "--database",
                root + "/ledger.sqlite",
                "--bundle-id", "com.example.stockroom.demo", "--upstream-rate", "off", "--log-level", "warning",
            ] + extra,
            environment: ["STOCKROOM_TOKEN_SECRET": ServerFixture.tokenSecret])
        do {
            try await server.waitUntilHealthy()
        } catch {
            server.stop()
            throw error
        }
        return (server, root)
    }

    /// `hb_requests` of `GET /v1/catalog` with `status`, read from `/metrics` on a connection of its own.
    static func answered(_ status: Int, port: Int) async throws -> Int {
        let connection = try RawConnection(port: port)
        connection.send("GET /metrics HTTP/1.1\r\nHost: stockroom\r\n\r\n")
        let text = await CatalogFastPathTests.read(1, from: connection).first?.text ?? ""
        let line = text.split(separator: "\n").first {
            $0.hasPrefix("hb_requests{") && $0.contains("http_route=\"/v1/catalog\"") && $0.contains("http_request_method=\"GET\"")
                && $0.contains("http_response_status_code=\"\(status)\"")
        }
        return line.flatMap { Int($0.split(separator: " ").last ?? "") } ?? 0
    }

    static func residentKiB(_ pid: Int32) -> Int {
        let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
        return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") ?? 0
    }

    // MARK: - 1. A socket that stopped taking answers

    /// The handler alone: once the channel is not writable (a client that pipelines and does not
    /// read), a request that arrives in a read of its own is still answered; only a read holding a
    /// second request hands on. A client that sends its requests one by one therefore queues one
    /// answer per request, without bound, and Hummingbird's back-pressure never takes over.
    @Test func anUnwritableChannelGetsNoMoreAnswersFromTheFastPath() throws {
        let fixture = try ServerFixture()
        let path = CatalogFastPath(store: try Self.store(fixture), logger: Logger(label: "test"), serverName: "Stockroom")
        let channel = EmbeddedChannel(handler: path.handler())
        defer { _ = try? channel.finish(acceptAlreadyClosed: true) }

        try channel.writeInbound(ByteBuffer(string: Self.catalogue))
        var writes = 0
        while try channel.readOutbound(as: ByteBuffer.self) != nil { writes += 1 }
        #expect(writes == 2, "a writable channel: head and body")

        // The socket stops taking answers.
        channel.isWritable = false
        var answersWhileUnwritable = 0
        var handedOn = 0
        for _ in 0..<1_000 {
            try channel.writeInbound(ByteBuffer(string: Self.catalogue))
            while try channel.readOutbound(as: ByteBuffer.self) != nil { answersWhileUnwritable += 1 }
            while try channel.readInbound(as: ByteBuffer.self) != nil { handedOn += 1 }
        }
        #expect(
            answersWhileUnwritable / 2 <= 1,
            "\(answersWhileUnwritable / 2) answers queued on a channel that takes none, \(handedOn) reads handed on to the decoder")
    }

    /// The same, live against `stockroom serve`: a client with a 4 KiB receive buffer that never
    /// reads sends 300 catalogue requests, one every 5 ms. The socket and the kernel take a few MiB
    /// of 100 KB answers (about 40), the channel 64 KiB more; everything after must wait in the
    /// decoder behind Hummingbird's back-pressure, unanswered. The fast path answers them all.
    @Test func aClientThatNeverReadsCannotMakeTheFastPathQueueAnswersWithoutBound() async throws {
        let (server, root) = try await Self.serve(title: 100_000)
        defer {
            server.stop()
            try? FileManager.default.removeItem(atPath: root)
        }
        let before = try await Self.answered(200, port: server.port)
        let memoryBefore = Self.residentKiB(server.pid)
        let reader = try RawConnection(port: server.port, receiveBuffer: 4096)
        // Each request in a segment of its own, as soon as it is sent (no Nagle coalescing).
        var noDelay: Int32 = 1
        _ = setsockopt(reader.descriptor, Int32(IPPROTO_TCP), TCP_NODELAY, &noDelay, socklen_t(MemoryLayout<Int32>.size))
        let sent = 300
        for _ in 0..<sent {
            reader.send(Self.catalogue)
            try await Task.sleep(for: .milliseconds(5))
        }
        try await Task.sleep(for: .milliseconds(500))
        let queued = try await Self.answered(200, port: server.port) - before
        let memoryAfter = Self.residentKiB(server.pid)
        #expect(
            queued <= 100,
            "\(queued) of \(sent) answers (100 KB each) queued for a client that read none; server RSS \(memoryBefore) → \(memoryAfter) KiB"
        )
        withExtendedLifetime(reader) {}
    }

    // MARK: - 2. What the decoder refuses, the fast path answers

    /// Hummingbird's decoder takes at most 1,000 header fields (`maxHeaderFieldCount`) and answers
    /// 400 and closes past that; 8 KiB hold 2,000 short fields, all of which `CatalogRequest` reads.
    @Test func aHeadWithMoreFieldsThanTheDecoderTakesIsLeftToTheDecoder() {
        let head = "GET /v1/catalog HTTP/1.1\r\nHost: a\r\n" + String(repeating: "a:\r\n", count: 1_001) + "\r\n"
        #expect(head.utf8.count < CatalogFastPath.maximumHead)
        #expect(CatalogRequestTests.read(head) == nil, "1,001 fields: the decoder refuses this head, so it must be the decoder's")
    }

    /// Live: the same oversized head as a `HEAD` (always the route's) gets the decoder's 400 and a
    /// closed connection; as a `GET` it gets a 200 from the fast path and the connection stays open.
    @Test func aHeadWithMoreFieldsThanTheDecoderTakesGetsTheDecodersAnswer() async throws {
        try await CatalogFastPathTests.withServer { _, port in
            let fields = "Host: stockroom\r\n" + String(repeating: "a:\r\n", count: 1_001) + "\r\n"
            // NIO reads into 2 KiB first, and grows the buffer after a read that fills it: one
            // answered request of exactly 2,048 bytes makes room for the whole 4 KiB head in one read.
            func warmed() async throws -> RawConnection {
                let connection = try RawConnection(port: port)
                let base = "GET /v1/catalog HTTP/1.1\r\nHost: stockroom\r\nX-Pad: \r\n\r\n"
                let pad = String(repeating: "p", count: 2048 - base.utf8.count)
                connection.send("GET /v1/catalog HTTP/1.1\r\nHost: stockroom\r\nX-Pad: \(pad)\r\n\r\n")
                #expect(await CatalogFastPathTests.read(1, from: connection).first?.status == 200)
                return connection
            }
            let routed = try await warmed()
            routed.send("HEAD /v1/catalog HTTP/1.1\r\n" + fields)
            let decoder = await CatalogFastPathTests.read(1, from: routed, bodiless: [0]).first?.status
            let fast = try await warmed()
            fast.send("GET /v1/catalog HTTP/1.1\r\n" + fields)
            let answer = await CatalogFastPathTests.read(1, from: fast).first?.status
            #expect(decoder == 400, "the decoder refuses 1,001 fields")
            #expect(
                answer == decoder, "the fast path answered \(answer.map(String.init) ?? "nothing") where the decoder answers 400 and closes"
            )
        }
    }

    /// llhttp reads `Proxy-Connection` as `Connection` (a `close` token there ends the
    /// connection after this request: NIO then refuses any byte after it,
    /// `HTTPParserError.closedConnection`, and Hummingbird answers 400 and closes).
    /// `CatalogRequest` ignores the field, so it answers this request and every one after it,
    /// requests the decoder would never have read.
    @Test(arguments: ["close", "Close", "keep-alive, close"])
    func proxyConnectionCloseIsLeftToTheDecoder(value: String) {
        #expect(CatalogRequestTests.read("GET /v1/catalog HTTP/1.1\r\nHost: a\r\nProxy-Connection: \(value)\r\n\r\n") == nil)
    }

    /// Live: the same pipeline through the decoder (behind a HEAD, which is always the route's)
    /// and on a fresh connection, where the fast path reads it.
    @Test func proxyConnectionCloseEndsTheConnectionAsTheDecoderEndsIt() async throws {
        try await CatalogFastPathTests.withServer { _, port in
            let closing = "GET /v1/catalog HTTP/1.1\r\nHost: stockroom\r\nProxy-Connection: close\r\n\r\n"
            let next = "GET /v1/catalog HTTP/1.1\r\nHost: stockroom\r\n\r\n" + "GET /healthz HTTP/1.1\r\nHost: stockroom\r\n\r\n"
            let routed = try RawConnection(port: port)
            routed.send("HEAD /v1/catalog HTTP/1.1\r\nHost: stockroom\r\n\r\n" + closing + next)
            let decoder = Array(await CatalogFastPathTests.read(4, from: routed, bodiless: [0]).map(\.status).dropFirst())
            let fast = try RawConnection(port: port)
            fast.send(closing + next)
            let answers = await CatalogFastPathTests.read(3, from: fast).map(\.status)
            #expect(
                decoder.first == 200 && !decoder.dropFirst().contains(200),
                "the decoder answers the request, then nothing after it: \(decoder)")
            #expect(answers == decoder, "the fast path answers \(answers) where the decoder answers \(decoder)")
        }
    }

    /// What held: a client that pipelines catalogue requests and never reads is still cut by the
    /// send-rate watch (nothing reaches it in a whole window).
    @Test func aClientThatNeverReadsIsCutByTheSendRateWatch() async throws {
        try await CatalogFastPathTests.withServer({
            $0.configuration.connectionLimits.sendTimeout = .seconds(2)
            try? Self.writeCatalogue($0.root.path, title: 100_000)
        }) { _, port in
            let reader = try RawConnection(port: port, receiveBuffer: 4096)
            var noDelay: Int32 = 1
            _ = setsockopt(reader.descriptor, Int32(IPPROTO_TCP), TCP_NODELAY, &noDelay, socklen_t(MemoryLayout<Int32>.size))
            let start = ContinuousClock.now
            var cut = false
            // Bounds of a loaded machine: the whole suite shares two cores, and its start once
            // stalled every task for 14 s; alone this cut comes in about 4 s.
            while ContinuousClock.now - start < .seconds(90) {
                // Requests one at a time, never reading; a send fails once the server has closed.
                let sent = Array(Self.catalogue.utf8).withUnsafeBytes {
                    Glibc.send(reader.descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT))
                }
                if sent < 0 && errno != EAGAIN && errno != EWOULDBLOCK {
                    cut = true
                    break
                }
                try await Task.sleep(for: .milliseconds(20))
            }
            #expect(cut, "cut after \(ContinuousClock.now - start)")
            #expect(ContinuousClock.now - start < .seconds(60))
        }
    }

    /// What held: the idle timeout, now `ConnectionClock`'s, on a connection that mixes fast
    /// answers and routed ones, and on a routed request whose body trickles in for longer than
    /// the idle timeout (bytes arriving are activity; the request is not idle).
    @Test func theIdleTimeoutAfterMixedRequestsAndDuringASlowBody() async throws {
        // An idle timeout of 6 s and a body trickled over 8 s: the test's own sends run on the
        // suite's busy tasks, and a gap of several seconds between two bytes is idleness.
        try await CatalogFastPathTests.withServer(
            idle: .seconds(6),
            {
                $0.configuration.connectionLimits.bodyMinimumRate = 0
                $0.configuration.connectionLimits.bodyTimeout = .seconds(60)
            }
        ) { _, port in
            let mixed = try RawConnection(port: port)
            mixed.send(Self.catalogue + "GET /healthz HTTP/1.1\r\nHost: stockroom\r\n\r\n" + Self.catalogue)
            #expect(await CatalogFastPathTests.read(3, from: mixed).map(\.status) == [200, 200, 200])
            let last = ContinuousClock.now
            _ = await mixed.timeUntilClosed()
            let silence = ContinuousClock.now - last
            #expect(silence >= .milliseconds(5_500) && silence < .seconds(20), "closed \(silence) after the last answer")

            let slow = try RawConnection(port: port)
            let body = #"{"productId": "com.example.book"}"#
            slow.send(Self.catalogue)
            #expect(await CatalogFastPathTests.read(1, from: slow).first?.status == 200)
            slow.send(
                """
                POST /v1/downloads HTTP/1.1\r\nHost: stockroom\r\nContent-Type: application/json\r\nContent-Length: \
                \(body.utf8.count)\r\n\r\n
                """
            )
            // The trickle on a thread of its own, not the suite's tasks (whose stalls are idleness).
            let (answer, took) = await CatalogFastPathTests.onThread { () -> (CatalogFastPathTests.Answer?, Duration) in
                let start = ContinuousClock.now
                for character in body {
                    usleep(250_000)
                    slow.send(String(character))
                }
                return (CatalogFastPathTests.answerNow(slow), ContinuousClock.now - start)
            }
            #expect(took > .seconds(7), "the body took longer than the idle timeout")
            #expect(
                answer?.status == 400,
                "answered after a body slower than the idle timeout, not cut: \(answer.map { "\($0.status)" } ?? "closed")")
        }
    }

    /// What held: the fast path's 200 and 304 carry the route's fields, in the route's order
    /// (the route's answers read behind a `/healthz`, which hands the connection to the decoder).
    @Test func theFastAnswersHaveTheRoutesFieldsInTheRoutesOrder() async throws {
        try await CatalogFastPathTests.withServer { fixture, port in
            let etag = try await CatalogFastPathTests.routeAnswer(fixture).etag
            let revalidate = "GET /v1/catalog HTTP/1.1\r\nHost: stockroom\r\nIf-None-Match: \(etag)\r\n\r\n"
            let fast = try RawConnection(port: port)
            fast.send(Self.catalogue + revalidate)
            let routed = try RawConnection(port: port)
            routed.send("GET /healthz HTTP/1.1\r\nHost: stockroom\r\n\r\n" + Self.catalogue + revalidate)
            let fastAnswers = await CatalogFastPathTests.read(2, from: fast)
            let routeAnswers = Array(await CatalogFastPathTests.read(3, from: routed).dropFirst())
            try #require(fastAnswers.count == 2 && routeAnswers.count == 2)
            for (mine, route) in zip(fastAnswers, routeAnswers) {
                #expect(mine.status == route.status)
                #expect(mine.fields.map(\.0) == route.fields.map(\.0))
                let varying: Set<String> = ["X-Request-Id", "Date"]
                #expect(mine.fields.filter { !varying.contains($0.0) }.map(\.1) == route.fields.filter { !varying.contains($0.0) }.map(\.1))
                #expect(mine.body == route.body)
            }
        }
    }

    // MARK: - 4. Differential fuzz: CatalogRequest against the decoder behind it

    /// A small deterministic generator (SplitMix64), so a failure names its seed.
    struct Generator: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    static let seeds: [String] = [
        "GET /v1/catalog HTTP/1.1\r\nHost: a\r\n\r\n",
        "GET /v1/catalog HTTP/1.1\r\n\r\n",
        "GET /v1/catalog?since=1&x=%20 HTTP/1.1\r\nHost: a\r\nAccept: */*\r\n\r\n",
        "GET /v1/catalog HTTP/1.1\r\nHost: a\r\nIf-None-Match:  \"abc\" \t\r\nConnection: keep-alive\r\n\r\n",
        "GET /v1/catalog HTTP/1.1\r\nif-none-match: W/\"a\", \"b\"\r\nConnection: Keep-Alive\r\nX-Empty:\r\n\r\n",
        "GET /v1/catalog HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n",
        "GET /v1/catalog HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    ]

    static let interestingBytes: [UInt8] = [
        0x00, 0x09, 0x0A, 0x0D, 0x20, 0x3A, 0x2C, 0x22, 0x41, 0x61, 0x7F, 0x80, 0xFF, 0x3F, 0x23, 0x2F, 0x57, 0x0B, 0x0C,
    ]

    static let riskyLines: [String] = [
        "Content-Length: 0", "Content-Length: 5", "content-length:0", "Content-Length : 0", "Content-Length\t: 0", "Content_Length: 5",
        "Transfer-Encoding: chunked", "Transfer-Encoding : chunked", "transfer-encoding:identity", "TE: chunked", "Connection: close",
        "Connection: keep-alive, close", "Connection: Upgrade", "Proxy-Connection: close", "Upgrade: h2c", "Expect: 100-continue",
        " folded", "\tfolded", "X: a\rb", "X: a\nb", "X:\u{0}", "Host: b", "If-None-Match: *", "If-None-Match: \"x\"", "HTTP2-Settings: x",
        "X-\u{7F}: y", ": empty-name", "X:", "X: \u{80}",
    ]

    /// One random input: a seed mutated a few times, or bytes at random.
    static func input(_ random: inout Generator) -> [UInt8] {
        if Int.random(in: 0..<20, using: &random) == 0 {
            return (0..<Int.random(in: 0..<80, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
        }
        var bytes = Array(seeds.randomElement(using: &random)!.utf8)
        for _ in 0..<Int.random(in: 1...4, using: &random) {
            let at = Int.random(in: 0...bytes.count, using: &random)
            switch Int.random(in: 0..<8, using: &random) {
            case 0 where at < bytes.count: bytes[at] = interestingBytes.randomElement(using: &random)!
            case 1: bytes.insert(interestingBytes.randomElement(using: &random)!, at: at)
            case 2 where at < bytes.count: bytes.remove(at: at)
            case 3 where at < bytes.count && (0x41...0x5A).contains(bytes[at] & 0xDF): bytes[at] ^= 0x20
            case 4:
                // a risky header line after the request line
                if let lineEnd = bytes.firstRange(of: Array("\r\n".utf8)) {
                    bytes.insert(contentsOf: Array((riskyLines.randomElement(using: &random)! + "\r\n").utf8), at: lineEnd.upperBound)
                }
            case 5 where at < bytes.count: bytes.removeSubrange(at..<min(bytes.count, at + Int.random(in: 1...6, using: &random)))
            case 6: bytes.insert(contentsOf: Array("\r\n".utf8), at: at)
            default: bytes.insert(contentsOf: Array(" \t".utf8).shuffled(using: &random).prefix(1), at: at)
            }
        }
        return bytes
    }

    /// What Hummingbird's decoder (llhttp with Hummingbird's limits, then the HTTP types codec)
    /// reads from `bytes` followed by a sentinel request: its first request's head and whether
    /// that request had a body, and whether the next request it read is the sentinel; or why not.
    static func decode(_ bytes: [UInt8]) -> Result<(head: HTTPRequest, body: Bool, sentinelNext: Bool), any Error> {
        let channel = EmbeddedChannel()
        defer { _ = try? channel.finish(acceptAlreadyClosed: true) }
        do {
            var limits = NIOHTTPDecoderLimitConfiguration()
            limits.maxHeaderFieldSize = 80 * 1024
            limits.maxHeaderListSize = 80 * 1024
            limits.maxHeaderFieldCount = 1000
            try channel.pipeline.syncOperations.configureHTTPServerPipeline(
                withPipeliningAssistance: false, withErrorHandling: false, withOutboundHeaderValidation: false,
                withEncoderConfiguration: .init(),
                withDecoderLimitConfiguration: limits)
            try channel.pipeline.syncOperations.addHandler(HTTP1ToHTTPServerCodec(secure: false))
            try channel.writeInbound(ByteBuffer(bytes: bytes + Array("GET /sentinel HTTP/1.1\r\nHost: s\r\n\r\n".utf8)))
            var parts: [HTTPRequestPart] = []
            while let part = try channel.readInbound(as: HTTPRequestPart.self) { parts.append(part) }
            guard case .head(let head) = parts.first else { return .failure(Divergence("no head: \(parts)")) }
            guard let end = parts.firstIndex(where: { if case .end = $0 { true } else { false } }) else {
                return .failure(Divergence("no end"))
            }
            let body = parts[1..<end].contains { if case .body(let b) = $0 { b.readableBytes > 0 } else { false } }
            var sentinelNext = false
            if end + 1 < parts.count, case .head(let next) = parts[end + 1] { sentinelNext = next.path == "/sentinel" }
            return .success((head, body, sentinelNext))
        } catch {
            return .failure(error)
        }
    }

    struct Divergence: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    /// nil when `CatalogRequest` does not read `bytes`, or reads them as the decoder does: one
    /// bodiless `GET /v1/catalog`, kept alive, ending exactly where `CatalogRequest` says (the
    /// next request the decoder reads is the one after), with the same `If-None-Match`; else how
    /// they differ.
    static func divergence(_ bytes: [UInt8]) -> String? {
        let read = bytes.withUnsafeBytes { buffer in
            CatalogRequest(buffer).map { ($0.length, $0.ifNoneMatch.map { Array($0) }) }
        }
        guard let (length, ifNoneMatch) = read else { return nil }
        switch Self.decode(Array(bytes.prefix(length))) {
        case .failure(let error):
            return "the decoder refuses it: \(error)"
        case .success(let decoded):
            let route = decoded.head.headerFields[.ifNoneMatch].map { $0.trimmingCharacters(in: CharacterSet(charactersIn: " \t")) }
            let fast = ifNoneMatch.map { String(decoding: $0, as: UTF8.self) }
            if decoded.head.method != .get || decoded.head.path?.split(separator: "?", maxSplits: 1).first != "/v1/catalog" {
                return "the decoder reads another request"
            } else if decoded.body {
                return "the decoder reads a body"
            } else if !decoded.sentinelNext {
                return "the decoder's next request is not the one after it"
            } else if route != fast {
                return "another If-None-Match for the route"
            } else if decoded.head.headerFields[.connection] == "close" {
                return "the route closes after it"
            }
            return nil
        }
    }

    /// Random inputs (seeds mutated, risky fields added, random bytes): every one
    /// `CatalogRequest` reads, the decoder reads the same way. Divergences are grouped by kind,
    /// each with its first input. (No input traps either: a trap ends the test process.)
    @Test func catalogRequestReadsOnlyWhatTheDecoderReadsTheSameWay() async {
        var random = Generator(state: 0x5EED_CA7A_1065)
        var accepted = 0
        var divergences: [String: (count: Int, example: String)] = [:]
        for round in 0..<40_000 {
            if round.isMultiple(of: 500) { await Task.yield() }
            let bytes = Self.input(&random)
            guard bytes.withUnsafeBytes({ CatalogRequest($0) }) != nil else { continue }
            accepted += 1
            if let kind = Self.divergence(bytes) {
                divergences[kind, default: (0, String(decoding: bytes, as: UTF8.self).debugDescription)].count += 1
            }
        }
        #expect(accepted > 1_000, "the generator reaches requests the fast path answers")
        let report = divergences.sorted { $0.key < $1.key }.map { "\($0.key) (\($0.value.count)×), e.g. \($0.value.example)" }
        #expect(divergences.isEmpty, "\(accepted) inputs read here; \(report.joined(separator: "\n"))")
    }

    /// Every byte value in every place of a request: the request line's query, a field name, a
    /// field value (inside, leading, trailing), the value of `Connection` and `If-None-Match`.
    @Test func everyByteInEveryPlaceIsReadAsTheDecoderReadsIt() {
        let templates = [
            "GET /v1/catalog?a@b HTTP/1.1\r\nHost: a\r\n\r\n",
            "GET /v1/catalog HTTP/1.1\r\nX-A@b: c\r\n\r\n",
            "GET /v1/catalog HTTP/1.1\r\n@X: c\r\n\r\n",
            "GET /v1/catalog HTTP/1.1\r\nX:@c\r\n\r\n",
            "GET /v1/catalog HTTP/1.1\r\nX: a@c\r\n\r\n",
            "GET /v1/catalog HTTP/1.1\r\nX: c@\r\n\r\n",
            "GET /v1/catalog HTTP/1.1\r\nConnection: keep-alive@\r\n\r\n",
            "GET /v1/catalog HTTP/1.1\r\nIf-None-Match: \"a@\"\r\n\r\n",
            "GET /v1/catalog HTTP/1.1\r\nIf-None-Match: \"a\"@\r\n\r\n",
            "GET /v1/catalog HTTP/1.1\r\nHost: a\r\n@\r\n",
        ]
        var divergences: [String] = []
        for template in templates {
            for byte in UInt8(0)...UInt8(255) {
                var bytes: [UInt8] = []
                for unit in template.utf8 { if unit == UInt8(ascii: "@") { bytes.append(byte) } else { bytes.append(unit) } }
                if let kind = Self.divergence(bytes) {
                    divergences.append("\(String(decoding: bytes, as: UTF8.self).debugDescription): \(kind)")
                }
            }
        }
        #expect(divergences.isEmpty, "\(divergences.joined(separator: "\n"))")
    }

    /// Random bytes of every length up to 9 KiB, and every prefix of every seed: no trap, and a
    /// length within the bytes.
    @Test func catalogRequestNeverTrapsNorReadsPastItsBytes() async {
        var random = Generator(state: 42)
        for round in 0..<3_000 {
            if round.isMultiple(of: 10) { await Task.yield() }
            let count = Int.random(in: 0..<9_300, using: &random)
            var bytes = (0..<count).map { _ in UInt8.random(in: 0...255, using: &random) }
            if count > 40, Bool.random(using: &random) { bytes.replaceSubrange(0..<26, with: Array("GET /v1/catalog HTTP/1.1\r\n".utf8)) }
            let length = bytes.withUnsafeBytes { CatalogRequest($0)?.length }
            if let length { #expect(length <= bytes.count) }
        }
        for seed in Self.seeds {
            let bytes = Array(seed.utf8)
            for end in 0...bytes.count {
                let length = Array(bytes[..<end]).withUnsafeBytes { CatalogRequest($0)?.length }
                if let length { #expect(length <= end) }
            }
        }
    }
}
