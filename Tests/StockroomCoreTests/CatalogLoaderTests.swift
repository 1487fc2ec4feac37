import Foundation
import StockroomTestSupport
import Testing
@testable import StockroomCore

@Suite struct CatalogLoaderTests {
    /// A catalogue folder and a content folder holding `book.epub`.
    struct Fixture {
        let root: TemporaryFolder
        let loader: CatalogLoader

        init(cache: String? = nil) throws {
            let root = try TemporaryFolder()
            try root.write("content/book.epub", sampleBytes(count: 5_000))
            _ = try root.folder("catalog")
            let path = root.path
            self.root = root
            loader = CatalogLoader(
                catalogFolder: path + "/catalog", jail: try ContentJail(folder: path + "/content"),
                digests: DigestCache(file: cache.map { path + "/" + $0 }))
        }

        func write(_ json: String) throws { try root.write("catalog/products.json", json) }

        func problems() -> [String] {
            do {
                _ = try loader.load()
                return []
            } catch {
                return error.problems
            }
        }
    }

    static func entry(_ id: String = "com.example.book", file: String = "book.epub", type: String = "non-consumable") -> String {
        #"""
        {"productId": "\#(id)", "title": "Book", "type": "\#(type)", "file": "\#(file)", "contentType": "application/epub+zip", \#
        "contentVersion": "1"}
        """#
    }

    @Test func loadsAValidCatalogueWithSizeAndDigestFromTheFile() throws {
        let fixture = try Fixture()
        try fixture.write(#"{"products": [\#(Self.entry())]}"#)
        let catalog = try fixture.loader.load()
        let product = try #require(catalog.product(id: "com.example.book"))
        #expect(product.size == 5_000)
        #expect(product.sha256 == ByteEncoding.hex(SHA256.hash(sampleBytes(count: 5_000))))
        #expect(catalog.etag == "\"\(catalog.version)\"")
        let body = try JSONSerialization.jsonObject(with: Data(catalog.body)) as? [String: Any]
        #expect(body?["version"] as? String == catalog.version)
        #expect(!String(decoding: catalog.body, as: UTF8.self).contains("book.epub"), "file paths stay private")
    }

    @Test func syntaxErrorsNameTheLineAndColumn() throws {
        let fixture = try Fixture()
        try fixture.write("{\"products\": [\n  \(Self.entry()),\n  {\"productId\" \"x\"}\n]}")
        #expect(fixture.problems() == [#"products.json is not valid JSON at line 3, column 16: expected ":" after the key"#])
    }

    @Test func wrongFieldTypesNameTheirPath() throws {
        let fixture = try Fixture()
        try fixture.write(#"{"products": [{"productId": 7}]}"#)
        #expect(fixture.problems() == ["products.json: products[0].productId should be a string"])
    }

    @Test func duplicateIDsAreRefused() throws {
        let fixture = try Fixture()
        try fixture.write(#"{"products": [\#(Self.entry()), \#(Self.entry())]}"#)
        #expect(fixture.problems() == ["product 2 (com.example.book): duplicate productId, already used by product 1"])
    }

    @Test func unknownTypesAreRefusedWithTheAllowedOnes() throws {
        let fixture = try Fixture()
        try fixture.write(#"{"products": [\#(Self.entry(type: "subscription"))]}"#)
        #expect(
            fixture.problems() == [
                #"""
                product 1 (com.example.book): type "subscription" must be one of non-consumable, consumable, auto-renewable, \#
                non-renewing
                """#
            ])
    }

    @Test(arguments: ["com example", "com..example", ".com.example", "com/example", "", String(repeating: "a", count: 256), "café.book"])
    func badProductIDsAreRefused(id: String) throws {
        let fixture = try Fixture()
        try fixture.write(#"{"products": [\#(Self.entry(id))]}"#)
        #expect(fixture.problems().count == 1)
        #expect(fixture.problems().first?.contains("productId must be 1–255 reverse-DNS characters") == true)
    }

    @Test func aProductIDOf255CharactersIsAccepted() throws {
        let fixture = try Fixture()
        try fixture.write(#"{"products": [\#(Self.entry(String(repeating: "a", count: 255)))]}"#)
        #expect(fixture.problems() == [])
    }

    @Test func missingFilesAndFieldsAreEachNamed() throws {
        let fixture = try Fixture()
        try fixture.write(#"{"products": [\#(Self.entry(file: "nope.epub")), {"productId": "com.example.b"}]}"#)
        #expect(
            fixture.problems() == [
                #"product 1 (com.example.book): file "nope.epub" does not exist in the content folder"#,
                "product 2 (com.example.b): title is missing",
                "product 2 (com.example.b): type is missing; must be one of non-consumable, consumable, auto-renewable, non-renewing",
                "product 2 (com.example.b): file is missing",
            ])
    }

    @Test func filesOutsideTheContentFolderAreRefused() throws {
        let fixture = try Fixture()
        try fixture.root.write("secret.txt", "outside")
        try FileManager.default.createSymbolicLink(
            atPath: fixture.root.path + "/content/link.txt", withDestinationPath: fixture.root.path + "/secret.txt")
        try fixture.write(
            #"""
            {"products": [\#(Self.entry("a.b", file: "../secret.txt")), \#
            \#(Self.entry("a.c", file: fixture.root.path + "/secret.txt")), \#(Self.entry("a.d", file: "link.txt")), \#
            \#(Self.entry("a.e", file: "x/../../secret.txt"))]}
            """#
        )
        #expect(
            fixture.problems() == [
                #"product 1 (a.b): file "../secret.txt" uses ".." to leave the content folder"#,
                #"product 2 (a.c): file "\#(fixture.root.path)/secret.txt" is an absolute path; paths are relative to the content folder"#,
                #"product 3 (a.d): file "link.txt" leads outside the content folder (through a symbolic link)"#,
                #"product 4 (a.e): file "x/../../secret.txt" uses ".." to leave the content folder"#,
            ])
    }

    @Test func aSymlinkThatStaysInsideIsServed() throws {
        let fixture = try Fixture()
        try FileManager.default.createSymbolicLink(atPath: fixture.root.path + "/content/alias.epub", withDestinationPath: "book.epub")
        try fixture.write(#"{"products": [\#(Self.entry(file: "alias.epub"))]}"#)
        #expect(fixture.problems() == [])
    }

    @Test func aMissingProductsFileIsReported() throws {
        let fixture = try Fixture()
        #expect(fixture.problems().first?.hasSuffix("products.json cannot be read (missing, or no permission)") == true)
    }

    /// The cache is keyed by stamp: bytes rewritten in place with the same size and time are
    /// not re-read (proving no re-hash), and a new modification time is.
    @Test func digestsAreCachedAcrossRestartsByStamp() throws {
        let fixture = try Fixture(cache: "digests.json")
        try fixture.write(#"{"products": [\#(Self.entry())]}"#)
        let file = fixture.root.path + "/content/book.epub"
        let before = Date(timeIntervalSince1970: 1_790_000_000)  // whole seconds survive the round trip
        try FileManager.default.setAttributes([.modificationDate: before], ofItemAtPath: file)
        let original = try fixture.loader.load().products[0].sha256
        let cacheFile = fixture.root.path + "/digests.json"
        let written = try FileManager.default.attributesOfItem(atPath: cacheFile)[.modificationDate] as? Date
        try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSince1970: 1)], ofItemAtPath: cacheFile)
        _ = try fixture.loader.load()
        #expect(
            try FileManager.default.attributesOfItem(atPath: cacheFile)[.modificationDate] as? Date == Date(timeIntervalSince1970: 1),
            "an unchanged cache is not rewritten")
        #expect(written != nil)
        let handle = try #require(FileHandle(forUpdatingAtPath: file))
        try handle.write(contentsOf: Data(sampleBytes(count: 5_000, seed: 9)))
        try handle.close()
        try FileManager.default.setAttributes([.modificationDate: before], ofItemAtPath: file)

        // A restart: a new cache instance reads the file written by the first.
        let restarted = CatalogLoader(
            catalogFolder: fixture.loader.catalogFolder, jail: fixture.loader.jail,
            digests: DigestCache(file: fixture.root.path + "/digests.json"))
        #expect(try restarted.load().products[0].sha256 == original)

        try FileManager.default.setAttributes([.modificationDate: before.addingTimeInterval(5)], ofItemAtPath: file)
        #expect(try restarted.load().products[0].sha256 == ByteEncoding.hex(SHA256.hash(sampleBytes(count: 5_000, seed: 9))))
    }

    /// An object's entry keeps both digests against the object's size and ETag; one written
    /// without a CRC-32C (before streams were checked by it) reads as unhashed, so the object is
    /// hashed again rather than streamed unchecked.
    /// The hasher's block CRC-32C are each 1 MiB block's, whatever sizes the bytes arrive in.
    @Test func blockChecksumsAreEachBlocksWhateverTheChunks() {
        let bytes = sampleBytes(count: (2 << 20) + 12_345, seed: 4)
        var hasher = ObjectHasher()
        var offset = 0
        for size in [1, 16_384, 1 << 20, 7, 3 << 20] where offset < bytes.count {
            let end = min(bytes.count, offset + size)
            hasher.update(Array(bytes[offset..<end]))
            offset = end
        }
        let digest = hasher.finalize()
        #expect(
            digest.blocks
                == stride(from: 0, to: bytes.count, by: 1 << 20).map {
                    CRC32C.checksum(Array(bytes[$0..<min(bytes.count, $0 + (1 << 20))]))
                })
        #expect(digest.crc32c == CRC32C.checksum(bytes))
        #expect(ObjectDigest.blockCount(size: Int64(bytes.count)) == 3 && ObjectDigest.blockCount(size: 0) == 0)
    }

    /// A first start on PostgreSQL keeps its digests in `.stockroom/`, which does not exist yet:
    /// the folder is made, so the next start hashes nothing.
    @Test func theDigestCacheMakesItsFolder() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("digests-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let file = folder.path + "/.stockroom/stockroom.digests.json"
        let cache = DigestCache(file: file)
        let head = S3Client.Head(size: 3, etag: "\"e\"")
        let digest = ObjectDigest(sha256: String(repeating: "cd", count: 32), crc32c: 7, blocks: [7])
        cache.remember(object: "s3://b/k", head: head, digest: digest)
        cache.save(keeping: ["s3://b/k"])
        #expect(DigestCache(file: file).digest(ofObject: "s3://b/k", head: head) == digest)
    }

    @Test func anObjectsDigestsAreKeptByHeadAndAnEntryWithoutACRCIsHashedAgain() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("digests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let file = folder.path + "/digests.json"
        let head = S3Client.Head(size: 9, etag: "\"e1\"")
        let digest = ObjectDigest(sha256: String(repeating: "ab", count: 32), crc32c: 0x0000_00FF, blocks: [0x0000_00FF])
        let cache = DigestCache(file: file)
        cache.remember(object: "s3://b/k", head: head, digest: digest)
        try cache.saveAll()
        let reread = DigestCache(file: file)
        #expect(reread.digest(ofObject: "s3://b/k", head: head) == digest)
        #expect(reread.digest(ofObject: "s3://b/k", head: S3Client.Head(size: 9, etag: "\"e2\"")) == nil)
        #expect(reread.digest(ofObject: "s3://b/k", head: S3Client.Head(size: 10, etag: "\"e1\"")) == nil)
        let older = #"{"s3://b/k": {"object": {"size": 9, "etag": "\"e1\""}, "sha256": "\#(digest.sha256)"}}"#
        try older.write(toFile: file, atomically: true, encoding: .utf8)
        #expect(DigestCache(file: file).digest(ofObject: "s3://b/k", head: head) == nil)
        // Written before ranges were checked: a CRC-32C of the whole, none per block.
        let withoutBlocks = #"{"s3://b/k": {"object": {"size": 9, "etag": "\"e1\""}, "sha256": "\#(digest.sha256)", "crc32c": "000000ff"}}"#
        try withoutBlocks.write(toFile: file, atomically: true, encoding: .utf8)
        #expect(DigestCache(file: file).digest(ofObject: "s3://b/k", head: head) == nil)
    }
}
