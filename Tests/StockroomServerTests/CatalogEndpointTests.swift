import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Testing
import StockroomCore
import StockroomTestSupport
@testable import StockroomServer

@Suite struct CatalogEndpointTests {
    static func json(_ buffer: ByteBuffer) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(buffer: buffer)) as? [String: Any])
    }

    @Test func theCatalogueListsProductsWithAStrongETag() async throws {
        let fixture = try ServerFixture()
        try await fixture.application().test(.router) { router in
            let client = ContractRecorder(router)
            let response = try await client.execute(uri: "/v1/catalog", method: .get)
            #expect(response.status == .ok)
            #expect(response.headers[.contentType] == "application/json; charset=utf-8")
            #expect(response.headers[.cacheControl] == "public, no-cache")
            let body = try Self.json(response.body)
            let version = try #require(body["version"] as? String)
            #expect(response.headers[.eTag] == "\"\(version)\"")
            let products = try #require(body["products"] as? [[String: Any]])
            #expect(products.count == 2)
            #expect(products[0]["productId"] as? String == "com.example.book")
            #expect(products[0]["size"] as? Int == 20_000)
            #expect(products[0]["sha256"] as? String == ByteEncoding.hex(SHA256.hash(ServerFixture.book)))
            #expect(products[0]["file"] == nil)
        }
    }

    @Test(arguments: ["SELF", "W/SELF", "\"x\", SELF", "*"])
    func aMatchingIfNoneMatchGets304WithoutABody(ifNoneMatch: String) async throws {
        let fixture = try ServerFixture()
        try await fixture.application().test(.router) { router in
            let client = ContractRecorder(router)
            let etag = try #require(try await client.execute(uri: "/v1/catalog", method: .get).headers[.eTag])
            for uri in ["/v1/catalog", "/v1/catalog/com.example.book"] {
                let response = try await client.execute(
                    uri: uri, method: .get, headers: [.ifNoneMatch: ifNoneMatch.replacingOccurrences(of: "SELF", with: etag)])
                #expect(response.status == .notModified)
                #expect(response.body.readableBytes == 0)
                #expect(response.headers[.eTag] == etag)
            }
        }
    }

    @Test func aStaleIfNoneMatchGetsTheBody() async throws {
        let fixture = try ServerFixture()
        try await fixture.application().test(.router) { router in
            let client = ContractRecorder(router)
            let response = try await client.execute(uri: "/v1/catalog", method: .get, headers: [.ifNoneMatch: "\"0123\""])
            #expect(response.status == .ok)
            #expect(response.body.readableBytes > 0)
        }
    }

    @Test func headAnswersWithTheHeadersOfGET() async throws {
        let fixture = try ServerFixture()
        try await fixture.application().test(.live) { client in
            let get = try await client.execute(uri: "/v1/catalog", method: .get)
            let head = try await client.execute(uri: "/v1/catalog", method: .head)
            #expect(head.status == .ok)
            #expect(head.body.readableBytes == 0)
            #expect(head.headers[.eTag] == get.headers[.eTag])
            #expect(head.headers[.contentLength] == get.headers[.contentLength])
        }
    }

    @Test func oneProductIsServedByID() async throws {
        let fixture = try ServerFixture()
        try await fixture.application().test(.router) { router in
            let client = ContractRecorder(router)
            let response = try await client.execute(uri: "/v1/catalog/com.example.book", method: .get)
            #expect(response.status == .ok)
            #expect(try Self.json(response.body)["title"] as? String == "Book")
        }
    }

    @Test(arguments: [
        ("/v1/catalog/com.example.nope", HTTPResponse.Status.notFound, "unknown_product"),
        ("/v1/catalog/bad..id", .badRequest, "bad_request"),
        ("/v1/catalog/%20x", .badRequest, "bad_request"),
        ("/v1/nowhere", .notFound, "not_found"),
        ("/", .notFound, "not_found"),
    ])
    func errorsUseTheJSONShape(uri: String, status: HTTPResponse.Status, code: String) async throws {
        let fixture = try ServerFixture()
        try await fixture.application().test(.router) { router in
            let client = ContractRecorder(router)
            let response = try await client.execute(uri: uri, method: .get)
            #expect(response.status == status)
            #expect(response.headers[.contentType] == "application/json; charset=utf-8")
            let error = try #require(try Self.json(response.body)["error"] as? [String: Any])
            #expect(error["code"] as? String == code)
            #expect((error["message"] as? String)?.isEmpty == false)
        }
    }

    @Test func healthAndMetricsAnswer() async throws {
        let fixture = try ServerFixture()
        try await fixture.application().test(.router) { router in
            let client = ContractRecorder(router)
            let health = try await client.execute(uri: "/healthz", method: .get)
            #expect(health.status == .ok)
            #expect(try Self.json(health.body)["status"] as? String == "ok")
            let metrics = try await client.execute(uri: "/metrics", method: .get)
            #expect(metrics.status == .ok)
            #expect(metrics.headers[.contentType]?.hasPrefix("text/plain; version=0.0.4") == true)
        }
    }

    @Test func everyResponseCarriesARequestID() async throws {
        let fixture = try ServerFixture()
        try await fixture.application().test(.router) { router in
            let client = ContractRecorder(router)
            let first = try await client.execute(uri: "/healthz", method: .get).headers[.init("X-Request-Id")!]
            let second = try await client.execute(uri: "/nowhere", method: .get).headers[.init("X-Request-Id")!]
            #expect(first != nil && second != nil && first != second)
        }
    }
}
