import Foundation
import StockroomKit
import StockroomTestSupport
import Testing

/// The catalogue with its copy on disk: fetched, revalidated with 304, served offline.
@Suite struct CatalogTests {
    @Test func theCatalogueIsRevalidatedWith304AndServedFromTheCopyWhileTheServerIsDown() async throws {
        try await KitFixture.run { fixture in
            let cache = URL(fileURLWithPath: fixture.folder.path + "/cache")
            let client = CatalogClient(server: fixture.proxy.url, cacheFolder: cache)

            let (catalog, source) = try await client.catalog()
            #expect(source == .server)
            #expect(catalog.productIDs == [KitFixture.book, KitFixture.big])
            #expect(catalog.products.first { $0.productID == KitFixture.book }?.size == Int64(KitFixture.bookBytes.count))

            let (again, revalidated) = try await client.catalog()
            #expect(revalidated == .notModified)
            #expect(again == catalog)

            // A new client on the same copy (a relaunch), with the server out of reach.
            fixture.proxy.refuse(true)
            let offline = CatalogClient(server: fixture.proxy.url, cacheFolder: cache)
            let (copy, fromCopy) = try await offline.catalog()
            #expect(copy == catalog)
            guard case .copy = fromCopy else { Issue.record("\(fromCopy)"); return }
        }
    }

    @Test func withNoCopyAndNoServerThereIsNoCatalogue() async throws {
        let folder = try TemporaryFolder()
        let client = CatalogClient(server: URL(string: "http://127.0.0.1:9")!, cacheFolder: URL(fileURLWithPath: folder.path))
        await #expect(throws: CatalogClient.Failure.self) { try await client.catalog() }
    }
}
