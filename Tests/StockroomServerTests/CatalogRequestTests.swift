import Testing
@testable import StockroomServer

/// What `CatalogFastPath` reads itself, and what it leaves to the HTTP decoder: anything it does
/// not read exactly is handed on, so a mistake here can only cost speed, never answer a request
/// the decoder would read otherwise.
@Suite struct CatalogRequestTests {
    static func read(_ text: String) -> (length: Int, ifNoneMatch: String?)? {
        Array(text.utf8).withUnsafeBytes { bytes in
            CatalogRequest(bytes).map { ($0.length, $0.ifNoneMatch.map { String(decoding: $0, as: UTF8.self) }) }
        }
    }

    @Test(
        arguments: [
            ("GET /v1/catalog HTTP/1.1\r\nHost: a\r\n\r\n", nil),
            ("GET /v1/catalog HTTP/1.1\r\n\r\n", nil),
            ("GET /v1/catalog?since=1&x=%20 HTTP/1.1\r\nHost: a\r\n\r\n", nil),
            ("GET /v1/catalog HTTP/1.1\r\nHost: a\r\nIf-None-Match:  \"abc\" \t\r\nAccept: */*\r\n\r\n", "\"abc\""),
            ("GET /v1/catalog HTTP/1.1\r\nif-none-match: W/\"a\", \"b\"\r\nConnection: Keep-Alive\r\nX-Empty:\r\n\r\n", "W/\"a\", \"b\""),
        ] as [(String, String?)])
    func aPlainCatalogueRequestIsRead(text: String, ifNoneMatch: String?) throws {
        let request = try #require(Self.read(text + "GET /next"))
        #expect(request.length == text.utf8.count, "the next request's bytes are left where they are")
        #expect(request.ifNoneMatch == ifNoneMatch)
    }

    @Test(arguments: [
        "HEAD /v1/catalog HTTP/1.1\r\n\r\n",
        "get /v1/catalog HTTP/1.1\r\n\r\n",
        "GET /v1/catalog HTTP/1.0\r\n\r\n",
        "GET /v1/catalog HTTP/1.1\n\n",
        "GET  /v1/catalog HTTP/1.1\r\n\r\n",
        "GET /v1/catalogue HTTP/1.1\r\n\r\n",
        "GET /v1/catalog/com.example.book HTTP/1.1\r\n\r\n",
        "GET http://a/v1/catalog HTTP/1.1\r\n\r\n",
        "GET /v1/catalog#x HTTP/1.1\r\n\r\n",
        "GET /v1/catalog HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
        "GET /v1/catalog HTTP/1.1\r\ncontent-length: 5\r\n\r\nhello",
        "GET /v1/catalog HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        "GET /v1/catalog HTTP/1.1\r\nExpect: 100-continue\r\n\r\n",
        "GET /v1/catalog HTTP/1.1\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\n",
        "GET /v1/catalog HTTP/1.1\r\nConnection: close\r\n\r\n",
        "GET /v1/catalog HTTP/1.1\r\nIf-None-Match: \"a\"\r\nIf-None-Match: \"b\"\r\n\r\n",
        "GET /v1/catalog HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n",
        "GET /v1/catalog HTTP/1.1\r\nHost : a\r\n\r\n",
        "GET /v1/catalog HTTP/1.1\r\nHost: a\nX: b\r\n\r\n",
        "GET /v1/catalog HTTP/1.1\r\nHost: a\rX: b\r\n\r\n",
        "GET /v1/catalog HTTP/1.1\r\nHost: é\r\n\r\n",
        "GET /v1/catalog HTTP/1.1\r\nHost: a\u{0}b\r\n\r\n",
        "GET /v1/catalog HTTP/1.1\r\nHost: a\r\n",
        "GET /v1/catalog HTTP/1.1\r\nHost: a\r\n\r",
        "GET /v1/catalog HTTP/1.1",
        "GET /v1/catalog",
        "",
    ])
    func anythingElseIsLeftToTheDecoder(text: String) {
        #expect(Self.read(text) == nil)
    }

    @Test func aHeadLongerThanEightKiBIsLeftToTheDecoder() {
        let field = "X-Long: " + String(repeating: "a", count: CatalogFastPath.maximumHead) + "\r\n"
        #expect(Self.read("GET /v1/catalog HTTP/1.1\r\n" + field + "\r\n") == nil)
        #expect(Self.read("GET /v1/catalog HTTP/1.1\r\nX-Short: a\r\n\r\n") != nil)
    }
}
