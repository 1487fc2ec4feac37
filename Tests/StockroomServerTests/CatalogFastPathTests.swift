import Foundation
import Hummingbird
import HummingbirdTesting
import StockroomCore
import StockroomTestSupport
import Testing
@testable import StockroomServer

#if canImport(Glibc)
    import Glibc
#endif

/// `GET /v1/catalog` on a live connection, answered on the event loop (`CatalogFastPath`), seen
/// from a raw socket: the same answer as the route, pipelining kept in order, the connection's
/// clocks, metrics and log kept as for any request, and every request it must not answer left
/// to the route.
@Suite struct CatalogFastPathTests {
    typealias RawConnection = LimitsConnectionTests.RawConnection

    struct Answer {
        let status: Int
        let fields: [(String, String)]
        let body: [UInt8]

        func field(_ name: String) -> String? {
            fields.first { $0.0.lowercased() == name.lowercased() }?.1
        }

        var text: String { String(decoding: body, as: UTF8.self) }
    }

    /// Reads `count` whole responses in order (each framed by its Content-Length; a HEAD's by
    /// none), or fewer if the server closes first.
    static func read(_ count: Int, from connection: RawConnection, bodiless: Set<Int> = []) async -> [Answer] {
        var bytes: [UInt8] = []
        var answers: [Answer] = []
        while answers.count < count {
            if let answer = parse(&bytes, bodiless: bodiless.contains(answers.count)) {
                answers.append(answer)
                continue
            }
            guard let more = await connection.receive() else { break }
            bytes += more
        }
        return answers
    }

    static func parse(_ bytes: inout [UInt8], bodiless: Bool) -> Answer? {
        let separator: [UInt8] = Array("\r\n\r\n".utf8)
        guard let end = bytes.indices.dropLast(3).first(where: { Array(bytes[$0..<($0 + 4)]) == separator }) else { return nil }
        let lines = String(decoding: bytes[..<end], as: UTF8.self).components(separatedBy: "\r\n")
        let status = Int(lines[0].split(separator: " ")[1]) ?? 0
        let fields = lines.dropFirst().map { line -> (String, String) in
            let colon = line.firstIndex(of: ":")!
            return (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }
        let length = bodiless ? 0 : (fields.first { $0.0.lowercased() == "content-length" }.flatMap { Int($0.1) } ?? 0)
        guard bytes.count >= end + 4 + length else { return nil }
        let body = Array(bytes[(end + 4)..<(end + 4 + length)])
        bytes.removeFirst(end + 4 + length)
        return Answer(status: status, fields: fields, body: body)
    }

    static func withServer(
        idle: Duration = .seconds(60), _ configure: (inout ServerFixture) -> Void = { _ in },
        _ body: @Sendable @escaping (ServerFixture, Int) async throws -> Void
    ) async throws {
        var fixture = try ServerFixture()
        fixture.configuration.idleTimeout = idle
        fixture.configuration.headerTimeout = .seconds(10)
        configure(&fixture)
        let configured = fixture
        try await fixture.application().test(.live) { client in
            try await body(configured, try #require(client.port))
        }
    }

    static let catalogue = "GET /v1/catalog HTTP/1.1\r\nHost: stockroom\r\n\r\n"

    /// The route's own answer, through the router (no connection, so no fast path).
    static func routeAnswer(_ fixture: ServerFixture) async throws -> (etag: String, body: [UInt8]) {
        try await fixture.application().test(.router) { client in
            let response = try await client.execute(uri: "/v1/catalog", method: .get)
            return (try #require(response.headers[.eTag]), Array(buffer: response.body))
        }
    }

    @Test func theAnswerIsTheRoutesWithEveryFieldTheMiddlewareAdds() async throws {
        try await Self.withServer { fixture, port in
            let route = try await Self.routeAnswer(fixture)
            let connection = try RawConnection(port: port)
            connection.send(Self.catalogue + Self.catalogue)
            let answers = await Self.read(2, from: connection)
            try #require(answers.count == 2)
            for answer in answers {
                #expect(answer.status == 200)
                #expect(answer.body == route.body)
                #expect(answer.field("ETag") == route.etag)
                #expect(answer.field("Cache-Control") == "public, no-cache")
                #expect(answer.field("Content-Type") == "application/json; charset=utf-8")
                #expect(answer.field("Content-Length") == String(route.body.count))
                #expect(answer.field("Server") == "Stockroom")
                let date = try #require(answer.field("Date").flatMap(HTTPDate.parse))
                #expect(abs(date.timeIntervalSinceNow) < 30)
                #expect((17...32).contains(answer.field("X-Request-Id")?.count ?? 0), "Hummingbird's form: hex, up to 32 digits")
            }
            #expect(answers[0].field("X-Request-Id") != answers[1].field("X-Request-Id"))
        }
    }

    @Test(arguments: ["SELF", "W/SELF", "\"x\", SELF", "\"x\",\tSELF ", "*"])
    func aMatchingIfNoneMatchGets304WithoutABody(ifNoneMatch: String) async throws {
        try await Self.withServer { fixture, port in
            let route = try await Self.routeAnswer(fixture)
            let connection = try RawConnection(port: port)
            let field = ifNoneMatch.replacingOccurrences(of: "SELF", with: route.etag)
            connection.send("GET /v1/catalog HTTP/1.1\r\nHost: stockroom\r\nIf-None-Match: \(field)\r\n\r\n" + Self.catalogue)
            let answers = await Self.read(2, from: connection)
            try #require(answers.count == 2)
            #expect(answers[0].status == 304)
            #expect(answers[0].body.isEmpty && answers[0].field("Content-Length") == nil)
            #expect(answers[0].field("ETag") == route.etag)
            #expect(answers[1].status == 200 && answers[1].body == route.body, "the next answer starts where the 304 ended")
        }
    }

    @Test(arguments: ["\"0123\"", "W/\"0123\"", "\"e41bba3b\"", ""])
    func aStaleIfNoneMatchGetsTheBody(ifNoneMatch: String) async throws {
        try await Self.withServer { fixture, port in
            let route = try await Self.routeAnswer(fixture)
            let connection = try RawConnection(port: port)
            connection.send("GET /v1/catalog HTTP/1.1\r\nHost: stockroom\r\nIf-None-Match: \(ifNoneMatch)\r\n\r\n")
            let answers = await Self.read(1, from: connection)
            #expect(answers.first?.status == 200 && answers.first?.body == route.body)
        }
    }

    /// Answers on one connection come back in the order asked, whichever path answers each.
    @Test func pipelinedRequestsAreAnsweredInOrder() async throws {
        try await Self.withServer { fixture, port in
            let route = try await Self.routeAnswer(fixture)
            let connection = try RawConnection(port: port)
            let refused = #"{"productId": "com.example.book"}"#
            connection.send(
                Self.catalogue
                    + "GET /healthz HTTP/1.1\r\nHost: stockroom\r\n\r\n"
                    + "GET /v1/catalog HTTP/1.1\r\nHost: stockroom\r\nIf-None-Match: \(route.etag)\r\n\r\n"
                        + """
                        POST /v1/downloads HTTP/1.1\r\nHost: stockroom\r\nContent-Type: application/json\r\nContent-Length: \
                        \(refused.utf8.count)\r\n\r\n\(refused)
                        """
                    + "GET /v1/catalog/com.example.book HTTP/1.1\r\nHost: stockroom\r\n\r\n"
                    + Self.catalogue)
            let answers = await Self.read(6, from: connection)
            try #require(answers.count == 6)
            #expect(answers.map(\.status) == [200, 200, 304, 400, 200, 200])
            #expect(answers[0].body == route.body && answers[5].body == route.body)
            #expect(answers[1].text.contains("\"status\":\"ok\""))
            #expect(answers[3].text.contains("bad_request"))
            #expect(answers[4].text.contains("com.example.book") && answers[4].body != route.body)
        }
    }

    /// A body, chunked or counted, is the request's body, never a request of its own: the route
    /// reads it, and the bytes inside are not answered.
    @Test(arguments: [
        "Content-Length: 45\r\n\r\nGET /v1/catalog HTTP/1.1\r\nHost: stockroom\r\n\r\n",
        "Transfer-Encoding: chunked\r\n\r\n2d\r\nGET /v1/catalog HTTP/1.1\r\nHost: stockroom\r\n\r\n\r\n0\r\n\r\n",
    ])
    func aCatalogueRequestWithABodyIsTheRoutesAndItsBodyIsNotARequest(framing: String) async throws {
        try await Self.withServer { fixture, port in
            let route = try await Self.routeAnswer(fixture)
            let connection = try RawConnection(port: port)
            connection.send("GET /v1/catalog HTTP/1.1\r\nHost: stockroom\r\n\(framing)GET /healthz HTTP/1.1\r\nHost: stockroom\r\n\r\n")
            // One more /healthz: had the request inside the body been answered, its catalogue
            // would come third.
            connection.send("GET /healthz HTTP/1.1\r\nHost: stockroom\r\n\r\n")
            let answers = await Self.read(3, from: connection)
            try #require(answers.count == 3, "\(answers.map(\.status))")
            #expect(answers[0].status == 200 && answers[0].body == route.body)
            #expect(answers[1].text.contains("\"status\":\"ok\""), "the request after the body is /healthz, not the one inside it")
            #expect(answers[2].text.contains("\"status\":\"ok\""), "nothing answered the request inside the body")
        }
    }

    @Test func connectionCloseIsAnsweredThenTheConnectionCloses() async throws {
        try await Self.withServer { fixture, port in
            let route = try await Self.routeAnswer(fixture)
            let connection = try RawConnection(port: port)
            connection.send("GET /v1/catalog HTTP/1.1\r\nHost: stockroom\r\nConnection: close\r\n\r\n" + Self.catalogue)
            let answers = await Self.read(2, from: connection)
            #expect(answers.count == 1 && answers.first?.body == route.body)
            #expect(await connection.timeUntilClosed() < .seconds(10))
        }
    }

    @Test func headAndAQueryGetTheRoutesAnswer() async throws {
        try await Self.withServer { fixture, port in
            let route = try await Self.routeAnswer(fixture)
            let connection = try RawConnection(port: port)
            connection.send(
                "HEAD /v1/catalog HTTP/1.1\r\nHost: stockroom\r\n\r\n" + "GET /v1/catalog?since=1 HTTP/1.1\r\nHost: stockroom\r\n\r\n")
            let answers = await Self.read(2, from: connection, bodiless: [0])
            try #require(answers.count == 2)
            #expect(answers[0].status == 200 && answers[0].field("ETag") == route.etag && answers[0].body.isEmpty)
            #expect(answers[1].status == 200 && answers[1].body == route.body)
        }
    }

    /// The fast path answers with the catalogue being served: a reload shows at the next request.
    @Test func aReloadedCatalogueIsAnsweredAtTheNextRequest() async throws {
        try await Self.withServer { fixture, port in
            let before = try await Self.routeAnswer(fixture)
            let connection = try RawConnection(port: port)
            connection.send(Self.catalogue)
            #expect(await Self.read(1, from: connection).first?.field("ETag") == before.etag)
            try fixture.root.write(
                "catalog/products.json",
                ServerFixture.catalog([ServerFixture.entry("com.example.book", file: "books/book.epub", title: "Renamed")]))
            var etag = before.etag
            var body: [UInt8] = []
            for _ in 0..<200 where etag == before.etag {
                try await Task.sleep(for: .milliseconds(50))
                connection.send(Self.catalogue)
                let answer = await Self.read(1, from: connection).first
                etag = answer?.field("ETag") ?? etag
                body = answer?.body ?? body
            }
            #expect(etag != before.etag)
            #expect(String(decoding: body, as: UTF8.self).contains("Renamed"))
        }
    }

    /// A head left unfinished behind an answered request still has the header deadline: the
    /// bytes handed to the decoder start it, so a trickle cannot hold the connection until the
    /// idle timeout.
    @Test func aHeadTrickledBehindAnAnsweredRequestMeetsTheHeaderDeadline() async throws {
        try await Self.withServer(idle: .seconds(60), { $0.configuration.headerTimeout = .seconds(1) }) { fixture, port in
            let route = try await Self.routeAnswer(fixture)
            let connection = try RawConnection(port: port)
            connection.send(Self.catalogue + "GET /healthz HTTP/1.1\r\nHo")
            #expect(await Self.read(1, from: connection).first?.body == route.body)
            let waited = await connection.timeUntilClosed()
            #expect(waited < .seconds(15), "closed \(waited) after the answer, by the header deadline, not the idle timeout")
        }
    }

    /// The idle timeout counts these requests as any other: a connection that asks for nothing
    /// but the catalogue, often, stays open; once it stops asking, it is closed.
    @Test func aConnectionAskingOnlyForTheCatalogueIsNotIdle() async throws {
        try await Self.withServer(idle: .seconds(3)) { _, port in
            let connection = try RawConnection(port: port)
            // The client on a thread of its own: the suite's tasks once stalled for seconds, and a
            // client that stalls longer than the idle timeout is idle.
            let (answered, elapsed, silence) = await Self.onThread { () -> (Int, Duration, Duration) in
                let start = ContinuousClock.now
                var answered = 0
                var last = start
                while ContinuousClock.now - start < .seconds(7) {
                    connection.send(Self.catalogue)
                    guard Self.answerNow(connection)?.status == 200 else { break }
                    answered += 1
                    last = .now
                    usleep(500_000)
                }
                let elapsed = ContinuousClock.now - start
                while Self.waitForBytes(connection) {}
                return (answered, elapsed, ContinuousClock.now - last)
            }
            #expect(elapsed >= .seconds(7), "closed after \(answered) answers, \(elapsed) in")
            #expect(silence >= .milliseconds(2_500) && silence < .seconds(20), "closed \(silence) after the last answer")
        }
    }

    /// Runs `body` on a thread of its own (blocking socket calls), not on the suite's tasks.
    static func onThread<Value: Sendable>(_ body: @escaping @Sendable () -> Value) async -> Value {
        await withCheckedContinuation { continuation in
            Thread { continuation.resume(returning: body()) }.start()
        }
    }

    /// Whether bytes came (read and dropped) before the connection closed or 20 s passed; blocking.
    static func waitForBytes(_ connection: RawConnection) -> Bool {
        var descriptor = pollfd(fd: connection.descriptor, events: Int16(POLLIN), revents: 0)
        guard poll(&descriptor, 1, 20_000) > 0 else { return false }
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        return buffer.withUnsafeMutableBytes { recv(connection.descriptor, $0.baseAddress, $0.count, 0) } > 0
    }

    /// The next whole answer, read blocking (20 s at most); nil once the connection closed.
    static func answerNow(_ connection: RawConnection) -> Answer? {
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            var descriptor = pollfd(fd: connection.descriptor, events: Int16(POLLIN), revents: 0)
            guard poll(&descriptor, 1, 20_000) > 0 else { return nil }
            let count = buffer.withUnsafeMutableBytes { recv(connection.descriptor, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { return nil }
            bytes += buffer.prefix(count)
            if let answer = parse(&bytes, bodiless: false) { return answer }
        }
    }

    /// `stockroom serve` (its own metrics system and log): the answers are counted under the
    /// route's own labels, as the middleware counts the route, and each has its log line under
    /// the request ID it answered with.
    @Test func theServerCountsAndLogsTheAnswersAsTheRoutes() async throws {
        let folder = try TemporaryFolder()
        try folder.write("content/books/book.epub", ServerFixture.book)
        try folder.write(
            "catalog/products.json",
            ServerFixture.catalog([ServerFixture.entry("com.example.stockroom.demo.book", file: "books/book.epub")]))
        let port = try StockroomProcess.freePort()
        let server = try StockroomProcess.serve(
            try StockroomProcess.binary(), folder: folder.path, port: port,
            arguments: [
                "--upstream", "simulator", "--catalog", folder.path + "/catalog", "--content", folder.path + "/content",
                "--database", folder.path + "/ledger.sqlite", "--bundle-id", "com.example.stockroom.demo", "--log-level", "info",
            ],
            environment: ["STOCKROOM_TOKEN_SECRET": ServerFixture.tokenSecret])
        defer { server.stop() }
        try await server.waitUntilHealthy()
        let connection = try RawConnection(port: port)
        func count(_ status: Int) async -> Int {
            connection.send("GET /metrics HTTP/1.1\r\nHost: stockroom\r\n\r\n")
            let text = await Self.read(1, from: connection).first?.text ?? ""
            let line = text.split(separator: "\n").first {
                $0.hasPrefix("hb_requests{") && $0.contains("http_route=\"/v1/catalog\"") && $0.contains("http_request_method=\"GET\"")
                    && $0.contains("http_response_status_code=\"\(status)\"")
            }
            return line.flatMap { Int($0.split(separator: " ").last ?? "") } ?? 0
        }
        let (full, notModified) = (await count(200), await count(304))
        connection.send(Self.catalogue)
        let first = try #require(await Self.read(1, from: connection).first)
        let etag = try #require(first.field("ETag"))
        connection.send(Self.catalogue + "GET /v1/catalog HTTP/1.1\r\nHost: stockroom\r\nIf-None-Match: \(etag)\r\n\r\n")
        let answers = await Self.read(2, from: connection)
        #expect(answers.map(\.status) == [200, 304])
        #expect(await count(200) == full + 2)
        #expect(await count(304) == notModified + 1)
        let id = try #require(answers.last?.field("X-Request-Id"))
        let line = server.logText.split(separator: "\n").first { $0.contains("hb.request.id=\(id)") }
        #expect(line?.contains("path=/v1/catalog") == true && line?.contains("status=304") == true && line?.hasSuffix(" request") == true)
    }
}
