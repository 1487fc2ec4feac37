import Foundation
import StockroomTestSupport
import Testing

@testable import StockroomKit

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// What the transport does with servers that misbehave, on both engines: libcurl (Linux's) and
/// URLSession (the Apple platforms' path, run here on Linux).
@Suite struct TransportTests {
    static let engines: [HTTPTransport.Engine] = [.automatic, .urlSession]

    static func transport(_ engine: HTTPTransport.Engine, timeout: TimeInterval = 30, minimumBytesPerSecond: Int64 = 1024) -> HTTPTransport
    {
        HTTPTransport(settings: TransportSettings(timeout: timeout, minimumBytesPerSecond: minimumBytesPerSecond), engine: engine)
    }

    #if os(Linux)
        @Test func libcurlCarriesTheTransfersOnLinuxUnlessURLSessionIsAskedFor() {
            #expect(Self.transport(.automatic).usesLibCurl)
            #expect(!Self.transport(.urlSession).usesLibCurl)
        }
    #endif

    @Test(arguments: engines) func aServerThatNeverAnswersTimesOut(_ engine: HTTPTransport.Engine) async throws {
        let server = try ScriptedHTTPServer { _ in [.pause(40)] }
        defer { server.stop() }
        let transport = Self.transport(engine, timeout: 1)
        defer { transport.invalidate() }
        let started = Date()
        let result = await transport.collect(URLRequest(url: server.url.appendingPathComponent("silent")))
        #expect(result.response == nil)
        #expect((result.error as? URLError)?.code == .timedOut, "\(String(describing: result.error))")
        // 1 s; the margin is for a loaded machine's stalls (10 s seen), far short of the 40 s silence.
        #expect(Date().timeIntervalSince(started) < 25)
    }

    @Test(arguments: engines) func aBodyThatStallsEndsWithTheBytesSoFarInTheFile(_ engine: HTTPTransport.Engine) async throws {
        let server = try ScriptedHTTPServer { _ in
            [.send("HTTP/1.1 200 OK\r\nContent-Length: 1048576\r\n\r\n"), .bytes(100_000), .awaitClose]
        }
        defer { server.stop() }
        let folder = try TemporaryFolder()
        let transport = Self.transport(engine, timeout: 2)
        defer { transport.invalidate() }
        let file = try BodyFile(path: folder.path + "/body.part", keeping: 0) { _ in }
        let result = await transport.send(URLRequest(url: server.url)) { _ in .file(file) }
        // 2 s after the last byte, as the server saw it; libcurl's own low-speed limit, averaged
        // over its last 5 s, took 7 s.
        let delay = try #require(server.clientCloseDelays.first)
        #expect(delay > 1.5 && delay < 5, "the timeout counts from the last byte: closed \(delay) s after it")
        #expect(result.response?.statusCode == 200)
        #expect(!result.complete)
        #expect(result.error != nil)
        #expect(file.length == 100_000)
        let size = try FileManager.default.attributesOfItem(atPath: folder.path + "/body.part")[.size] as? NSNumber
        #expect(size?.intValue == 100_000, "every byte received is on disk")
    }

    @Test(arguments: engines) func aBodyOverTheLimitIsRefused(_ engine: HTTPTransport.Engine) async throws {
        let server = try ScriptedHTTPServer { _ in [.send("HTTP/1.1 500 Oops\r\nContent-Length: 4096\r\n\r\n"), .bytes(4096)] }
        defer { server.stop() }
        let transport = Self.transport(engine)
        defer { transport.invalidate() }
        let result = await transport.collect(URLRequest(url: server.url), limit: 1024)
        #expect((result.error as? URLError)?.code == .dataLengthExceedsMaximum, "\(String(describing: result.error))")
        #expect(result.body.count <= 1024)
    }

    @Test(arguments: engines) func theRequestArrivesWholeAndTheAnswerIsReadWhole(_ engine: HTTPTransport.Engine) async throws {
        let server = try ScriptedHTTPServer { request in
            let body = "\(request.line)|\(request.header("X-Probe") ?? "-")|\(request.header("Expect") ?? "-")|\(request.body.count)"
            return [.send("HTTP/1.1 201 Created\r\nContent-Length: \(body.utf8.count)\r\nETag: \"a\"\r\nVary: X\r\nVary: Y\r\n\r\n\(body)")]
        }
        defer { server.stop() }
        let transport = Self.transport(engine)
        defer { transport.invalidate() }
        var request = URLRequest(url: server.url.appendingPathComponent("v1/downloads"))
        request.httpMethod = "POST"
        request.setValue("yes", forHTTPHeaderField: "X-Probe")
        request.httpBody = Data(repeating: 0x7B, count: 300_000)  // a large receipt: no 100-continue wait
        let result = await transport.collect(request)
        #expect(result.complete)
        #expect(result.response?.statusCode == 201)
        #expect(result.response?.value(forHTTPHeaderField: "etag") == "\"a\"")
        #expect(result.response?.value(forHTTPHeaderField: "Vary") == "X, Y")
        #expect(String(decoding: result.body, as: UTF8.self) == "POST /v1/downloads HTTP/1.1|yes|-|300000")
    }

    @Test(arguments: engines) func aRedirectIsTheAnswerAndIsNeverFollowed(_ engine: HTTPTransport.Engine) async throws {
        let elsewhere = try ScriptedHTTPServer { _ in [.send("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")] }
        defer { elsewhere.stop() }
        let server = try ScriptedHTTPServer { request in
            let target = request.line.contains("/same") ? "/new" : "\(elsewhere.url.absoluteString)/new"
            return [.send("HTTP/1.1 307 Temporary Redirect\r\nLocation: \(target)\r\nContent-Length: 5\r\n\r\nmoved")]
        }
        defer { server.stop() }
        let transport = Self.transport(engine)
        defer { transport.invalidate() }
        for path in ["same", "other"] {
            var request = URLRequest(url: server.url.appendingPathComponent(path))
            request.httpMethod = "POST"
            request.setValue("Bearer secret", forHTTPHeaderField: "Authorization")
            request.httpBody = Data("proof".utf8)
            let result = await transport.collect(request)
            #expect(result.response?.statusCode == 307)
            #expect(String(decoding: result.body, as: UTF8.self) == "moved")
        }
        #expect(server.requests.map(\.line) == ["POST /same HTTP/1.1", "POST /other HTTP/1.1"])
        #expect(elsewhere.requests.isEmpty, "nothing reached the other host")
    }

    @Test(arguments: engines) func aBodyTrickledByteByByteEndsAtTheMinimumRate(_ engine: HTTPTransport.Engine) async throws {
        let server = try ScriptedHTTPServer { _ in
            [.send("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n")]
                + Array(repeating: [.bytes(1), .pause(0.5)], count: 200).flatMap { $0 }
        }
        defer { server.stop() }
        let transport = Self.transport(engine, timeout: 1)
        defer { transport.invalidate() }
        let started = Date()
        let result = await transport.collect(URLRequest(url: server.url))
        #expect((result.error as? URLError)?.code == .timedOut, "\(String(describing: result.error))")
        #expect(!result.complete)
        // A byte each half second never stalls for the 1 s timeout; the 1 KiB/s floor ends it after
        // one window. The margin is for a loaded machine, far short of the 100 s the body would take.
        #expect(Date().timeIntervalSince(started) < 15)
    }

    @Test(arguments: engines) func aHeadTrickledLineByLineEndsAtTheTimeout(_ engine: HTTPTransport.Engine) async throws {
        let server = try ScriptedHTTPServer { _ in
            [.send("HTTP/1.1 200 OK\r\n")] + Array(repeating: [.send("X-Slow: 1\r\n"), .pause(0.5)], count: 200).flatMap { $0 }
        }
        defer { server.stop() }
        let transport = Self.transport(engine, timeout: 1)
        defer { transport.invalidate() }
        let started = Date()
        let result = await transport.collect(URLRequest(url: server.url))
        #expect(result.error != nil)
        #expect(!result.complete)
        #expect(Date().timeIntervalSince(started) < 15, "not the 100 s the head would take")
    }

    #if os(Linux)
        /// libcurl hands every field over; past `ResponseHead.maximumFields` the answer is refused.
        @Test func aHeadOfTooManyFieldsIsRefusedOnLibcurl() async throws {
            let fields = (0...ResponseHead.maximumFields).map { "X-Field-\($0): value\r\n" }.joined()
            let server = try ScriptedHTTPServer { _ in [.send("HTTP/1.1 200 OK\r\n\(fields)Content-Length: 2\r\n\r\nok")] }
            defer { server.stop() }
            let transport = Self.transport(.automatic)
            defer { transport.invalidate() }
            let result = await transport.collect(URLRequest(url: server.url))
            #expect(result.response == nil)
            #expect((result.error as? URLError)?.code == .badServerResponse, "\(String(describing: result.error))")
        }
    #endif

    @Test(arguments: engines) func cancellingTheTaskStopsTheTransferAtOnce(_ engine: HTTPTransport.Engine) async throws {
        let server = try ScriptedHTTPServer { _ in
            [.send("HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n")]
                + Array(repeating: [.bytes(1000), .pause(0.1)], count: 300).flatMap { $0 }
        }
        defer { server.stop() }
        let transport = Self.transport(engine)
        defer { transport.invalidate() }
        let started = Date()
        let transfer = Task { await transport.collect(URLRequest(url: server.url)) }
        try await Task.sleep(for: .milliseconds(300))
        transfer.cancel()
        let result = await transfer.value
        #expect((result.error as? URLError)?.code == .cancelled, "\(String(describing: result.error))")
        #expect(Date().timeIntervalSince(started) < 15, "not the 30 s the body would take")
    }
}

extension HTTPTransport.Engine: CustomTestStringConvertible {
    public var testDescription: String { self == .automatic ? "libcurl on Linux" : "URLSession" }
}

/// Answers nested past Foundation's limit (it traps on them) are refused before they are parsed:
/// a hostile or broken server cannot stop the app.
@Suite struct HostileAnswerTests {
    /// Exactly 513 unclosed brackets make Foundation 6.3's `JSONDecoder` trap (512 and 514 do not).
    static let deep = String(repeating: "[", count: 513)

    @Test func aCatalogueNestedTooDeepIsNoCatalogue() async throws {
        let server = try ScriptedHTTPServer { _ in
            [.send("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: \(Self.deep.utf8.count)\r\n\r\n\(Self.deep)")]
        }
        defer { server.stop() }
        let folder = try TemporaryFolder()
        let client = CatalogClient(server: server.url, cacheFolder: URL(fileURLWithPath: folder.path))
        await #expect(throws: CatalogClient.Failure.unavailable("HTTP 200")) { try await client.catalog() }
    }

    @Test func aRefusalNestedTooDeepIsRefusedWithoutItsCodeAndNothingIsWritten() async throws {
        let body = Self.deep
        let server = try ScriptedHTTPServer { _ in
            [.send("HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)")]
        }
        defer { server.stop() }
        let folder = try TemporaryFolder()
        let delivery = try Delivery(
            configuration: Delivery.Configuration(
                server: server.url, journalFolder: URL(fileURLWithPath: folder.path + "/journal"),
                folder: URL(fileURLWithPath: folder.path + "/files")))
        let outcome = await delivery.deliver(Purchase(productID: "p", transactionID: "1", proof: .appReceipt(Data([1, 2, 3]))))
        #expect(outcome.transactionAction != .finish, "\(outcome)")
        #expect(server.requests.map(\.line) == ["POST /v1/downloads HTTP/1.1"])
        #expect(!FileManager.default.fileExists(atPath: folder.path + "/files/p"))
    }
}
