import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import StockroomTestSupport
import Testing
@testable import StockroomCore
@testable import StockroomHTTP

/// The content store and responder, served through a router built here, over loopback.
@Suite struct ContentDeliveryTests {
    static let chunkSize = 1024

    /// Serves `GET /files/{path...}` from a jailed content folder holding the given files.
    struct Fixture {
        let root: TemporaryFolder
        let jail: ContentJail
        let files: [String: [UInt8]]

        init(files: [String: [UInt8]]) throws {
            root = try TemporaryFolder()
            for (name, bytes) in files { try root.write("content/" + name, bytes) }
            try root.write("secret.txt", "outside the jail")
            jail = try ContentJail(folder: root.path + "/content")
            self.files = files
        }

        func representation(_ path: String) throws -> ContentRepresentation {
            let absolute = try jail.resolve(path)
            let stamp = try #require(FileStamp.of(path: absolute))
            return ContentRepresentation(
                path: path, size: stamp.size, sha256: try DigestCache.hashFile(at: absolute), contentType: "application/octet-stream",
                stamp: stamp)
        }

        func application(reports: ReportLog = ReportLog()) -> some ApplicationProtocol {
            let router = Router(options: .autoGenerateHeadEndpoints)
            let responder = ContentResponder(store: LocalContentStore(jail: jail, chunkSize: ContentDeliveryTests.chunkSize))
            let jail = self.jail
            router.get("files/**") { request, context -> Response in
                // Decoded as a careless route might: the jail must hold even then.
                let path = context.parameters.getCatchAll().joined(separator: "/").removingPercentEncoding ?? ""
                let absolute: String
                do {
                    absolute = try jail.resolve(path)
                } catch {
                    throw HTTPError(.forbidden, message: "\(error)")
                }
                let stamp = FileStamp.of(path: absolute)!
                let representation = ContentRepresentation(
                    path: path, size: stamp.size, sha256: try DigestCache.hashFile(at: absolute), contentType: "application/octet-stream",
                    stamp: stamp)
                return try await responder.response(to: request.head, representation: representation) { await reports.append($0) }
            }
            return Application(router: router)
        }
    }

    actor ReportLog {
        var reports: [DeliveryReport] = []
        func append(_ report: DeliveryReport) { reports.append(report) }
    }

    static let data = sampleBytes(count: 10_000)

    @Test func aPlainGETSendsTheWholeFileWithValidators() async throws {
        let fixture = try Fixture(files: ["a.bin": Self.data])
        let representation = try fixture.representation("a.bin")
        try await fixture.application().test(.live) { client in
            let response = try await client.execute(uri: "/files/a.bin", method: .get)
            #expect(response.status == .ok)
            #expect(Array(buffer: response.body) == Self.data)
            #expect(response.headers[.contentLength] == "10000")
            #expect(response.headers[.acceptRanges] == "bytes")
            #expect(response.headers[.eTag] == representation.etag)
            #expect(response.headers[.reprDigest] == "sha-256=:\(ByteEncoding.base64(SHA256.hash(Self.data))):")
        }
    }

    @Test(arguments: [
        ("bytes=0-99", 0...99), ("bytes=9990-", 9990...9999), ("bytes=-10", 9990...9999),
        ("bytes=-20000", 0...9999), ("bytes=9000-20000", 9000...9999), ("bytes=5-5", 5...5),
    ])
    func aSingleRangeGets206WithContentRange(field: String, expected: ClosedRange<Int>) async throws {
        let fixture = try Fixture(files: ["a.bin": Self.data])
        try await fixture.application().test(.live) { client in
            let response = try await client.execute(uri: "/files/a.bin", method: .get, headers: [.range: field])
            #expect(response.status == .partialContent)
            #expect(Array(buffer: response.body) == Array(Self.data[expected]))
            #expect(response.headers[.contentRange] == "bytes \(expected.lowerBound)-\(expected.upperBound)/10000")
            #expect(response.headers[.contentLength] == "\(expected.count)")
        }
    }

    @Test(arguments: ["bytes=10000-", "bytes=20000-30000", "bytes=-0"])
    func anUnsatisfiableRangeGets416WithTheSize(field: String) async throws {
        let fixture = try Fixture(files: ["a.bin": Self.data])
        try await fixture.application().test(.live) { client in
            let response = try await client.execute(uri: "/files/a.bin", method: .get, headers: [.range: field])
            #expect(response.status == .rangeNotSatisfiable)
            #expect(response.headers[.contentRange] == "bytes */10000")
            #expect(String(buffer: response.body).contains(#""code":"range_not_satisfiable""#))
        }
    }

    @Test func resumingWithIfRangeOfTheCurrentETagSendsTheRange() async throws {
        let fixture = try Fixture(files: ["a.bin": Self.data])
        let etag = try fixture.representation("a.bin").etag
        try await fixture.application().test(.live) { client in
            let response = try await client.execute(uri: "/files/a.bin", method: .get, headers: [.range: "bytes=4000-", .ifRange: etag])
            #expect(response.status == .partialContent)
            #expect(Array(buffer: response.body) == Array(Self.data[4000...]))
        }
    }

    @Test(arguments: ["\"0000\"", "W/SELF", "Sun, 22 Nov 2026 05:00:00 GMT"])
    func resumingWithIfRangeOfAnotherOrWeakETagSendsTheWholeFile(ifRange: String) async throws {
        let fixture = try Fixture(files: ["a.bin": Self.data])
        let etag = try fixture.representation("a.bin").etag
        try await fixture.application().test(.live) { client in
            let value = ifRange == "W/SELF" ? "W/" + etag : ifRange
            let response = try await client.execute(uri: "/files/a.bin", method: .get, headers: [.range: "bytes=4000-", .ifRange: value])
            #expect(response.status == .ok)
            #expect(Array(buffer: response.body) == Self.data)
        }
    }

    @Test func multipleRangesAreAnsweredWithTheWholeFile() async throws {
        let fixture = try Fixture(files: ["a.bin": Self.data])
        try await fixture.application().test(.live) { client in
            let response = try await client.execute(uri: "/files/a.bin", method: .get, headers: [.range: "bytes=0-9,20-29"])
            #expect(response.status == .ok)
            #expect(Array(buffer: response.body) == Self.data)
        }
    }

    @Test func headSendsTheHeadersOfGETWithoutABody() async throws {
        let fixture = try Fixture(files: ["a.bin": Self.data])
        try await fixture.application().test(.live) { client in
            let whole = try await client.execute(uri: "/files/a.bin", method: .head)
            #expect(whole.status == .ok)
            #expect(whole.headers[.contentLength] == "10000")
            #expect(whole.body.readableBytes == 0)
            let partial = try await client.execute(uri: "/files/a.bin", method: .head, headers: [.range: "bytes=-10"])
            #expect(partial.status == .partialContent)
            #expect(partial.headers[.contentRange] == "bytes 9990-9999/10000")
            #expect(partial.headers[.contentLength] == "10")
        }
    }

    @Test func anEmptyFileIsServedAndEveryRangeOfItIsUnsatisfiable() async throws {
        let fixture = try Fixture(files: ["empty.bin": []])
        try await fixture.application().test(.live) { client in
            let response = try await client.execute(uri: "/files/empty.bin", method: .get)
            #expect(response.status == .ok)
            #expect(response.headers[.contentLength] == "0")
            #expect(response.headers[.reprDigest] == "sha-256=:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=:")
            let ranged = try await client.execute(uri: "/files/empty.bin", method: .get, headers: [.range: "bytes=-1"])
            #expect(ranged.status == .rangeNotSatisfiable)
            #expect(ranged.headers[.contentRange] == "bytes */0")
        }
    }

    @Test(arguments: [chunkSize, chunkSize + 1, 3 * chunkSize - 1])
    func filesAroundTheChunkSizeArriveIntact(size: Int) async throws {
        let bytes = sampleBytes(count: size, seed: UInt64(size))
        let fixture = try Fixture(files: ["c.bin": bytes])
        let reports = ReportLog()
        try await fixture.application(reports: reports).test(.live) { client in
            let response = try await client.execute(uri: "/files/c.bin", method: .get)
            #expect(Array(buffer: response.body) == bytes)
            let tail = try await client.execute(uri: "/files/c.bin", method: .get, headers: [.range: "bytes=\(size - 1)-"])
            #expect(Array(buffer: tail.body) == [bytes[size - 1]])
        }
        let logged = await reports.reports
        let first = try #require(logged.first)
        #expect(first.range == 0...Int64(size - 1) && first.bytesSent == Int64(size) && first.ending == .complete)
        #expect(first.version?.hasPrefix("\"") == true, "the report names the content version it sent (its ETag)")
    }

    @Test(arguments: ["..%2Fsecret.txt", "%2e%2e/secret.txt", "%2E%2E%2Fsecret.txt", "%2Fetc%2Fpasswd", "sub/..%2F..%2Fsecret.txt"])
    func traversalAttemptsAreRefused(path: String) async throws {
        let fixture = try Fixture(files: ["a.bin": Self.data, "sub/b.bin": Self.data])
        try await fixture.application().test(.live) { client in
            let response = try await client.execute(uri: "/files/" + path, method: .get)
            #expect(response.status == .forbidden)
            #expect(!String(buffer: response.body).contains("outside the jail"))
        }
    }

    @Test func aSymlinkLeadingOutIsRefused() async throws {
        let fixture = try Fixture(files: ["a.bin": Self.data])
        try FileManager.default.createSymbolicLink(
            atPath: fixture.root.path + "/content/out.txt", withDestinationPath: fixture.root.path + "/secret.txt")
        try await fixture.application().test(.live) { client in
            let response = try await client.execute(uri: "/files/out.txt", method: .get)
            #expect(response.status == .forbidden)
        }
        #expect(throws: ContentPathError.escapes("out.txt")) { try fixture.jail.resolve("out.txt") }
    }

    @Test func aFileChangedSinceHashingIsNotServedUnderItsOldDigest() async throws {
        let fixture = try Fixture(files: ["a.bin": Self.data])
        let representation = try fixture.representation("a.bin")
        try fixture.root.write("content/a.bin", Self.data + [1])
        let store = LocalContentStore(jail: fixture.jail)
        await #expect(throws: ContentError.changedSinceHashed("a.bin")) { try await store.prepare(representation) }
    }
}
