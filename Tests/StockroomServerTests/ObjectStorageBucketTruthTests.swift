import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import StockroomCore
import StockroomPostgresTestSupport
import StockroomTestSupport
import Testing
@testable import StockroomServer

/// The bucket holds what the catalogue says, and nothing Stockroom serves is unchecked: each case
/// was reproduced against the real SeaweedFS store (`.ci/s3`) or a scripted lying stand-in, and
/// is kept to show that it no longer happens.
@Suite struct ObjectStorageBucketTruthTests {
    typealias Bucket = ObjectStorageTests.Bucket

    /// The flags of `stockroom content push` for `bucket`, its catalogue at `shop/products.json`.
    static func pushSettings(_ bucket: Bucket, _ folder: TemporaryFolder) -> [String] {
        [
            "--content", "s3://\(bucket.client.bucket)/shop", "--catalog", "s3://\(bucket.client.bucket)/shop/products.json",
            "--s3-endpoint", bucket.store.endpoint, "--database", folder.path + "/ledger.sqlite",
        ]
    }

    static func push(_ bucket: Bucket, _ folder: TemporaryFolder, _ arguments: [String]) async throws -> String {
        try await StockroomProcess.run(
            try StockroomProcess.binary(), ["content", "push"] + arguments + pushSettings(bucket, folder),
            environment: bucket.store.environment)
    }

    /// The catalogue's entries by product: the key each names.
    static func files(_ bucket: Bucket) async throws -> [String: String] {
        let catalog = try await bucket.client.fetch("shop/products.json", ifNoneMatch: nil)
        let file = try CatalogFile.decode(try #require(catalog).body)
        return Dictionary(uniqueKeysWithValues: file.products.map { ($0.productId ?? "", $0.file ?? "") })
    }

    // MARK: content push never writes over what it does not own

    /// Three products whose files are all called `level.pak`, pushed without `--key`: the third's
    /// new key was `level.v1.pak`, the second's live object, overwritten in silence (the second's
    /// buyers got the third's bytes). Each must get a key of its own, and none be replaced.
    @Test func pushesOfFilesWithOneNameNeverOverwriteAnotherProductsObject() async throws {
        let bucket = try await Bucket.make()
        let folder = try TemporaryFolder()
        try await bucket.client.put("shop/products.json", body: Array(#"{"products": []}"#.utf8), contentType: "application/json")
        var contents: [String: [UInt8]] = [:]
        for (index, product) in ["com.example.a", "com.example.b", "com.example.c"].enumerated() {
            let bytes = sampleBytes(count: 3_000 + index, seed: UInt64(40 + index))
            contents[product] = bytes
            let sub = try TemporaryFolder()
            let file = try sub.write("level.pak", bytes)
            _ = try await Self.push(bucket, folder, [file, "--product", product, "--title", "Level", "--type", "non-consumable"])
        }
        let files = try await Self.files(bucket)
        #expect(Set(files.values).count == 3, "two products share a key: \(files)")
        for (product, bytes) in contents {
            let key = "shop/" + (files[product] ?? "")
            let stored = try await bucket.client.read(key, range: 0...Int64(bytes.count - 1), ifMatch: nil)
            let same = stored == bytes
            #expect(same, "\(product)'s object \(key) holds another product's bytes")
        }
    }

    /// `--key` naming another product's object, or an object the catalogue does not name (a file
    /// an operator keeps beside), is refused before a byte is written; without `--key`, a file
    /// named like that object goes to a new key and the object stays as it was.
    @Test func aPushNeverReplacesAnObjectItDoesNotOwn() async throws {
        let bucket = try await Bucket.make()
        let folder = try TemporaryFolder()
        try await bucket.client.put(
            "shop/products.json",
            body: Array(ServerFixture.catalog([ServerFixture.entry(DownloadFixture.book, file: "books/book.epub")]).utf8),
            contentType: "application/json")
        let stray = Array("an operator's own object, in no catalogue".utf8)
        try await bucket.client.put("shop/stray.pak", body: stray, contentType: "application/octet-stream")
        let book = try await bucket.client.head("shop/books/book.epub")
        let file = try folder.write("stray.pak", sampleBytes(count: 2_000, seed: 50))
        let product = ["--product", "com.example.level", "--title", "Level", "--type", "non-consumable"]
        await #expect(throws: (any Error).self) { _ = try await Self.push(bucket, folder, [file, "--key", "books/book.epub"] + product) }
        await #expect(throws: (any Error).self) { _ = try await Self.push(bucket, folder, [file, "--key", "stray.pak"] + product) }
        #expect(try await bucket.client.head("shop/books/book.epub") == book)
        #expect(try await bucket.client.read("shop/stray.pak", range: 0...Int64(stray.count - 1), ifMatch: nil) == stray)
        #expect(try await Self.files(bucket)["com.example.level"] == nil)

        let pushed = try await Self.push(bucket, folder, [file] + product)
        #expect(pushed.contains("shop/stray.v1.pak"), "\(pushed)")
        #expect(try await bucket.client.read("shop/stray.pak", range: 0...Int64(stray.count - 1), ifMatch: nil) == stray)
        #expect(try await Self.files(bucket)["com.example.level"] == "stray.v1.pak")
    }

    /// `--key products.json`, the README's own layout (content and catalogue under one prefix):
    /// the upload went over the catalogue, the catalogue's ETag write then failed and the object
    /// was deleted: no catalogue, and "run the push again" failed. The catalogue's key is never
    /// written by a push, and a refused push leaves the bucket as it was.
    @Test func aPushToTheCataloguesKeyIsRefusedAndTheCatalogueStays() async throws {
        let bucket = try await Bucket.make()
        let folder = try TemporaryFolder()
        let catalogue = Array(ServerFixture.catalog([ServerFixture.entry(DownloadFixture.book, file: "books/book.epub")]).utf8)
        let etag = try await bucket.client.put("shop/products.json", body: catalogue, contentType: "application/json")
        let file = try folder.write("level.pak", sampleBytes(count: 2_000, seed: 51))
        let product = ["--product", "com.example.level", "--title", "Level", "--type", "non-consumable"]
        await #expect(throws: (any Error).self) { _ = try await Self.push(bucket, folder, [file, "--key", "products.json"] + product) }
        let after = try #require(try await bucket.client.fetch("shop/products.json", ifNoneMatch: nil))
        #expect(after.etag == etag && after.body == catalogue)
        // And the next push works.
        _ = try await Self.push(bucket, folder, [file] + product)
        #expect(try await Self.files(bucket)["com.example.level"] == "level.pak")
    }

    // MARK: Stream: ranges from a lying store

    /// A store that answers a `Range` with other bytes under the same ETag (a corrupt disk, a
    /// broken cache before it): a whole body was checked against the CRC-32C, a range was not, and
    /// a resume from the break reached the buyer as a `206` with the genuine `Repr-Digest`, and
    /// moved the purchase to `delivered`. Shown with a scripted store that tells the truth to the
    /// hash (a GET without `Range`) and lies in block 2 of every ranged GET: the buyer gets only
    /// genuine bytes, the response is cut before the bad block, and nothing is recorded delivered.
    @Test(arguments: LedgerEngine.allCases) func aLyingStoresRangesNeverReachTheBuyerAndNeverCompleteADownload(_ engine: LedgerEngine)
        async throws
    {
        let folder = try TemporaryFolder()
        let (size, lie) = ((3 << 20) + 1_000, (2 << 20) + 5)
        let genuine = sampleBytes(count: size, seed: 60)
        let (store, storePort) = try await Self.lyingStore(folder, genuine: genuine, lie: lie)
        defer { store.terminate(SIGKILL) }
        let reader = try Self.rawReader(folder)
        try await DownloadFixture.run(
            engine: engine,
            ObjectStorageAttackTests.streaming(fromScriptedStoreOn: storePort)
        ) { fixture in
            let port = try #require(fixture.client.port)
            let purchase = try await fixture.control.purchase(DownloadFixture.book)
            let claim = String(
                decoding: try JSONSerialization.data(withJSONObject: [
                    "productId": DownloadFixture.book, "receiptData": purchase.receiptData, "transactionId": purchase.transactionId,
                ]), as: UTF8.self)
            let claimed = try await Self.raw(
                reader, port: port, "POST", "/v1/downloads", headers: ["Content-Type": "application/json"], body: claim, folder: folder)
            #expect(claimed.status.contains("200"), "\(claimed.status)")
            #expect(claimed.body.count < size && claimed.body.count <= lie, "the claim sent \(claimed.body.count) bytes of \(size)")
            let claimGenuine = claimed.body == Array(genuine.prefix(claimed.body.count))
            #expect(claimGenuine, "the claim sent bytes that are not the object's")
            let token = try #require(claimed.headers["x-download-token"])

            // The app resumes from where the claim broke off, and again from inside block 1.
            for start in [claimed.body.count, (1 << 20) + 100] {
                let resumed = try await Self.raw(
                    reader, port: port, "GET", "/v1/downloads/\(purchase.transactionId)/content",
                    headers: ["Authorization": "Bearer \(token)", "Range": "bytes=\(start)-"], folder: folder)
                #expect(start + resumed.body.count <= lie, "the resume from \(start) sent \(resumed.body.count) bytes, past the bad block")
                let resumeGenuine = resumed.body == Array(genuine[start..<min(size, start + resumed.body.count)])
                #expect(resumeGenuine, "the resume from \(start) sent bytes that are not the object's (\(resumed.status))")
            }
            try await Task.sleep(for: .milliseconds(500))
            let row = try #require(try await fixture.ledger.fulfilment(purchase.transactionId))
            #expect(row.state != .delivered)
            // The store's bad bytes are Stockroom's side: a refund request would hear of an outage of ours.
            #expect(row.lastDeliveryEnding == .server)
            #expect(row.sentBytes.map { $0.count <= Int64(lie) } == true, "only genuine bytes are counted as sent")
        }
    }

    // MARK: Redirect: the URL serves the object that was hashed

    /// Within 250 ms of an object being replaced (the HEAD `ObjectHeads` shares), a resume was
    /// answered `307` with the old `Repr-Digest`, and its URL served the new bytes. In a bucket
    /// that keeps versions the URL names the version hashed, so it serves those bytes whatever was
    /// written since.
    @Test func aRedirectInAVersionedBucketServesTheVersionHashedAfterAReplace() async throws {
        let (store, client) = try await ScratchBucket.make()
        try await client.enableVersioning()
        try await client.put("shop/books/book.epub", body: ServerFixture.book, contentType: "application/epub+zip")
        try await client.put("shop/big.bin", body: ServerFixture.big, contentType: "application/octet-stream")
        let bucket = Bucket(store: store, client: client)
        try await DownloadFixture.run(engine: .sqlite, { bucket.configure(&$0, delivery: .redirect) }) { fixture in
            let purchase = try await fixture.control.purchase(DownloadFixture.book)
            let claimed = try await fixture.post(purchase)
            #expect(claimed.status == .seeOther)
            let token = try #require(claimed.headers[.init("X-Download-Token")!])
            let claimURL = try #require(claimed.headers[.location])
            #expect(claimURL.contains("versionId="), "a versioned bucket's URL names no version")
            let replacement = sampleBytes(count: 20_000, seed: 70)
            try await client.put("shop/books/book.epub", body: replacement, contentType: "application/epub+zip")
            // The claim's URL, followed after the replace (an app that waited), still serves the bytes hashed.
            let late = try await ObjectStorageTests.fetch(claimURL)
            let lateServed = late.status == 200 && late.body == ServerFixture.book
            #expect(lateServed, "the claim's URL served other bytes after a replace: \(late.status)")
            let resumed = try await fixture.get("/v1/downloads/\(purchase.transactionId)/content", token: token)
            if resumed.status == .temporaryRedirect {
                #expect(resumed.headers[.init("Repr-Digest")!] == "sha-256=:\(ByteEncoding.base64(SHA256.hash(ServerFixture.book))):")
                let location = try #require(resumed.headers[.location])
                #expect(location.contains("versionId="))
                let fetched = try await ObjectStorageTests.fetch(location)
                #expect(fetched.status == 200)
                let served = fetched.body == ServerFixture.book
                #expect(served, "the URL handed with the old digest served other bytes")
            } else {
                #expect(resumed.status == .serviceUnavailable, "\(resumed.status)")
            }
        }
    }

    /// In a bucket without versions the URL is made only after a HEAD of its own confirms the
    /// ETag hashed: right after a replace, the resume is `503 content_changing`, not a URL for
    /// bytes whose digest was never published.
    @Test func aRedirectInABucketWithoutVersionsConfirmsTheObjectAsTheURLIsMade() async throws {
        let bucket = try await Bucket.make()
        try await DownloadFixture.run(engine: .sqlite, { bucket.configure(&$0, delivery: .redirect) }) { fixture in
            let purchase = try await fixture.control.purchase(DownloadFixture.book)
            let claimed = try await fixture.post(purchase)
            #expect(claimed.status == .seeOther)
            #expect(try #require(claimed.headers[.location]).contains("versionId=") == false)
            let token = try #require(claimed.headers[.init("X-Download-Token")!])
            try await bucket.client.put(
                "shop/books/book.epub", body: sampleBytes(count: 20_000, seed: 71), contentType: "application/epub+zip")
            let resumed = try await fixture.get("/v1/downloads/\(purchase.transactionId)/content", token: token)
            #expect(resumed.status == .serviceUnavailable, "a URL was handed out for a replaced object: \(resumed.status)")
            #expect(try DownloadFixture.code(resumed) == "content_changing")
        }
    }

    // MARK: The digest cache on a first start

    /// A new instance (a state folder not made yet, the ledger on PostgreSQL) hashed every object
    /// by streaming it, then could not save the digests (the folder did not exist, and the failed
    /// write was silent): every restart streamed the whole bucket again. Counted through a proxy
    /// in front of the store: the second start reads no object.
    @Test func aRestartAfterAFirstStartStreamsNoObject() async throws {
        let bucket = try await Bucket.make()
        let port = try #require(URL(string: bucket.store.endpoint)?.port)
        let proxy = try TCPProxy(upstreamPort: port)
        defer { proxy.stop() }
        let state = try TemporaryFolder()
        let fresh = state.path + "/not-made-yet/state"
        let configure: @Sendable (inout ServerConfiguration) -> Void = { configuration in
            bucket.configure(&configuration, delivery: .stream, endpoint: "http://127.0.0.1:\(proxy.port)")
            configuration.stateFolder = fresh
        }
        func objectReads() -> Int {
            proxy.requests.filter { $0.method == "GET" && ($0.path.contains("/shop/big.bin") || $0.path.contains("/shop/books/")) }.count
        }
        try await DownloadFixture.run(engine: .postgres, configure) { fixture in
            let catalog = try await fixture.client.execute(uri: "/v1/catalog", method: .get)
            #expect(catalog.status == .ok)
        }
        #expect(objectReads() == 2, "the first start hashes both objects: \(proxy.requests.map(\.description))")
        #expect(FileManager.default.fileExists(atPath: fresh + "/stockroom.digests.json"))
        try await DownloadFixture.run(engine: .postgres, configure) { fixture in
            let catalog = try await fixture.client.execute(uri: "/v1/catalog", method: .get)
            #expect(catalog.status == .ok)
        }
        #expect(objectReads() == 2, "the restart streamed objects again: \(proxy.requests.map(\.description))")
    }

    /// A scripted S3 stand-in (no signatures checked) holding `genuine` as the book: a GET without
    /// `Range` (the hash) reads the truth; every ranged GET answers 206 with the right
    /// `Content-Range` and ETag, and byte `lie` flipped.
    static func lyingStore(_ folder: TemporaryFolder, genuine: [UInt8], lie: Int) async throws -> (ChildProcess, Int) {
        let storePort = try FreePort.make(SOCK_STREAM)
        try folder.write("object.bin", genuine)
        let script = try folder.write(
            "store.py",
            """
            import re, sys
            from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
            genuine = open(sys.argv[2], "rb").read()
            objects = {"/fakebucket/shop/books/book.epub": genuine, "/fakebucket/shop/big.bin": b"x" * 1000}
            LIE = \(lie)
            class Store(BaseHTTPRequestHandler):
                protocol_version = "HTTP/1.1"
                def log_message(self, *args): pass
                def start(self, status, length, extra={}):
                    self.send_response(status)
                    self.send_header("Content-Length", str(length))
                    self.send_header("ETag", '"0123456789abcdef0123456789abcdef"')
                    for name, value in extra.items(): self.send_header(name, value)
                    self.end_headers()
                def do_HEAD(self):
                    self.start(200, len(objects.get(self.path.split("?")[0], b"")))
                def do_GET(self):
                    body = objects.get(self.path.split("?")[0], b"")
                    asked = re.match(r"bytes=(\\d+)-(\\d+)", self.headers.get("Range", ""))
                    if not asked:
                        self.start(200, len(body))  # the hash reads the truth
                        self.wfile.write(body)
                        return
                    low, high = int(asked.group(1)), min(int(asked.group(2)), len(body) - 1)
                    part = bytearray(body[low:high + 1])
                    if low <= LIE <= high and len(body) > LIE: part[LIE - low] ^= 0xFF  # the same ETag, another byte
                    self.start(206, len(part), {"Content-Range": "bytes %d-%d/%d" % (low, high, len(body))})
                    self.wfile.write(bytes(part))
            ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Store).serve_forever()
            """)
        let store = try ChildProcess("/usr/bin/python3", [script, String(storePort), folder.path + "/object.bin"])
        try await Task.sleep(for: .milliseconds(700))
        return (store, storePort)
    }

    /// The same lying store through Hummingbird's writer (no live connection: `ChunkPipe`, not
    /// `DirectStream`): a range that covers the bad block is never answered with its bytes.
    @Test func aLyingStoresRangeIsRefusedThroughThePipeToo() async throws {
        let folder = try TemporaryFolder()
        let (size, lie) = ((3 << 20) + 1_000, (2 << 20) + 5)
        let genuine = sampleBytes(count: size, seed: 61)
        let (store, storePort) = try await Self.lyingStore(folder, genuine: genuine, lie: lie)
        defer { store.terminate(SIGKILL) }
        try await DownloadFixture.run(
            engine: .sqlite, server: .router,
            ObjectStorageAttackTests.streaming(fromScriptedStoreOn: storePort)
        ) { fixture in
            let purchase = try await fixture.control.purchase(DownloadFixture.book)
            _ = try? await fixture.post(purchase)  // recorded, then cut at the bad block
            let token = DownloadFixture.token(purchase.transactionId)
            let start = (2 << 20) - 100
            do {
                let resumed = try await fixture.get(
                    "/v1/downloads/\(purchase.transactionId)/content", token: token, headers: [.range: "bytes=\(start)-"])
                let body = Array(buffer: resumed.body)
                let genuineBytes = body == Array(genuine[start..<min(size, start + body.count)])
                #expect(genuineBytes && start + body.count <= lie, "\(resumed.status): \(body.count) bytes from \(start)")
            } catch {
                // The response failed mid-body: nothing more to compare.
            }
            try await Task.sleep(for: .milliseconds(300))
            #expect(try await fixture.ledger.fulfilment(purchase.transactionId)?.state != .delivered)
        }
    }

    /// A raw HTTP/1.1 client: it keeps what arrived of a body the server cut (URLSession and curl
    /// throw it away), which is what these cases compare.
    static func rawReader(_ folder: TemporaryFolder) throws -> String {
        try folder.write(
            "raw.py",
            """
            import json, socket, sys
            port, method, path, headers, body, out = sys.argv[1:7]
            headers = json.loads(headers)
            body = body.encode()
            s = socket.create_connection(("127.0.0.1", int(port)))
            head = "%s %s HTTP/1.1\\r\\nHost: x\\r\\nConnection: close\\r\\nContent-Length: %d\\r\\n" % (method, path, len(body))
            head += "".join("%s: %s\\r\\n" % item for item in headers.items()) + "\\r\\n"
            s.sendall(head.encode() + body)
            s.settimeout(30)
            data = b""
            try:
                while True:
                    d = s.recv(65536)
                    if not d: break
                    data += d
                    s.settimeout(5)
            except Exception: pass
            top, _, rest = data.partition(b"\\r\\n\\r\\n")
            lines = top.decode("latin-1").split("\\r\\n")
            fields = {l.split(":", 1)[0].strip().lower(): l.split(":", 1)[1].strip() for l in lines[1:] if ":" in l}
            open(out, "wb").write(rest)
            print(json.dumps({"status": lines[0], "headers": fields}))
            """)
    }

    static func raw(
        _ reader: String, port: Int, _ method: String, _ path: String, headers: [String: String], body: String = "",
        folder: TemporaryFolder
    ) async throws -> (status: String, headers: [String: String], body: [UInt8]) {
        let out = folder.path + "/body-\(UUID().uuidString)"
        let headerText = String(decoding: try JSONSerialization.data(withJSONObject: headers), as: UTF8.self)
        let result = try await ChildProcess.run("/usr/bin/python3", [reader, String(port), method, path, headerText, body, out])
        let answer = try JSONSerialization.jsonObject(with: Data(result.output.utf8)) as? [String: Any] ?? [:]
        let bytes = Array((try? Data(contentsOf: URL(fileURLWithPath: out))) ?? Data())
        return (answer["status"] as? String ?? "", answer["headers"] as? [String: String] ?? [:], bytes)
    }
}
