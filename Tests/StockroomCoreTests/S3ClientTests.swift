import Foundation
import StockroomCore
import StockroomTestSupport
import Testing

/// The S3 client against a real store (SeaweedFS on loopback, `.ci/s3`): heads, ranges, the
/// conditional reads that keep a digest honest, multipart, presigned URLs, and each refusal.
@Suite struct S3ClientTests {
    @Test func aPutObjectIsHeadedReadByRangeAndHashedAsItsBytes() async throws {
        let (_, client) = try await ScratchBucket.make()
        let bytes = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let etag = try await client.put("levels/one.bin", body: bytes, contentType: "application/octet-stream")
        let head = try await client.head("levels/one.bin")
        #expect(head == S3Client.Head(size: 300_000, etag: etag))
        #expect(try await client.read("levels/one.bin", range: 1000...1999, ifMatch: etag) == Array(bytes[1000...1999]))
        let digest = try await client.digest("levels/one.bin", ifMatch: etag)
        #expect(digest.size == 300_000)
        #expect(
            digest.digest
                == ObjectDigest(
                    sha256: ByteEncoding.hex(SHA256.hash(bytes)), crc32c: CRC32C.checksum(bytes), blocks: [CRC32C.checksum(bytes)]))
    }

    @Test func aReplacedObjectIsRefusedByItsOldETag() async throws {
        let (_, client) = try await ScratchBucket.make()
        let first = try await client.put("a.bin", body: Array(repeating: 1, count: 100), contentType: "application/octet-stream")
        try await client.put("a.bin", body: Array(repeating: 2, count: 100), contentType: "application/octet-stream")
        await #expect(throws: ObjectStoreError.changed(key: "a.bin")) { try await client.read("a.bin", range: 0...9, ifMatch: first) }
        await #expect(throws: ObjectStoreError.changed(key: "a.bin")) { try await client.digest("a.bin", ifMatch: first) }
    }

    /// A store (or a cache before it) that ignores If-Match and answers with another object is
    /// refused by the ETag it names, before a byte is handed on.
    @Test func aStreamAnsweredWithAnotherObjectsETagIsRefusedAsChanged() async throws {
        let (store, client) = try await ScratchBucket.make()
        let bytes = Array(repeating: UInt8(3), count: 50_000)
        let etag = try await client.put("a.bin", body: bytes, contentType: "application/octet-stream")
        let bare = etag.trimmingCharacters(in: CharacterSet(charactersIn: "\""))
        let port = try #require(URL(string: store.endpoint)?.port)
        let proxy = try TCPProxy(upstreamPort: port)
        defer { proxy.stop() }
        let proxied = S3Client(
            settings: try ObjectStoreSettings(
                endpoint: "http://127.0.0.1:\(proxy.port)", region: "us-east-1", credentials: store.credentials), bucket: client.bucket)
        let handed = ByteTally()
        proxy.inject([.replaceInHead(bare, with: String(bare.reversed()))])
        await #expect(throws: ObjectStoreError.changed(key: "a.bin")) {
            try await proxied.stream("a.bin", range: 0...49_999, ifMatch: etag) { handed.add($0.count) }
        }
        #expect(handed.total == 0)
        #expect(proxy.requests.count == 1)
        // Through the same proxy, untouched, the same call streams the object.
        #expect(try await proxied.stream("a.bin", range: 0...49_999, ifMatch: etag) { handed.add($0.count) } == 50_000)
    }

    @Test func aMissingObjectAndAMissingBucketAreNamed() async throws {
        let (store, client) = try await ScratchBucket.make()
        await #expect(throws: ObjectStoreError.missing(key: "nowhere.bin")) { try await client.head("nowhere.bin") }
        let absent = S3Client(settings: try store.settings(), bucket: "no-such-bucket-here")
        await #expect(throws: ObjectStoreError.noBucket("no-such-bucket-here")) { try await absent.headBucket() }
    }

    @Test func wrongCredentialsAreDeniedNotMissing() async throws {
        let (store, client) = try await ScratchBucket.make()
        try await client.put("x.bin", body: [1, 2, 3], contentType: "application/octet-stream")
        let wrong = S3Client(
            settings: try store.settings(.init(accessKeyID: store.credentials.accessKeyID, secretAccessKey: "not-the-secret")),
            bucket: client.bucket)
        await #expect {
            try await wrong.head("x.bin")
        } throws: { error in
            guard case .denied(let status, _, _) = error as? ObjectStoreError else { return false }
            return status == 403
        }
    }

    @Test func theCatalogueIsFetchedOnlyWhenItsETagMoved() async throws {
        let (_, client) = try await ScratchBucket.make()
        try await client.put("products.json", body: Array("{}".utf8), contentType: "application/json")
        let first = try #require(try await client.fetch("products.json", ifNoneMatch: nil))
        #expect(first.body == Array("{}".utf8))
        #expect(try await client.fetch("products.json", ifNoneMatch: first.etag) == nil)
        try await client.put("products.json", body: Array("{\"products\":[]}".utf8), contentType: "application/json")
        #expect(try await client.fetch("products.json", ifNoneMatch: first.etag)?.body == Array("{\"products\":[]}".utf8))
    }

    @Test func aMultipartUploadIsOneObject() async throws {
        let (_, client) = try await ScratchBucket.make()
        let part1 = Array(repeating: UInt8(7), count: 5 << 20)
        let part2 = Array(repeating: UInt8(9), count: 1000)
        let upload = try await client.startMultipart("big.bin", contentType: "application/octet-stream")
        let tags = [
            try await client.uploadPart("big.bin", uploadID: upload, number: 1, body: part1),
            try await client.uploadPart("big.bin", uploadID: upload, number: 2, body: part2),
        ]
        _ = try await client.completeMultipart("big.bin", uploadID: upload, parts: tags)
        let head = try await client.head("big.bin")
        #expect(head.size == Int64(part1.count + part2.count))
        #expect(
            try await client.digest("big.bin", ifMatch: head.etag).digest
                == ObjectDigest(
                    sha256: ByteEncoding.hex(SHA256.hash(part1 + part2)), crc32c: CRC32C.checksum(part1 + part2),
                    blocks: (0..<5).map { _ in CRC32C.checksum(Array(part1[0..<(1 << 20)])) } + [CRC32C.checksum(part2)]))
    }

    /// `If-None-Match: *` on a PUT and on a multipart completion (S3's conditional create, which
    /// SeaweedFS honours too): refused where an object is, and nothing replaced.
    @Test func aConditionalCreateNeverReplacesAnObject() async throws {
        let (_, client) = try await ScratchBucket.make()
        let first = try await client.put("taken.bin", body: [1, 2, 3], contentType: "application/octet-stream", createOnly: true)
        await #expect(throws: ObjectStoreError.exists(key: "taken.bin")) {
            try await client.put("taken.bin", body: [4, 5, 6], contentType: "application/octet-stream", createOnly: true)
        }
        let upload = try await client.startMultipart("taken.bin", contentType: "application/octet-stream")
        let tag = try await client.uploadPart("taken.bin", uploadID: upload, number: 1, body: [7, 8, 9])
        await #expect(throws: ObjectStoreError.exists(key: "taken.bin")) {
            try await client.completeMultipart("taken.bin", uploadID: upload, parts: [tag], createOnly: true)
        }
        await client.abortMultipart("taken.bin", uploadID: upload)
        #expect(try await client.head("taken.bin").etag == first)
        #expect(try await client.read("taken.bin", range: 0...2, ifMatch: nil) == [1, 2, 3])
    }

    @Test func aPresignedURLServesItsObjectAloneUntilItExpires() async throws {
        let (store, client) = try await ScratchBucket.make()
        try await client.put("book.epub", body: Array("chapter one".utf8), contentType: "application/epub+zip")
        try await client.put("other.epub", body: Array("not yours".utf8), contentType: "application/epub+zip")
        let url = try #require(client.presignedGET("book.epub", lifetime: .seconds(60)))
        #expect(try await Self.get(url.absoluteString) == (200, Array("chapter one".utf8)))
        // The same signature on another key, an expired URL, and another identity's key: refused.
        let elsewhere = url.absoluteString.replacingOccurrences(of: "/book.epub?", with: "/other.epub?")
        #expect(try await Self.get(elsewhere).status == 403)
        let old = try #require(client.presignedGET("book.epub", lifetime: .seconds(1), now: Date().addingTimeInterval(-10)))
        #expect(try await Self.get(old.absoluteString).status == 403)
        let stranger = S3Client(settings: try store.settings(store.stranger), bucket: client.bucket)
        let theirs = try #require(stranger.presignedGET("book.epub", lifetime: .seconds(60)))
        #expect(try await Self.get(theirs.absoluteString).status == 403)
    }

    /// An unsigned GET, as an app redirected to the URL sends it.
    static func get(_ url: String) async throws -> (status: Int, body: [UInt8]) {
        let answer = try await CurlHTTPClient().send(UpstreamRequest(method: .get, url: url))
        return (answer.status, answer.status == 200 ? answer.body : [])
    }
}

/// Bytes a stream's sink was given.
private final class ByteTally: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0

    func add(_ bytes: Int) -> Bool {
        lock.withLock { count += bytes }
        return true
    }

    var total: Int { lock.withLock { count } }
}
