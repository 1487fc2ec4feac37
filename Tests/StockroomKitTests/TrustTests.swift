import Foundation
import StockroomTestSupport
import Testing

@testable import StockroomKit

/// The rules StockroomKit holds a server's words to, one by one: names, locations, waits, pins.
@Suite struct TrustTests {
    @Test func onlyTheAppStoresProductIDsAreFileNames() {
        for good in ["com.example.book", "a", "A1_b-c.d", String(repeating: "x", count: 255)] {
            #expect(NetworkName.isProductID(good), "\(good)")
        }
        for bad in [
            "", ".", "..", "../x", "a/b", "a..b", ".hidden", "trailing.", "-dash", "_under", "a b", "a\u{0}b", "é", "a\\b",
            String(repeating: "x", count: 256),
        ] {
            #expect(!NetworkName.isProductID(bad), "\(bad)")
        }
    }

    @Test func onlyDigitsAreTransactionIDs() {
        #expect(NetworkName.isTransactionID("1000000000000001"))
        #expect(NetworkName.isTransactionID("0"))
        for bad in ["", "12/34", "..", "1e5", "-1", " 1", "١٢", String(repeating: "1", count: 33)] {
            #expect(!NetworkName.isTransactionID(bad), "\(bad)")
        }
    }

    /// A transport failure's event message never carries a URL's query: URLSession's errors hold
    /// the whole failing URL, and a presigned URL's query is a credential the app would log.
    @Test func aTransportFailureSaysWhatFailedWithoutAnyURLsQuery() {
        let presigned = "https://store.example.com:9000/bucket/book.epub?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature=ab12"
        let urlError = URLError(.timedOut, userInfo: [NSURLErrorFailingURLStringErrorKey: presigned, "detail": "at \(presigned), then"])
        let described = Delivery.describe(urlError)
        #expect(!described.contains("X-Amz") && !described.contains("ab12"), "\(described)")
        #expect(described.hasPrefix("URLError \(URLError.Code.timedOut.rawValue)"))
        struct Failure: Error, CustomStringConvertible {
            let description: String
        }
        let curl = Delivery.describe(Failure(description: "Operation timed out after 30000 ms (\(presigned)), retry \(presigned)#frag"))
        #expect(
            curl == "Operation timed out after 30000 ms (https://store.example.com:9000/bucket/book.epub?…), retry "
                + "https://store.example.com:9000/bucket/book.epub?…")
        #expect(Delivery.withoutQueries("no URL here? none") == "no URL here? none")
    }

    @Test func aLocationIsFollowedOnlyAsAPathOnTheServersOrigin() throws {
        let origin = try #require(ServerOrigin(URL(string: "https://content.example.com:8443/base/")!))
        #expect(origin.url("/v1/downloads/1/content")?.absoluteString == "https://content.example.com:8443/v1/downloads/1/content")
        #expect(origin.url("/v1/downloads/1/content?x=1")?.absoluteString == "https://content.example.com:8443/v1/downloads/1/content?x=1")
        for foreign in [
            "https://evil.example/x", "//evil.example/x", "http://content.example.com:8443/x", "https://content.example.com/x",
            "relative/path", "",
            "/\\evil.example/x", "/x#fragment", "/x y", "/x\r\nHost: evil", "https://user@content.example.com:8443/x",
            "javascript:alert(1)",
            "/" + String(repeating: "a", count: 2048),
        ] {
            #expect(origin.url(foreign) == nil, "\(foreign)")
        }
        #expect(ServerOrigin(URL(string: "file:///etc/passwd")!) == nil)
        #expect(ServerOrigin(URL(string: "ftp://example.com/")!) == nil)
    }

    @Test func onlyA303ToTheClaimAndA307ToTheContentLeadOffTheOrigin() {
        for (status, exchange) in [(303, ServerOrigin.Exchange.claim), (307, .content)] {
            #expect(ServerOrigin.leadsToContent(status: status, answering: exchange))
        }
        for status in [300, 301, 302, 303, 304, 305, 307, 308, 200] {
            #expect(!ServerOrigin.leadsToContent(status: status, answering: .other), "\(status) to the status, ack, restore or catalogue")
            if status != 303 { #expect(!ServerOrigin.leadsToContent(status: status, answering: .claim), "\(status) to the claim") }
            if status != 307 { #expect(!ServerOrigin.leadsToContent(status: status, answering: .content), "\(status) to the content") }
        }
    }

    @Test func aStoreURLIsAnAbsoluteHTTPURLWithAHostAndNoUserInfoNeverHTTPFromHTTPS() throws {
        let plain = try #require(ServerOrigin(URL(string: "http://127.0.0.1:8080")!))
        let secure = try #require(ServerOrigin(URL(string: "https://content.example.com")!))
        let presigned =
            """
            /bucket/books/book.epub?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AK%2F20261126%2Fus-east-1%2Fs3%2Faws4_request&\
            X-Amz-Signature=ab12
            """
        for good in [
            "http://127.0.0.1:41119" + presigned, "https://bucket.s3.eu-west-1.amazonaws.com" + presigned,
            "HTTPS://Store.Example.com:443/k",
            "http://[::1]:9000/bucket/k", "http://store.example.com", "http://127.0.0.1:8080/v1/same-origin-too",
        ] {
            #expect(plain.storeURL(good)?.absoluteString == good, "\(good)")
        }
        #expect(secure.storeURL("https://store.example.com" + presigned) != nil)
        for bad in [
            "//store.example.com/k", "/bucket/k", "bucket/k", "", "ftp://store.example.com/k", "file:///etc/passwd", "javascript:alert(1)",
            "http://user@store.example.com/k", "http://user:pw@store.example.com/k", "http://store.example.com:80@evil.example/k",
            "http://store.example.com\\@evil.example/k", "http://evil.example%2F@store.example.com/k",
            "http://store.example.com/k#fragment",
            "http://store.example.com/k k", "http://store.example.com/k\r\nX: y", "http:/store.example.com/k", "http://:80/k",
            "http://store.example.com:/k",
            "http://store.example.com:99999/k", "http://store.example.com:0/k", "http://[::1/k", "http://störe.example.com/k",
            "http://store.example.com/ü",
            "http://store.example.com/" + String(repeating: "a", count: 8192),
        ] {
            #expect(plain.storeURL(bad) == nil, "\(bad)")
        }
        #expect(secure.storeURL("http://store.example.com" + presigned) == nil, "never from https to http")
    }

    @Test func theMinimumRateEndsATrickleAndSilenceEndsAStall() {
        var pace = TransferPace(timeout: 10, minimumBytesPerSecond: 100, now: 0)
        #expect(pace.check(sent: 500, received: 0, now: 1) == .proceed)
        #expect(pace.check(sent: 500, received: 0, now: 10) == .proceed, "the server may think for up to the timeout")
        #expect(pace.check(sent: 500, received: 0, now: 11.5) == .stalled)

        var slow = TransferPace(timeout: 10, minimumBytesPerSecond: 100, now: 0)
        slow.headBegan(now: 1)
        slow.headEnded(received: 0, now: 1)
        for second in 2...10 { #expect(slow.check(sent: 0, received: Int64(second), now: Double(second)) == .proceed) }
        #expect(slow.check(sent: 0, received: 11, now: 11) == .tooSlow, "a byte a second over a 10 s window")

        var fast = TransferPace(timeout: 10, minimumBytesPerSecond: 100, now: 0)
        fast.headEnded(received: 0, now: 0)
        for second in 1...100 { #expect(fast.check(sent: 0, received: Int64(second) * 200, now: Double(second)) == .proceed) }

        var head = TransferPace(timeout: 10, minimumBytesPerSecond: 100, now: 0)
        head.headBegan(now: 0)
        for second in 1...10 { #expect(head.check(sent: 0, received: 0, now: Double(second)) == .proceed || second > 10) }
        #expect(head.check(sent: 1, received: 0, now: 10.5) == .stalled, "a head that takes longer than the timeout, however it trickles")
    }

    @Test func aRetryAfterThatIsNeitherDigitsNorADateIsNone() {
        for field in ["-5", "1e30", "5 seconds", "", String(repeating: "9", count: 65)] {
            #expect(ServerAnswer.retryAfter(field, now: Date()) == nil, "\(field)")
        }
    }

    @Test(arguments: [
        "0", "1", "86400", "86401", "99999999999", "9223372036854775807", "99999999999999999999999999", "Fri, 31 Dec 9999 23:59:59 GMT",
    ])
    func everyRetryAfterIsASecondToADay(_ field: String) throws {
        let wait = try #require(ServerAnswer.retryAfter(field, now: Date()))
        #expect(wait >= .seconds(1) && wait <= Delivery.longestWait)
        #expect(Wait.seconds(wait) <= 86_400)
    }

    /// HTTP dates are read byte by byte: Foundation's `DateFormatter` trapped ("Incorrect range")
    /// on a `Retry-After` date with bytes past ASCII, which the `client` fuzz target found.
    @Test func anHTTPDateIsReadAsFoundationWritesItAndOddTextIsNoDate() {
        #expect(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT")?.timeIntervalSince1970 == 784_111_777)
        #expect(HTTPDate.parse("Thu, 01 Jan 1970 00:00:00 GMT")?.timeIntervalSince1970 == 0)
        #expect(HTTPDate.parse("Tue, 29 Feb 2000 12:00:00 GMT")?.timeIntervalSince1970 == 951_825_600)
        #expect(HTTPDate.parse("Fri, 31 Dec 9999 23:59:59 GMT")?.timeIntervalSince1970 == 253_402_300_799)
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2_000 {
            let date = Date(timeIntervalSince1970: TimeInterval(Int64.random(in: 0...253_402_300_799, using: &generator)))
            #expect(HTTPDate.parse(formatter.string(from: date)) == date, "\(formatter.string(from: date))")
        }
        for odd in [
            "Fri, 13\u{5bb}\u{29a}9 23:59:59 GMT", "Fri, 31 Dec 9999 23:59:59 UTC", "Sunday, 06-Nov-94 08:49:37 GMT",
            "Sun Nov  6 08:49:37 1994",
            "Sun, 06 Nov 1994 24:00:00 GMT", "Sun, 6 Nov 1994 08:49:37 GMT", "Xyz, 06 Nov 1994 08:49:37 GMT", "",
        ] {
            #expect(HTTPDate.parse(odd) == nil, "\(odd)")
            #expect(ServerAnswer.retryAfter(odd, now: Date()) == nil)
        }
    }

    /// A head as libcurl hands it over, line by line.
    @Test func aStatusLineCountsOnlyWhereAHeadBeginsAndAHeadIsBounded() {
        func read(_ lines: [String]) -> ResponseHead {
            var head = ResponseHead()
            for line in lines { _ = head.read(line) }
            return head
        }
        let disguised = read(["HTTP/1.1 500 Internal Server Error", "HTTP/1.1 200 OK: x", "Content-Length: 0", ""])
        #expect(disguised.isComplete && disguised.status == 500)
        let interim = read(["HTTP/1.1 100 Continue", "", "HTTP/1.1 204 No Content", "X-A: 1", "x-a: 2", ""])
        #expect(interim.isComplete && interim.status == 204 && interim.mergedFields == ["X-A": "1, 2"])
        let trailer = read(["HTTP/1.1 500 Oops", "Transfer-Encoding: chunked", "", "HTTP/1.1 200 OK: x", "X-Download-Token: t", ""])
        #expect(trailer.status == 500 && trailer.fields.count == 1, "nothing after the final head is part of it")
        for bad in ["HTTP/1.1 2000 OK", "HTTP/1.1 099 Odd", "HTTP/1.1 600 Odd", "HTTP/1.1 20 OK", "HTTP/1.1 +20 OK", "HTTP/1.1"] {
            #expect(!read([bad, ""]).isComplete, "\(bad)")
        }
        let flood = read(["HTTP/1.1 200 OK"] + (0...ResponseHead.maximumFields).map { "X-\($0): v" } + [""])
        #expect(flood.isOversized && flood.fields.count == ResponseHead.maximumFields)
    }

    @Test func pinsAreReadInCurlsSpelling() {
        let pin = Data(repeating: 7, count: 32).base64EncodedString()
        #expect(TLSTrust.pins("sha256//\(pin)") == [pin])
        #expect(TLSTrust.pins("sha256//\(pin);sha256//\(pin)") == [pin, pin])
        for bad in ["", pin, "sha256//", "sha256//AAAA", "sha1//\(pin)", "sha256//\(pin);"] { #expect(TLSTrust.pins(bad) == nil, "\(bad)") }
    }

    /// The pin of a certificate, read from its DER in Swift (what the Apple platforms' trust check
    /// uses), is OpenSSL's for the same key: an EC and an RSA key, a v3 and a v1 certificate.
    @Test(arguments: [("ec", "-addext basicConstraints=CA:TRUE"), ("rsa:2048", ""), ("ec", "-x509v1")])
    func aCertificatesPinIsOpenSSLs(_ key: String, _ extra: String) async throws {
        let folder = try TemporaryFolder()
        let keyOption = key == "ec" ? "-newkey ec -pkeyopt ec_paramgen_curve:P-256" : "-newkey \(key)"
        let version = extra == "-x509v1" ? "" : extra
        let resign =
            extra == "-x509v1"
            ? "openssl req -new -key key.pem -subj /CN=v1 -out csr.pem; "
                + "openssl x509 -req -in csr.pem -signkey key.pem -days 1 -out cert.pem"
            : "true"
        let script = """
            set -e
            cd '\(folder.path)'
            openssl req -x509 \(keyOption) -nodes -keyout key.pem -out cert.pem -days 1 -subj /CN=test \(version) 2>/dev/null
            \(resign) 2>/dev/null
            openssl x509 -in cert.pem -pubkey -noout | openssl pkey -pubin -outform der | openssl dgst -sha256 -binary | base64 > pin.txt
            """
        let run = try await ChildProcess.run("/bin/sh", ["-c", script])
        try #require(run.status == 0, "\(run.output)")
        let pin = try String(contentsOfFile: folder.path + "/pin.txt", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        let pem = try Data(contentsOf: URL(fileURLWithPath: folder.path + "/cert.pem"))
        let certificates = CertificateKey.certificates(inPEM: pem + Data("\n".utf8) + pem)
        #expect(certificates.count == 2)
        #expect(CertificateKey.pin(ofCertificate: try #require(certificates.first)) == pin)
        #expect(
            CertificateKey.pin(ofCertificate: Array(try #require(certificates.first).prefix(40))) == nil, "a cut certificate has no pin")
    }
}
