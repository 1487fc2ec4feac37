import Foundation
import StockroomTestSupport
import Testing

@testable import StockroomKit

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A Stockroom that redirects content, and an object store, that lie: scripted servers driving
/// `Delivery`. The app follows only a 303 to the claim and a 307 to the content, only to an
/// absolute `http(s)` URL, never from `https` to `http`; it sends the store nothing of its own,
/// holds the store's body to what Stockroom said of it, and acknowledges to Stockroom alone.
@Suite struct RedirectHostileTests {
    typealias Step = ScriptedHTTPServer.Step
    static let transaction = HostileServerTests.transaction
    static let product = HostileServerTests.product
    static let body = HostileServerTests.body
    static let contentPath = "/v1/downloads/\(transaction)/content"

    /// Stockroom's 303 (or 307) to `location`, with every header it gives; `headers` replace
    /// some, or drop them ("").
    static func redirect(_ status: String = "303 See Other", to location: String, headers: [String: String] = [:]) -> [Step] {
        var fields = [
            "Location": location, "Content-Location": contentPath, "X-Download-Token": "token-1", "X-Transaction-Id": transaction,
            "ETag": "\"v1\"",
            "Repr-Digest": "sha-256=:\(HostileServerTests.digest):", "X-Content-Size": "\(body.count)", "Cache-Control": "no-store",
            "Content-Length": "0",
            "Set-Cookie": "session=stockroom-cookie; Path=/",
        ]
        for (name, value) in headers { fields[name] = value.isEmpty ? nil : value }
        return [.send("HTTP/1.1 \(status)\r\n" + fields.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)\r\n" }.joined() + "\r\n")]
    }

    /// The store's answer: the body under its own length and ETag (an MD5, never Stockroom's).
    static func object(_ status: String = "200 OK", body: [UInt8] = body, headers: [String: String] = [:], cut: Int? = nil) -> [Step] {
        var fields = ["Content-Length": "\(body.count)", "ETag": "\"0123456789abcdef0123456789abcdef\"", "Accept-Ranges": "bytes"]
        for (name, value) in headers { fields[name] = value.isEmpty ? nil : value }
        let head = "HTTP/1.1 \(status)\r\n" + fields.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)\r\n" }.joined() + "\r\n"
        return [.send(head), .raw(cut.map { Array(body.prefix($0)) } ?? body)] + (cut == nil ? [] : [.close])
    }

    /// A presigned URL on `store`.
    static func presigned(_ store: ScriptedHTTPServer) -> String {
        "\(store.url.absoluteString)/bucket/content/book.epub?X-Amz-Expires=60&X-Amz-Signature=0123abcd"
    }

    /// Stockroom: the claim answered 303 and the content 307 to `location` (by default a presigned
    /// URL on `store`), the acknowledgement taken; `claim` and `content` replace those answers.
    static func stockroom(
        to store: ScriptedHTTPServer, location: String? = nil, claim: (@Sendable () -> [Step])? = nil,
        content: (@Sendable () -> [Step])? = nil,
        acknowledgement: [Step] = HostileServerTests.acknowledged
    ) throws -> ScriptedHTTPServer {
        let location = location ?? presigned(store)
        return try ScriptedHTTPServer { request in
            if request.line.hasPrefix("POST /v1/downloads ") { return claim?() ?? redirect(to: location) }
            if request.line.hasPrefix("GET \(contentPath) ") { return content?() ?? redirect("307 Temporary Redirect", to: location) }
            if request.line.contains("/ack ") { return acknowledgement }
            return HostileServerTests.answer("404 Not Found", #"{"error": {"code": "not_found", "message": "no"}}"#)
        }
    }

    /// What reached the store that is the app's: a header of its, a cookie, the proof, a body.
    static func leaks(_ store: ScriptedHTTPServer) -> [String] {
        store.requests.flatMap { request -> [String] in
            var leaks = ["Authorization", "Cookie", "X-Download-Token", "If-Range"].filter { request.header($0) != nil }
            if !request.line.hasPrefix("GET ") { leaks.append(request.line) }
            if !request.body.isEmpty || request.head.joined().contains(HostileServerTests.proof) { leaks.append("the proof or a body") }
            return leaks
        }
    }

    static func lines(_ server: ScriptedHTTPServer) -> [String] {
        server.requests.map { String($0.line.split(separator: " ").prefix(2).joined(separator: " ").prefix { $0 != "?" }) }
    }

    static var partial: String { ".\(product).\(transaction).partial" }

    // MARK: Followed with nothing of the app's

    @Test(arguments: TransportTests.engines)
    func theStoreGetsAPlainGETAndTheAcknowledgementGoesToStockroom(_ engine: HTTPTransport.Engine) async throws {
        let scene = try HostileServerTests.Scene()
        let store = try ScriptedHTTPServer { _ in Self.object() }
        let stockroom = try Self.stockroom(to: store)
        defer { store.stop(); stockroom.stop() }
        let outcome = try await scene.delivery(stockroom) { $0.transportEngine = engine }.deliver(HostileServerTests.purchase())
        #expect(outcome == .delivered(file: URL(fileURLWithPath: scene.files + "/" + Self.product)))
        #expect(FileManager.default.contents(atPath: scene.files + "/" + Self.product) == Data(Self.body))
        #expect(Self.lines(store) == ["GET /bucket/content/book.epub"])
        #expect(Self.leaks(store) == [])
        #expect(Self.lines(stockroom) == ["POST /v1/downloads", "POST /v1/downloads/\(Self.transaction)/ack"])
        #expect(stockroom.requests.last?.header("Authorization") == "Bearer token-1", "acknowledged with the token, to Stockroom")
    }

    // MARK: Only an absolute http(s) URL, never https to http

    @Test(arguments: [
        "user info", "user info before the port", "scheme-relative", "relative", "a path on the server", "ftp", "file", "javascript",
        "backslash", "space",
        "none",
    ])
    func aRedirectToALocationTheClientMayNotFetchIsRefused(_ form: String) async throws {
        let scene = try HostileServerTests.Scene()
        let store = try ScriptedHTTPServer { _ in Self.object() }
        let authority = "127.0.0.1:\(store.port)"
        let location =
            switch form {
            case "user info": "http://user:secret@\(authority)/bucket/key"
            case "user info before the port": "http://\(authority)@127.0.0.1/bucket/key"
            case "scheme-relative": "//\(authority)/bucket/key"
            case "relative": "bucket/key"
            case "a path on the server": "/bucket/key"
            case "ftp": "ftp://\(authority)/bucket/key"
            case "file": "file:///etc/passwd"
            case "javascript": "javascript:alert(1)"
            case "backslash": "http://\(authority)\\@127.0.0.1/bucket/key"
            case "space": "http://\(authority)/bucket key"
            default: ""
            }
        let stockroom = try Self.stockroom(to: store, location: location)
        defer { store.stop(); stockroom.stop() }
        let outcome = try await scene.delivery(stockroom).deliver(HostileServerTests.purchase())
        #expect(outcome.code == "bad_answer", "\(outcome)")
        #expect(outcome.transactionAction == .keepUnfinishedAndRetry)
        #expect(store.requests.isEmpty && scene.elsewhere.requests.isEmpty)
        #expect(Self.lines(stockroom) == ["POST /v1/downloads"], "never acknowledged")
        #expect(scene.untouched())
    }

    /// Decided in `BodyRules.redirect` and `ServerOrigin.storeURL`, compiled and run here (a TLS
    /// Stockroom on Linux is `.ci/client-hostile.py`'s 14j).
    @Test func anHTTPSServersRedirectToHTTPIsRefusedAndToHTTPSFollowed() throws {
        let folder = try TemporaryFolder()
        let rules = BodyRules(
            journal: try Journal(folder: URL(fileURLWithPath: folder.path + "/journal")), progress: ProgressBroadcast(),
            origin: try #require(ServerOrigin(URL(string: "https://content.example.com")!)), catalogueSize: nil)
        func answer(_ location: String, status: Int = 303) -> HTTPURLResponse {
            HTTPURLResponse(
                url: URL(string: "https://content.example.com/v1/downloads")!, statusCode: status, httpVersion: "HTTP/1.1",
                headerFields: [
                    "Location": location, "Content-Location": Self.contentPath, "X-Download-Token": "t", "X-Content-Size": "20000",
                    "Repr-Digest": "sha-256=:\(HostileServerTests.digest):",
                ])!
        }
        #expect(throws: AnswerRefusal.foreignRedirect) {
            try rules.redirect(answer("http://store.example.com/bucket/key?X-Amz-Signature=a"))
        }
        #expect(throws: AnswerRefusal.foreignRedirect) { try rules.redirect(answer("HTTP://store.example.com/bucket/key")) }
        let followed = try rules.redirect(answer("https://store.example.com/bucket/key?X-Amz-Signature=a"))
        #expect(followed.url.absoluteString == "https://store.example.com/bucket/key?X-Amz-Signature=a")
        #expect(followed.shownURL == "https://store.example.com/bucket/key", "events never show the signature")
        #expect(followed.grant.location == Self.contentPath && followed.grant.token == "t")
        #expect(throws: AnswerRefusal.foreignLocation) {
            try rules.redirect(answer("https://store.example.com/k").withField("Content-Location", "https://store.example.com/elsewhere"))
        }
    }

    // MARK: Only a 303 to the claim and a 307 to the content lead to the store

    @Test(arguments: [
        "307 to the claim", "302 to the claim", "303 to the content", "307 to the acknowledgement", "303 to the acknowledgement",
    ])
    func noOtherRedirectIsFollowed(_ form: String) async throws {
        let scene = try HostileServerTests.Scene()
        let store = try ScriptedHTTPServer { _ in Self.object() }
        let location = Self.presigned(store)
        let stockroom: ScriptedHTTPServer
        switch form {
        case "307 to the claim": stockroom = try Self.stockroom(to: store, claim: { Self.redirect("307 Temporary Redirect", to: location) })
        case "302 to the claim": stockroom = try Self.stockroom(to: store, claim: { Self.redirect("302 Found", to: location) })
        case "303 to the content":
            stockroom = try Self.stockroom(
                to: store, claim: { HostileServerTests.download(headers: ["Location": Self.contentPath], cut: 5_000) },
                content: { Self.redirect("303 See Other", to: location) })
        default:
            let status = form.hasPrefix("307") ? "307 Temporary Redirect" : "303 See Other"
            stockroom = try Self.stockroom(to: store, acknowledgement: Self.redirect(status, to: location))
        }
        defer { store.stop(); stockroom.stop() }
        let outcome = try await scene.delivery(stockroom).deliver(HostileServerTests.purchase())
        #expect(outcome.code == "redirected", "\(outcome)")
        #expect(outcome.transactionAction == .keepUnfinishedAndRetry)
        let fetched = form.hasSuffix("acknowledgement") ? ["GET /bucket/content/book.epub"] : []
        #expect(Self.lines(store) == fetched, "only the 303 to the claim was followed")
        #expect(Self.leaks(store) == [])
    }

    @Test(arguments: ["301 Moved Permanently", "302 Found", "303 See Other", "307 Temporary Redirect", "308 Permanent Redirect"])
    func aStoreThatRedirectsIsNotFollowed(_ status: String) async throws {
        let scene = try HostileServerTests.Scene()
        let target = scene.elsewhere.url.absoluteString + "/bucket/content/book.epub"
        let store = try ScriptedHTTPServer { _ in [.send("HTTP/1.1 \(status)\r\nLocation: \(target)\r\nContent-Length: 0\r\n\r\n")] }
        let stockroom = try Self.stockroom(to: store)
        defer { store.stop(); stockroom.stop() }
        let outcome = try await scene.delivery(stockroom).deliver(HostileServerTests.purchase())
        #expect(outcome.code == "redirected", "\(outcome)")
        #expect(outcome.transactionAction == .keepUnfinishedAndRetry)
        #expect(scene.elsewhere.requests.isEmpty)
        #expect(store.requests.count == 1)
        #expect(!Self.lines(stockroom).contains { $0.hasSuffix("/ack") })
    }

    // MARK: The store's body is held to Stockroom's word

    @Test(arguments: [
        "longer than the catalogue", "Stockroom's size beyond the catalogue", "shorter than Stockroom said", "no length", "no digest",
        "no size",
    ])
    func aStoreBodyThatBreaksTheRulesIsNeverWritten(_ form: String) async throws {
        let scene = try HostileServerTests.Scene()
        let store = try ScriptedHTTPServer { _ in
            switch form {
            case "longer than the catalogue": Self.object(body: Self.body + Array(repeating: 0x61, count: 10_000))
            case "shorter than Stockroom said": Self.object(body: Array(Self.body.dropLast()))
            case "no length":
                [.send("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4e20\r\n"), .raw(Self.body), .send("\r\n0\r\n\r\n")]
            default: Self.object()
            }
        }
        let headers: [String: String] =
            switch form {
            case "Stockroom's size beyond the catalogue": ["X-Content-Size": "\(Self.body.count + 1)"]
            case "no digest": ["Repr-Digest": ""]
            case "no size": ["X-Content-Size": ""]
            default: [:]
            }
        let location = Self.presigned(store)
        let stockroom = try Self.stockroom(to: store, claim: { Self.redirect(to: location, headers: headers) })
        defer { store.stop(); stockroom.stop() }
        let delivery = try scene.delivery(stockroom) {
            $0.catalog = Catalog(products: [Catalog.Product(productID: Self.product, size: Int64(Self.body.count))])
        }
        let outcome = await delivery.deliver(HostileServerTests.purchase())
        #expect(outcome.code == "bad_answer", "\(outcome)")
        #expect(LocalFile.regularFileSize(scene.files + "/" + Self.partial) ?? 0 == 0, "not a byte written")
        #expect(FileManager.default.contents(atPath: scene.files + "/" + Self.product) == nil)
        let storeAsked = !["Stockroom's size beyond the catalogue", "no digest", "no size"].contains(form)
        #expect(store.requests.count == (storeAsked ? 1 : 0), "a redirect that breaks the rules is not followed")
        #expect(Self.lines(stockroom) == ["POST /v1/downloads"], "never acknowledged")
    }

    @Test func aStoreBodyWhoseDigestDoesNotMatchIsNeverAcknowledged() async throws {
        let scene = try HostileServerTests.Scene()
        var other = Self.body
        other[100] ^= 0xFF
        let store = try ScriptedHTTPServer { [other] _ in Self.object(body: other) }
        let stockroom = try Self.stockroom(to: store)
        defer { store.stop(); stockroom.stop() }
        let outcome = try await scene.delivery(stockroom).deliver(HostileServerTests.purchase())
        #expect(outcome.code == "digest_mismatch", "\(outcome)")
        #expect(outcome.transactionAction == .keepUnfinishedAndRetry)
        #expect(store.requests.count == 3, "downloaded three times, then left for later")
        #expect(
            Self.lines(stockroom) == ["POST /v1/downloads", "GET \(Self.contentPath)", "GET \(Self.contentPath)"], "never acknowledged")
        #expect(FileManager.default.contents(atPath: scene.files + "/" + Self.product) == nil)
        #expect(LocalFile.regularFileSize(scene.files + "/" + Self.partial) == nil)
    }

    @Test(arguments: ["bytes 0-19999/20000", "bytes 5000-19999/30000", "bytes 5000-9999/20000", ""])
    func aRangeFromTheStoreThatDoesNotContinueTheFileIsRefused(_ contentRange: String) async throws {
        let scene = try HostileServerTests.Scene()
        let store = try ScriptedHTTPServer { request in
            guard request.header("Range") != nil else { return Self.object(cut: 5_000) }
            return Self.object("206 Partial Content", body: Array(Self.body.dropFirst(5_000)), headers: ["Content-Range": contentRange])
        }
        let stockroom = try Self.stockroom(to: store)
        defer { store.stop(); stockroom.stop() }
        let outcome = try await scene.delivery(stockroom).deliver(HostileServerTests.purchase())
        #expect(outcome.code == "bad_answer", "\(outcome)")
        #expect(store.requests.map { $0.header("Range") } == [nil, "bytes=5000-"])
        #expect(!Self.lines(stockroom).contains { $0.hasSuffix("/ack") })
        #expect(FileManager.default.contents(atPath: scene.files + "/" + Self.product) == nil)
    }

    @Test func aRangeFromTheStoreThatContinuesTheFileCompletesIt() async throws {
        let scene = try HostileServerTests.Scene()
        let store = try ScriptedHTTPServer { request in
            guard request.header("Range") != nil else { return Self.object(cut: 5_000) }
            return Self.object(
                "206 Partial Content", body: Array(Self.body.dropFirst(5_000)), headers: ["Content-Range": "bytes 5000-19999/20000"])
        }
        let stockroom = try Self.stockroom(to: store)
        defer { store.stop(); stockroom.stop() }
        let outcome = try await scene.delivery(stockroom).deliver(HostileServerTests.purchase())
        #expect(outcome.code == "delivered", "\(outcome)")
        #expect(FileManager.default.contents(atPath: scene.files + "/" + Self.product) == Data(Self.body))
        #expect(Self.lines(stockroom) == ["POST /v1/downloads", "GET \(Self.contentPath)", "POST /v1/downloads/\(Self.transaction)/ack"])
        #expect(stockroom.requests[1].header("If-Range") == "\"v1\"", "Stockroom's ETag goes to Stockroom")
        #expect(Self.leaks(store) == [], "and never to the store")
    }

    @Test func aRedirectToAnotherRepresentationStartsOverFromTheFirstByte() async throws {
        let scene = try HostileServerTests.Scene()
        let replaced = sampleBytes(count: 12_000, seed: 9)
        var hasher = SHA256Digest()
        hasher.update(Data(replaced))
        let digest = Data(hasher.finalize()).base64EncodedString()
        let store = try ScriptedHTTPServer { request in
            request.line.contains("replaced") ? Self.object(body: replaced) : Self.object(cut: 5_000)
        }
        let replacedURL = Self.presigned(store).replacingOccurrences(of: "book.epub", with: "replaced.epub")
        let stockroom = try Self.stockroom(
            to: store,
            content: {
                Self.redirect(
                    "307 Temporary Redirect", to: replacedURL,
                    headers: ["ETag": "\"v2\"", "Repr-Digest": "sha-256=:\(digest):", "X-Content-Size": "12000"])
            })
        defer { store.stop(); stockroom.stop() }
        let outcome = try await scene.delivery(stockroom).deliver(HostileServerTests.purchase())
        #expect(outcome.code == "delivered", "\(outcome)")
        #expect(FileManager.default.contents(atPath: scene.files + "/" + Self.product) == Data(replaced))
        #expect(store.requests.map { $0.header("Range") } == [nil, nil], "the bytes of the old representation were dropped")
        #expect(stockroom.requests[1].header("Range") == "bytes=5000-", "Stockroom was asked to continue, and said the file had changed")
    }

    @Test func aTokenRenewedForTheAcknowledgementComesFromA303AndFetchesNothingAgain() async throws {
        let scene = try HostileServerTests.Scene()
        let acknowledgements = Counter()
        let store = try ScriptedHTTPServer { _ in Self.object() }
        let location = Self.presigned(store)
        let stockroom = try ScriptedHTTPServer { request in
            if request.line.hasPrefix("POST /v1/downloads ") {
                return Self.redirect(to: location, headers: ["X-Download-Token": "token-\(acknowledgements.value + 1)"])
            }
            guard request.line.contains("/ack ") else { return HostileServerTests.answer("404 Not Found", "{}") }
            if acknowledgements.next() == 1 {
                return HostileServerTests.answer("401 Unauthorized", #"{"error": {"code": "token_expired", "message": "expired"}}"#)
            }
            return HostileServerTests.acknowledged
        }
        defer { store.stop(); stockroom.stop() }
        let outcome = try await scene.delivery(stockroom).deliver(HostileServerTests.purchase())
        #expect(outcome.code == "delivered", "\(outcome)")
        #expect(store.requests.count == 1, "the 303 that renewed the token was not followed: the file was in place")
        #expect(
            Self.lines(stockroom) == [
                "POST /v1/downloads", "POST /v1/downloads/\(Self.transaction)/ack", "POST /v1/downloads",
                "POST /v1/downloads/\(Self.transaction)/ack",
            ])
        #expect(stockroom.requests.last?.header("Authorization") == "Bearer token-2")
    }

    // MARK: Fresh URLs are bounded

    @Test func aStoreThatRefusesEveryURLEndsInRetryLaterAfterThreeFreshOnes() async throws {
        let scene = try HostileServerTests.Scene()
        let store = try ScriptedHTTPServer { _ in
            HostileServerTests.answer("403 Forbidden", "<Error><Code>AccessDenied</Code><Message>Request has expired</Message></Error>")
        }
        let stockroom = try Self.stockroom(to: store)
        defer { store.stop(); stockroom.stop() }
        let outcome = try await scene.delivery(stockroom).deliver(HostileServerTests.purchase())
        #expect(outcome.code == "store_refused", "\(outcome)")
        #expect(outcome.transactionAction == .keepUnfinishedAndRetry)
        #expect(store.requests.count == 1 + Delivery.maximumFreshURLs)
        #expect(
            Self.lines(stockroom) == ["POST /v1/downloads"] + Array(repeating: "GET \(Self.contentPath)", count: Delivery.maximumFreshURLs))
        #expect(
            stockroom.requests.dropFirst().allSatisfy { $0.header("Authorization") == "Bearer token-1" },
            "a fresh URL is asked with the token")
        #expect(Self.leaks(store) == [])
    }
}

extension HTTPURLResponse {
    /// The same answer with one more field.
    func withField(_ name: String, _ value: String) -> HTTPURLResponse {
        var fields = (allHeaderFields as? [String: String]) ?? [:]
        fields[name] = value
        return HTTPURLResponse(url: url!, statusCode: statusCode, httpVersion: "HTTP/1.1", headerFields: fields)!
    }
}

/// A count shared with a scripted server's threads.
final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0

    var value: Int { lock.withLock { count } }

    /// Counts one more, and tells the new count.
    func next() -> Int {
        lock.withLock {
            count += 1; return count
        }
    }
}
