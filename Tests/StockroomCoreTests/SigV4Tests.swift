import Foundation
import StockroomCore
import Testing

/// The signer against the worked examples of AWS's Signature Version 4 documentation for S3
/// (header-based: GET Object with a range, PUT Object, GET Bucket lifecycle, List Objects;
/// query-string: a presigned GET), all with AWS's example key on 24 May 2013.
@Suite struct SigV4Tests {
    static let signer = SigV4(
        credentials: .init(accessKeyID: "AKIAIOSFODNN7EXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
        region: "us-east-1")
    static let date = Date(timeIntervalSince1970: 1_369_353_600)  // 20130524T000000Z
    static let host = "examplebucket.s3.amazonaws.com"

    static func headers(_ extra: [(name: String, value: String)], payloadHash: String) -> [(name: String, value: String)] {
        [("Host", host), ("x-amz-date", "20130524T000000Z"), ("x-amz-content-sha256", payloadHash)] + extra
    }

    static func signature(_ authorization: String) -> String {
        String(authorization.split(separator: "Signature=").last ?? "")
    }

    @Test func getObjectWithARange() {
        let request = SigV4.Request(
            method: "GET", path: "/test.txt", headers: Self.headers([("Range", "bytes=0-9")], payloadHash: SigV4.emptyPayloadHash),
            payloadHash: SigV4.emptyPayloadHash)
        #expect(
            Self.signer.authorization(request, date: Self.date)
                == """
                AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, \
                SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, \
                Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41
                """
        )
    }

    @Test func putObjectWithABodyAndAKeyThatNeedsEncoding() {
        let body = ByteEncoding.hex(SHA256.hash(Array("Welcome to Amazon S3.".utf8)))
        #expect(body == "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072")
        let request = SigV4.Request(
            method: "PUT", path: SigV4.encodePath("test$file.text"),
            headers: Self.headers(
                [("Date", "Fri, 24 May 2013 00:00:00 GMT"), ("x-amz-storage-class", "REDUCED_REDUNDANCY")], payloadHash: body),
            payloadHash: body)
        #expect(request.path == "/test%24file.text")
        let authorization = Self.signer.authorization(request, date: Self.date)
        #expect(Self.signature(authorization) == "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd")
        #expect(authorization.contains("SignedHeaders=date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class,"))
    }

    @Test func aQueryParameterWithoutAValue() {
        let request = SigV4.Request(
            method: "GET", path: "/", query: [("lifecycle", "")], headers: Self.headers([], payloadHash: SigV4.emptyPayloadHash),
            payloadHash: SigV4.emptyPayloadHash)
        #expect(
            Self.signature(Self.signer.authorization(request, date: Self.date))
                == "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543")
    }

    @Test func queryParametersAreSortedAndEncoded() {
        let request = SigV4.Request(
            method: "GET", path: "/", query: [("prefix", "J"), ("max-keys", "2")],
            headers: Self.headers([], payloadHash: SigV4.emptyPayloadHash),
            payloadHash: SigV4.emptyPayloadHash)
        #expect(
            Self.signature(Self.signer.authorization(request, date: Self.date))
                == "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7")
    }

    @Test func aPresignedGetIsAWSsExampleToTheLetter() throws {
        let url = try #require(
            Self.signer.presignedURL(
                method: "GET", base: URL(string: "https://\(Self.host)")!, path: "/test.txt", expires: .seconds(86_400), date: Self.date))
        #expect(
            url.absoluteString
                == """
                https://examplebucket.s3.amazonaws.com/test.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256&\
                X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z&\
                X-Amz-Expires=86400&X-Amz-SignedHeaders=host&\
                X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404
                """
        )
    }

    @Test func aPresignedURLLivesASecondToSevenDaysAndCarriesASessionToken() throws {
        var signer = Self.signer
        signer.credentials.sessionToken = "token/with+chars="
        let base = URL(string: "http://127.0.0.1:8333")!
        for (asked, given) in [(Duration.seconds(0), "1"), (.seconds(-5), "1"), (.seconds(300), "300"), (.seconds(10_000_000), "604800")] {
            let url = try #require(
                signer.presignedURL(method: "GET", base: base, path: SigV4.encodePath("levels/a b/ü.pak"), expires: asked, date: Self.date))
            #expect(url.absoluteString.hasPrefix("http://127.0.0.1:8333/levels/a%20b/%C3%BC.pak?"))
            #expect(url.absoluteString.contains("&X-Amz-Expires=\(given)&"))
            #expect(url.absoluteString.contains("X-Amz-Security-Token=token%2Fwith%2Bchars%3D"))
        }
        #expect(
            signer.presignedURL(method: "GET", base: URL(string: "ftp://example.com")!, path: "/x", expires: .seconds(60), date: Self.date)
                == nil)
    }

    @Test func theSecretIsNeverPrinted() {
        var credentials = Self.signer.credentials
        credentials.sessionToken = "session-token-value"
        for text in ["\(credentials)", String(reflecting: credentials), "\(Self.signer)"] {
            #expect(!text.contains("wJalrXUtnFEMI"), "\(text)")
            #expect(!text.contains("session-token-value"), "\(text)")
        }
    }
}
