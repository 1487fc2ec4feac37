import Foundation
import Hummingbird
import HummingbirdTesting
import StockroomTestSupport
import Testing
import StockroomCore
@testable import StockroomServer

/// The catalogue watcher, against a live server: edits take effect without a restart, and a
/// bad edit keeps the last good catalogue serving.
@Suite struct LiveReloadTests {
    /// Polls `/v1/catalog` until `condition` holds on its products, for up to 30 seconds: a ceiling
    /// for a loaded machine (the watcher polls every 50 ms), not a measure of it.
    static func waitForCatalog(
        _ client: some TestClientProtocol, _ condition: ([[String: Any]]) -> Bool
    ) async throws -> Bool {
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline {
            let response = try await client.execute(uri: "/v1/catalog", method: .get)
            let body = try JSONSerialization.jsonObject(with: Data(buffer: response.body)) as? [String: Any]
            if let products = body?["products"] as? [[String: Any]], condition(products) { return true }
            try await Task.sleep(for: .milliseconds(50))
        }
        return false
    }

    @Test func anAddedProductIsServedWithoutARestart() async throws {
        let fixture = try ServerFixture()
        try await fixture.application().test(.live) { client in
            try fixture.root.write("content/level.pak", sampleBytes(count: 777))
            try fixture.root.write(
                "catalog/products.json",
                ServerFixture.catalog([
                    ServerFixture.entry("com.example.book", file: "books/book.epub"),
                    ServerFixture.entry("com.example.big", file: "big.bin"),
                    ServerFixture.entry("com.example.level", file: "level.pak"),
                ]))
            #expect(try await Self.waitForCatalog(client) { $0.count == 3 })
            let level = try await client.execute(uri: "/v1/catalog/com.example.level", method: .get)
            #expect(level.status == .ok)
        }
    }

    @Test func aChangedContentFileIsRehashed() async throws {
        let fixture = try ServerFixture()
        try await fixture.application().test(.live) { client in
            let replacement = sampleBytes(count: 20_001, seed: 3)
            try fixture.root.write("content/books/book.epub", replacement)
            let digest = ByteEncoding.hex(SHA256.hash(replacement))
            #expect(
                try await Self.waitForCatalog(client) { $0.first?["sha256"] as? String == digest && $0.first?["size"] as? Int == 20_001 })
        }
    }

    @Test func aBadEditKeepsTheLastGoodCatalogueServing() async throws {
        let fixture = try ServerFixture()
        try await fixture.application().test(.live) { client in
            let before = try await client.execute(uri: "/v1/catalog", method: .get)
            let etag = before.headers[.eTag]
            try fixture.root.write("catalog/products.json", "{\"products\": [ {\"productId\": }")
            try await Task.sleep(for: .milliseconds(400))  // eight polls
            let during = try await client.execute(uri: "/v1/catalog", method: .get)
            #expect(during.status == .ok)
            #expect(during.headers[.eTag] == etag)
            #expect(Array(buffer: during.body) == Array(buffer: before.body))

            // Fixing the file is picked up again.
            try fixture.root.write(
                "catalog/products.json",
                ServerFixture.catalog([ServerFixture.entry("com.example.book", file: "books/book.epub", title: "Fixed")]))
            #expect(try await Self.waitForCatalog(client) { $0.first?["title"] as? String == "Fixed" })
        }
    }
}
