import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOPosix
import StockroomCore
import StockroomPostgresTestSupport
import StockroomTestSupport
import Testing
@testable import StockroomServer

/// Content in a real S3 store (SeaweedFS on loopback, `.ci/s3`), through the live download route
/// on both ledger engines: by stream and by presigned redirect, each proof kind, resumes with
/// `Range`, and each fault of the store, with the ledger unchanged by a refusal.
@Suite struct ObjectStorageTests {
    enum Proof: String, CaseIterable, Sendable, CustomStringConvertible {
        case receipt, signedTransaction
        var description: String { rawValue }
    }

    /// A bucket holding the fixture's two products under `shop/`.
    struct Bucket: Sendable {
        let store: ScratchBucket.Store
        let client: S3Client

        static func make() async throws -> Bucket {
            let (store, client) = try await ScratchBucket.make()
            try await client.put("shop/books/book.epub", body: ServerFixture.book, contentType: "application/epub+zip")
            try await client.put("shop/big.bin", body: ServerFixture.big, contentType: "application/octet-stream")
            return Bucket(store: store, client: client)
        }

        /// Content from this bucket, delivered by `delivery`; `endpoint` replaces the store's (a proxy).
        func configure(_ configuration: inout ServerConfiguration, delivery: ContentDelivery, endpoint: String? = nil) {
            configuration.contentFolder = "s3://\(client.bucket)/shop"
            configuration.objectStore = try? ObjectStoreSettings(
                endpoint: endpoint ?? store.endpoint, region: "us-east-1", credentials: store.credentials)
            configuration.contentDelivery = delivery
            configuration.objectPollInterval = .milliseconds(200)
        }
    }

    static func post(
        _ fixture: DownloadFixture, _ purchase: SimulatorControl.Purchase, _ proof: Proof, product: String = DownloadFixture.book
    ) async throws
        -> TestResponse
    {
        switch proof {
        case .receipt: try await fixture.post(purchase, product: product)
        case .signedTransaction: try await fixture.post(["productId": product, "signedTransaction": purchase.signedTransaction])
        }
    }

    /// Whether `condition` holds within 10 s, asked every 100 ms.
    static func eventually(_ condition: () async throws -> Bool) async throws -> Bool {
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            if try await condition() { return true }
            try await Task.sleep(for: .milliseconds(100))
        }
        return false
    }

    /// An unsigned GET, as an app that followed the redirect sends it.
    static func fetch(_ url: String, range: String? = nil) async throws -> UpstreamResponse {
        try await CurlHTTPClient(configuration: .init(maximumResponseBytes: 16 << 20))
            .send(UpstreamRequest(method: .get, url: url, headers: range.map { [("Range", $0)] } ?? []))
    }

    // MARK: Stream

    @Test(arguments: LedgerEngine.allCases, Proof.allCases)
    func aStreamedDownloadIsTheObjectWithTheDigestStockroomComputed(_ engine: LedgerEngine, _ proof: Proof) async throws {
        let bucket = try await Bucket.make()
        try await DownloadFixture.run(engine: engine, { bucket.configure(&$0, delivery: .stream) }) { fixture in
            let purchase = try await fixture.control.purchase(DownloadFixture.book)
            let response = try await Self.post(fixture, purchase, proof)
            #expect(response.status == .ok)
            #expect(Array(buffer: response.body) == ServerFixture.book)
            #expect(response.headers[.eTag] == "\"\(ByteEncoding.hex(SHA256.hash(ServerFixture.book)))\"")
            #expect(response.headers[.init("Repr-Digest")!] == "sha-256=:\(ByteEncoding.base64(SHA256.hash(ServerFixture.book))):")
            #expect(try await fixture.eventually { try await fixture.ledger.fulfilment(purchase.transactionId)?.state == .delivered })
            #expect(try await fixture.ledger.fulfilment(purchase.transactionId)?.bytesDelivered == 20_000)

            // A resume with Range is forwarded to the store as a range: 206 and those bytes.
            let token = try #require(response.headers[.init("X-Download-Token")!])
            let partial = try await fixture.get(
                "/v1/downloads/\(purchase.transactionId)/content", token: token, headers: [.range: "bytes=19000-"])
            #expect(partial.status == .partialContent)
            #expect(partial.headers[.contentRange] == "bytes 19000-19999/20000")
            #expect(Array(buffer: partial.body) == Array(ServerFixture.book[19000...]))
        }
    }

    /// Live, the store's thread writes to the connection below Hummingbird (`DirectStream`);
    /// without a socket (router), the pieces go through Hummingbird's writer (`ChunkPipe`).
    @Test(arguments: [("live", TestingSetup.live), ("router", TestingSetup.router)])
    func aLargeObjectStreamsInChunksWholeAndByRange(_ path: String, _ mode: TestingSetup) async throws {
        let bucket = try await Bucket.make()
        try await DownloadFixture.run(engine: .sqlite, server: mode, { bucket.configure(&$0, delivery: .stream) }) { fixture in
            let purchase = try await fixture.control.purchase("com.example.big")
            let response = try await fixture.post(purchase, product: "com.example.big")
            #expect(response.status == .ok)
            #expect(Array(buffer: response.body) == ServerFixture.big)
            let token = try #require(response.headers[.init("X-Download-Token")!])
            // Across chunk boundaries (1 MiB each).
            let partial = try await fixture.get(
                "/v1/downloads/\(purchase.transactionId)/content", token: token, headers: [.range: "bytes=1048000-3146000"])
            #expect(partial.status == .partialContent)
            #expect(Array(buffer: partial.body) == Array(ServerFixture.big[1_048_000...3_146_000]))
        }
    }

    // MARK: Redirect

    @Test(arguments: LedgerEngine.allCases, Proof.allCases)
    func aRedirectHandsAPresignedURLForThatObjectAndTheAckRecordsTheDelivery(_ engine: LedgerEngine, _ proof: Proof) async throws {
        let bucket = try await Bucket.make()
        try await DownloadFixture.run(engine: engine, { bucket.configure(&$0, delivery: .redirect) }) { fixture in
            let purchase = try await fixture.control.purchase(DownloadFixture.book)
            let response = try await Self.post(fixture, purchase, proof)
            #expect(response.status == .seeOther)
            #expect(response.body.readableBytes == 0)
            let location = try #require(response.headers[.location])
            #expect(location.hasPrefix("\(bucket.store.endpoint)/\(bucket.client.bucket)/shop/books/book.epub?"))
            #expect(location.contains("X-Amz-Signature="))
            #expect(response.headers[.contentLocation] == "/v1/downloads/\(purchase.transactionId)/content")
            #expect(response.headers[.eTag] == "\"\(ByteEncoding.hex(SHA256.hash(ServerFixture.book)))\"")
            #expect(response.headers[.init("Repr-Digest")!] == "sha-256=:\(ByteEncoding.base64(SHA256.hash(ServerFixture.book))):")
            #expect(response.headers[.init("X-Content-Size")!] == "20000")
            #expect(response.headers[.init("X-Transaction-Id")!] == purchase.transactionId)
            let token = try #require(response.headers[.init("X-Download-Token")!])

            // The store serves the bytes, and the ranges, to whoever holds the URL, with no credential.
            let whole = try await Self.fetch(location)
            #expect(whole.status == 200)
            #expect(whole.body == ServerFixture.book)
            // Stockroom served none: verified, not delivered, until the app acknowledges.
            #expect(try await fixture.ledger.fulfilment(purchase.transactionId)?.state == .verified)
            #expect(try await fixture.ledger.fulfilment(purchase.transactionId)?.bytesDelivered == 0)

            // A resume is a fresh URL (307), and the store honours Range on it.
            let again = try await fixture.get("/v1/downloads/\(purchase.transactionId)/content", token: token)
            #expect(again.status == .temporaryRedirect)
            let fresh = try #require(again.headers[.location])
            let partial = try await Self.fetch(fresh, range: "bytes=19000-")
            #expect(partial.status == 206)
            #expect(partial.body == Array(ServerFixture.book[19000...]))

            let ack = try await fixture.ack(purchase.transactionId, token: token)
            #expect(ack.status == .ok)
            let row = try #require(try await fixture.ledger.fulfilment(purchase.transactionId))
            #expect(row.state == .acknowledged)
            #expect(row.deliveredAt != nil)
        }
    }

    @Test func aPresignedURLLivesNoLongerThanTheTokenNorThePresignLifetime() async throws {
        let bucket = try await Bucket.make()
        try await DownloadFixture.run(
            engine: .sqlite,
            {
                bucket.configure(&$0, delivery: .redirect)
                $0.tokenLifetime = .seconds(120)
                $0.presignLifetime = .seconds(900)
            }
        ) { fixture in
            let purchase = try await fixture.control.purchase(DownloadFixture.book)
            let location = try #require(try await fixture.post(purchase).headers[.location])
            let expires = try #require(
                URLComponents(string: location)?.queryItems?.first { $0.name == "X-Amz-Expires" }?.value.flatMap(Int.init))
            #expect((110...120).contains(expires))
        }
        try await DownloadFixture.run(
            engine: .sqlite,
            {
                bucket.configure(&$0, delivery: .redirect); $0.presignLifetime = .seconds(30)
            }
        ) { fixture in
            let purchase = try await fixture.control.purchase(DownloadFixture.book)
            let location = try #require(try await fixture.post(purchase).headers[.location])
            #expect(URLComponents(string: location)?.queryItems?.first { $0.name == "X-Amz-Expires" }?.value == "30")
        }
    }

    // MARK: Faults

    @Test(arguments: LedgerEngine.allCases, ContentDelivery.allCases)
    func aMissingObjectIs503ContentUnavailableAndChangesNothing(_ engine: LedgerEngine, _ delivery: ContentDelivery) async throws {
        let bucket = try await Bucket.make()
        try await DownloadFixture.run(engine: engine, { bucket.configure(&$0, delivery: delivery) }) { fixture in
            // One purchase downloaded, so that a resume has a token and a row.
            let first = try await fixture.control.purchase(DownloadFixture.book)
            let token = try #require(try await fixture.post(first).headers[.init("X-Download-Token")!])
            let second = try await fixture.control.purchase(DownloadFixture.book)
            // A redirect logs no attempt (the store sent the bytes): nothing to settle.
            let before = delivery == .stream ? try await fixture.settledSnapshot() : try await fixture.snapshot()
            let callsBefore = try await fixture.control.calls().total

            try await bucket.client.delete("shop/books/book.epub")
            // Past the 250 ms for which a good HEAD is shared (ObjectHeads).
            try await Task.sleep(for: .milliseconds(300))
            let refused = try await fixture.post(second)
            #expect(refused.status == .serviceUnavailable)
            #expect(refused.headers[.retryAfter] == "5")
            #expect(String(buffer: refused.body).contains(#""code":"content_unavailable""#))
            #expect(!String(buffer: refused.body).contains("shop/books"))
            let resume = try await fixture.get("/v1/downloads/\(first.transactionId)/content", token: token)
            #expect(resume.status == .serviceUnavailable)
            try await Task.sleep(for: .milliseconds(300))
            #expect(try await fixture.snapshot() == before)
            #expect(try await fixture.control.calls().total == callsBefore)
        }
    }

    /// `stockroom serve` as an operator runs it: the flags, the AWS variables, the catalogue in the
    /// bucket, redirects that `curl -L` follows; a missing object is counted in the metric and named
    /// in the log, and neither the secret nor a presigned URL's signature is in them, nor in `--help`.
    @Test func serveReadsTheStoreFromItsFlagsAndNamesAMissingKeyInItsLogNotItsSecret() async throws {
        let bucket = try await Bucket.make()
        try await bucket.client.put(
            "shop/products.json",
            body: Array(ServerFixture.catalog([ServerFixture.entry("com.example.stockroom.demo.book1", file: "books/book.epub")]).utf8),
            contentType: "application/json")
        let folder = try TemporaryFolder()
        let port = try FreePort.make(SOCK_STREAM)
        let server = try StockroomProcess.serve(
            try StockroomProcess.binary(), folder: folder.path, port: port,
            arguments: [
                "--upstream", "simulator", "--content", "s3://\(bucket.client.bucket)/shop", "--catalog",
                "s3://\(bucket.client.bucket)/shop/products.json",
                "--s3-endpoint", bucket.store.endpoint, "--database", folder.path + "/ledger.sqlite", "--bundle-id",
                "com.example.stockroom.demo",
                "--upstream-rate", "off", "--content-delivery", "redirect",
            ],
            environment: bucket.store.environment.merging(["STOCKROOM_TOKEN_SECRET": ServerFixture.tokenSecret]) { $1 })
        defer { server.stop() }
        try await server.waitUntilHealthy()
        let minted = try await server.send(
            .post, "/simulator/sim/purchases", headers: [("Content-Type", "application/json")],
            body: Array(#"{"productId":"com.example.stockroom.demo.book1"}"#.utf8))
        let purchase = try #require(try JSONSerialization.jsonObject(with: Data(minted.body)) as? [String: Any])
        let body = Array(
            try JSONSerialization.data(withJSONObject: [
                "productId": "com.example.stockroom.demo.book1",
                "signedTransaction": try #require(purchase["signedTransaction"] as? String),
            ]))
        let delivered = try await server.send(.post, "/v1/downloads", headers: [("Content-Type", "application/json")], body: body)
        #expect(delivered.status == 303)
        // `curl -L`, as the README shows it, follows the redirect to the store and gets the file.
        try folder.write("download.json", body)
        let curled = try await ChildProcess.run(
            "/usr/bin/curl",
            ["-sfL", "http://127.0.0.1:\(port)/v1/downloads", "-d", "@" + folder.path + "/download.json", "-o", folder.path + "/got.epub"])
        #expect(curled.status == 0)
        #expect(FileManager.default.contents(atPath: folder.path + "/got.epub").map(Array.init) == ServerFixture.book)

        try await bucket.client.delete("shop/books/book.epub")
        try await Task.sleep(for: .milliseconds(300))  // past the 250 ms a good HEAD is shared
        #expect(try await server.send(.post, "/v1/downloads", headers: [("Content-Type", "application/json")], body: body).status == 503)
        let metrics = String(decoding: try await server.send(.get, "/metrics").body, as: UTF8.self)
        #expect(metrics.contains(#"stockroom_object_store_errors_total{operation="head",kind="missing"} 1"#))
        let log = try String(contentsOfFile: folder.path + "/serve.log", encoding: .utf8)
        #expect(log.contains("key=shop/books/book.epub"))
        #expect(!log.contains(bucket.store.credentials.secretAccessKey))
        #expect(!log.contains("X-Amz-Signature"))
        let help = try await StockroomProcess.run(
            try StockroomProcess.binary(), ["serve", "--help"], environment: bucket.store.environment)
        #expect(help.contains("--s3-endpoint"))
        #expect(!help.contains(bucket.store.credentials.secretAccessKey))
    }

    @Test(arguments: LedgerEngine.allCases, ContentDelivery.allCases)
    func aReplacedObjectIsHashedAgainBeforeItIsServed(_ engine: LedgerEngine, _ delivery: ContentDelivery) async throws {
        let bucket = try await Bucket.make()
        try await DownloadFixture.run(
            engine: engine,
            {
                bucket.configure(&$0, delivery: delivery); $0.objectPollInterval = .seconds(2)
            }
        ) { fixture in
            let purchase = try await fixture.control.purchase(DownloadFixture.book)
            let replacement = sampleBytes(count: 20_000, seed: 99)
            try await bucket.client.put("shop/books/book.epub", body: replacement, contentType: "application/epub+zip")
            let newETag = "\"\(ByteEncoding.hex(SHA256.hash(replacement)))\""
            // Until the next poll hashes it, the download is refused and unrecorded; after it, the
            // new object is published with its own digest. Never the old digest with new bytes.
            var refusals = 0
            let deadline = ContinuousClock.now + .seconds(30)
            var response = try await fixture.post(purchase)
            while response.status == .serviceUnavailable, ContinuousClock.now < deadline {
                #expect(String(buffer: response.body).contains(#""code":"content_changing""#))
                #expect(try await fixture.ledger.fulfilment(purchase.transactionId) == nil)
                refusals += 1
                try await Task.sleep(for: .milliseconds(200))
                response = try await fixture.post(purchase)
            }
            #expect(refusals > 0)  // the poll is 2 s away: the first answers come before it
            #expect(response.headers[.eTag] == newETag)
            let catalog = String(buffer: try await fixture.client.execute(uri: "/v1/catalog/\(DownloadFixture.book)", method: .get).body)
            #expect(catalog.contains(ByteEncoding.hex(SHA256.hash(replacement))))
            switch delivery {
            case .stream: #expect(Array(buffer: response.body) == replacement)
            case .redirect: #expect(try await Self.fetch(try #require(response.headers[.location])).body == replacement)
            }
        }
    }

    @Test(arguments: LedgerEngine.allCases, ContentDelivery.allCases)
    func aStoreThatIsDownAnswers503AndChangesNothing(_ engine: LedgerEngine, _ delivery: ContentDelivery) async throws {
        let bucket = try await Bucket.make()
        let port = try #require(URL(string: bucket.store.endpoint)?.port)
        let proxy = try TCPProxy(upstreamPort: port)
        defer { proxy.stop() }
        try await DownloadFixture.run(
            engine: engine, { bucket.configure(&$0, delivery: delivery, endpoint: "http://127.0.0.1:\(proxy.port)") }
        ) { fixture in
            let purchase = try await fixture.control.purchase(DownloadFixture.book)
            proxy.refuse(true)
            proxy.cutAll()
            let refused = try await fixture.post(purchase)
            #expect(refused.status == .serviceUnavailable)
            #expect(String(buffer: refused.body).contains(#""code":"content_unavailable""#))
            #expect(try await fixture.ledger.fulfilment(purchase.transactionId) == nil)
            // The catalogue keeps serving the last good version meanwhile.
            #expect(try await fixture.client.execute(uri: "/v1/catalog", method: .get).status == .ok)

            // Back within a moment (a failed HEAD is remembered for 500 ms, ObjectHeads).
            proxy.refuse(false)
            let expected: HTTPResponse.Status = delivery == .stream ? .ok : .seeOther
            #expect(try await Self.eventually { try await fixture.post(purchase).status == expected })
        }
    }

    /// A store that stops answering (connections open, no byte moving): the object's check times
    /// out (10 s) and the download is 503, unrecorded; the catalogue keeps serving.
    @Test func aStoreThatStopsAnsweringIs503WithinTheCheckTimeout() async throws {
        let bucket = try await Bucket.make()
        let port = try #require(URL(string: bucket.store.endpoint)?.port)
        let proxy = try TCPProxy(upstreamPort: port)
        defer { proxy.stop() }
        try await DownloadFixture.run(
            engine: .sqlite, { bucket.configure(&$0, delivery: .stream, endpoint: "http://127.0.0.1:\(proxy.port)") }
        ) { fixture in
            let purchase = try await fixture.control.purchase(DownloadFixture.book)
            proxy.stall(true)
            let began = ContinuousClock.now
            let refused = try await fixture.post(purchase)
            let waited = ContinuousClock.now - began
            proxy.stall(false)
            #expect(refused.status == .serviceUnavailable)
            #expect(String(buffer: refused.body).contains(#""code":"content_unavailable""#))
            #expect(waited < .seconds(20))
            #expect(try await fixture.ledger.fulfilment(purchase.transactionId) == nil)
            #expect(try await Self.eventually { try await fixture.post(purchase).status == .ok })
        }
    }

    @Test(arguments: LedgerEngine.allCases) func aStoreThatCutsMidBodyIsAskedAgainAndTheDownloadCompletes(_ engine: LedgerEngine)
        async throws
    {
        let bucket = try await Bucket.make()
        let port = try #require(URL(string: bucket.store.endpoint)?.port)
        let proxy = try TCPProxy(upstreamPort: port)
        defer { proxy.stop() }
        try await DownloadFixture.run(
            engine: engine, { bucket.configure(&$0, delivery: .stream, endpoint: "http://127.0.0.1:\(proxy.port)") }
        ) { fixture in
            let purchase = try await fixture.control.purchase("com.example.big")
            // Every connection from now on breaks after 2.5 MB of answers: chunks of 1 MiB are cut
            // mid-body on each, and asked for again on a new one.
            proxy.inject(Array(repeating: .cutAfter(2_500_000), count: 100))
            proxy.cutAll()
            let connections = proxy.connections
            let response = try await fixture.post(purchase, product: "com.example.big")
            #expect(response.status == .ok)
            #expect(Array(buffer: response.body) == ServerFixture.big)
            #expect(proxy.connections - connections >= 3)
            #expect(try await fixture.eventually { try await fixture.ledger.fulfilment(purchase.transactionId)?.state == .delivered })
        }
    }

    @Test(arguments: LedgerEngine.allCases) func aStoreThatSendsOtherBytesNeverCompletesTheDownload(_ engine: LedgerEngine) async throws {
        let bucket = try await Bucket.make()
        let port = try #require(URL(string: bucket.store.endpoint)?.port)
        let proxy = try TCPProxy(upstreamPort: port)
        defer { proxy.stop() }
        try await DownloadFixture.run(
            engine: engine, { bucket.configure(&$0, delivery: .stream, endpoint: "http://127.0.0.1:\(proxy.port)") }
        ) { fixture in
            let purchase = try await fixture.control.purchase(DownloadFixture.book)
            // The next connections flip a byte of the object's body (past the head).
            proxy.inject(Array(repeating: .flip(at: 15_000), count: 20))
            proxy.cutAll()
            do {
                let response = try await fixture.post(purchase)
                #expect(Array(buffer: response.body) != ServerFixture.book)
                #expect(response.body.readableBytes < 20_000)
            } catch {
                // The body was cut short: the connection closed before its end.
            }
            #expect(try await fixture.eventually { try await fixture.ledger.attempts(of: purchase.transactionId).count == 1 })
            #expect(try await fixture.ledger.fulfilment(purchase.transactionId)?.state == .verified)
            #expect(try await fixture.ledger.attempts(of: purchase.transactionId).map(\.outcome) == [.interrupted])
        }
    }

    // MARK: Start-up

    @Test func wrongCredentialsOrAWrongBucketRefuseToStartSayingWhich() async throws {
        let bucket = try await Bucket.make()
        var fixture = try ServerFixture()
        bucket.configure(&fixture.configuration, delivery: .stream)
        fixture.configuration.objectStore = try ObjectStoreSettings(
            endpoint: bucket.store.endpoint, region: "us-east-1",
            credentials: .init(accessKeyID: bucket.store.credentials.accessKeyID, secretAccessKey: "wrong-secret-value-123"))
        await #expect {
            _ = try await fixture.application()
        } throws: { error in
            let text = "\(error)"
            return text.contains("refused") && text.contains("credentials") && !text.contains("wrong-secret-value-123")
        }
        bucket.configure(&fixture.configuration, delivery: .stream)
        fixture.configuration.contentFolder = "s3://no-such-bucket-anywhere/shop"
        await #expect {
            _ = try await fixture.application()
        } throws: { error in
            "\(error)".contains("the bucket \"no-such-bucket-anywhere\" does not exist")
        }
        // A product whose object is missing refuses start-up, naming the key.
        bucket.configure(&fixture.configuration, delivery: .stream)
        try await bucket.client.delete("shop/big.bin")
        await #expect {
            _ = try await fixture.application()
        } throws: { error in
            "\(error)".contains("the object \"shop/big.bin\" does not exist")
        }
    }

    // MARK: Operators

    /// `stockroom content push` of 100 MiB: multipart with progress, hashed on the way, the entry
    /// added to the bucket's catalogue, then published by a server (which hashes nothing itself
    /// when it shares the state folder); a second push updates the entry; `catalog add` uploads too.
    @Test(arguments: LedgerEngine.allCases) func contentPushUploadsHashesAndPublishesAHundredMebibytes(_ engine: LedgerEngine) async throws
    {
        let bucket = try await Bucket.make()
        let folder = try TemporaryFolder()
        try await bucket.client.put("shop/products.json", body: Array(#"{"products": []}"#.utf8), contentType: "application/json")
        // 100 MiB made, written and hashed on NIO's pool: seconds of work that would hold one of
        // the cooperative pool's two threads, and slow every timed test beside this one.
        let sha256 = try await NIOThreadPool.singleton.runIfActive {
            let large = sampleBytes(count: 100 << 20, seed: 100)
            try folder.write("level.pak", large)
            return ByteEncoding.hex(SHA256.hash(large))
        }
        try folder.write("level-v2.pak", sampleBytes(count: 3_000, seed: 2))
        try folder.write("book.epub", ServerFixture.book)
        let settings = [
            "--content", "s3://\(bucket.client.bucket)/shop", "--catalog", "s3://\(bucket.client.bucket)/shop/products.json",
            "--s3-endpoint",
            bucket.store.endpoint, "--database", folder.path + "/ledger.sqlite",
        ]
        let binary = try StockroomProcess.binary()
        let pushed = try await StockroomProcess.run(
            binary,
            [
                "content", "push", folder.path + "/level.pak", "--product", "com.example.level", "--title", "Level", "--type",
                "non-consumable",
            ] + settings,
            environment: bucket.store.environment)
        #expect(pushed.contains("pushed com.example.level: s3://\(bucket.client.bucket)/shop/level.pak, 104857600 bytes"))
        #expect(pushed.contains("sha256 \(sha256)"))
        #expect(try await bucket.client.head("shop/level.pak").size == 104_857_600)

        // `catalog add` with content in a bucket uploads there as well (to a key of its own: an
        // object the catalogue does not name, as books/book.epub here, is never written over).
        _ = try await StockroomProcess.run(
            binary,
            [
                "catalog", "add", "--product-id", DownloadFixture.book, "--file", folder.path + "/book.epub", "--title", "Book", "--type",
                "non-consumable", "--path", "books/added.epub",
            ]
                + settings, environment: bucket.store.environment)

        let catalogKey = "shop/products.json"
        try await DownloadFixture.run(
            engine: engine,
            {
                bucket.configure(&$0, delivery: .redirect)
                $0.catalogFolder = "s3://\(bucket.client.bucket)/\(catalogKey)"
            }
        ) { fixture in
            let product = String(buffer: try await fixture.client.execute(uri: "/v1/catalog/com.example.level", method: .get).body)
            #expect(product.contains(#""sha256":"\#(sha256)""#))
            #expect(product.contains(#""size":104857600"#))
            let purchase = try await fixture.control.purchase(DownloadFixture.book)
            let location = try #require(try await fixture.post(purchase).headers[.location])
            #expect(try await Self.fetch(location).body == ServerFixture.book)

            // A second push of the same product replaces its object and bumps its version.
            _ = try await StockroomProcess.run(
                binary,
                ["content", "push", folder.path + "/level-v2.pak", "--product", "com.example.level", "--key", "level.pak"] + settings,
                environment: bucket.store.environment)
            let deadline = ContinuousClock.now + .seconds(30)
            var updated = ""
            while !updated.contains(#""contentVersion":"2""#), ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(200))
                updated = String(buffer: try await fixture.client.execute(uri: "/v1/catalog/com.example.level", method: .get).body)
            }
            #expect(updated.contains(#""size":3000"#))
            #expect(updated.contains(ByteEncoding.hex(SHA256.hash(sampleBytes(count: 3_000, seed: 2)))))
        }
    }

    /// `stockroom doctor` checks the bucket, the credentials and a signed HEAD of every object.
    @Test func doctorChecksTheBucketTheCredentialsAndEachObject() async throws {
        let bucket = try await Bucket.make()
        var fixture = try ServerFixture()
        bucket.configure(&fixture.configuration, delivery: .redirect)
        fixture.configuration.upstream = .simulator
        func finding(_ configuration: ServerConfiguration) async -> Doctor.Finding? {
            await Doctor(configuration: configuration, trustRootFiles: []).run().first { $0.check == "object storage" }
        }
        let good = try #require(await finding(fixture.configuration))
        #expect(good.passed)
        #expect(good.detail.contains("all 2 products' objects answer a signed HEAD"))

        var wrong = fixture.configuration
        wrong.objectStore = try ObjectStoreSettings(
            endpoint: bucket.store.endpoint, region: "us-east-1",
            credentials: .init(accessKeyID: bucket.store.credentials.accessKeyID, secretAccessKey: "doctor-wrong-secret-000"))
        let denied = try #require(await finding(wrong))
        #expect(!denied.passed)
        #expect(denied.detail.contains("check the credentials"))
        #expect(!denied.detail.contains("doctor-wrong-secret-000"))

        try await bucket.client.delete("shop/big.bin")
        let missing = try #require(await finding(fixture.configuration))
        #expect(!missing.passed)
        #expect(missing.detail.contains("shop/big.bin: the object \"shop/big.bin\" does not exist"))
    }

    // MARK: Several instances

    @Test func twoInstancesOnOneLedgerAndOneBucketShareNoFolder() async throws {
        let bucket = try await Bucket.make()
        let catalogKey = "shop/products.json"
        try await bucket.client.put(
            catalogKey, body: Array(ServerFixture.catalog([ServerFixture.entry(DownloadFixture.book, file: "books/book.epub")]).utf8),
            contentType: "application/json")
        let configure: @Sendable (inout ServerConfiguration) -> Void = { configuration in
            bucket.configure(&configuration, delivery: .stream)
            configuration.catalogFolder = "s3://\(bucket.client.bucket)/\(catalogKey)"
        }
        try await DownloadFixture.run(engine: .postgres, configure) { first in
            // The second instance: its own state folder, the same database and token secret.
            let state = try TemporaryFolder()
            var other = try ServerFixture()
            configure(&other.configuration)
            other.configuration.databaseLocation = first.databaseLocation
            other.configuration.stateFolder = state.path
            other.configuration.catalogFolder = "s3://\(bucket.client.bucket)/\(catalogKey)"
            other.configuration.upstream = .url(first.control.baseURL)
            let trust = try await first.control.trust(bundleID: "com.example.stockroom.demo")
            other.configuration.trustedRoots = [trust.root]
            other.configuration.serverAPICredentials = trust.credentials
            let second = other
            try await second.application().test(.live) { secondClient in
                let purchase = try await first.control.purchase(DownloadFixture.book)
                let started = try await first.post(purchase)
                #expect(started.status == .ok)
                let token = try #require(started.headers[.init("X-Download-Token")!])
                // Resumed through the other instance.
                let resumed = try await secondClient.execute(
                    uri: "/v1/downloads/\(purchase.transactionId)/content", method: .get,
                    headers: [.authorization: "Bearer \(token)", .range: "bytes=10000-"])
                #expect(resumed.status == .partialContent)
                #expect(Array(buffer: resumed.body) == Array(ServerFixture.book[10000...]))

                // A product pushed with `stockroom content push` is published by both after their poll.
                let pushed = try TemporaryFolder()
                let level = sampleBytes(count: 30_000, seed: 30)
                let file = try pushed.write("level.pak", level)
                _ = try await StockroomProcess.run(
                    try StockroomProcess.binary(),
                    [
                        "content", "push", file, "--product", "com.example.big", "--title", "Level", "--type", "non-consumable",
                        "--content", "s3://\(bucket.client.bucket)/shop", "--catalog", "s3://\(bucket.client.bucket)/\(catalogKey)",
                        "--s3-endpoint", bucket.store.endpoint, "--database", pushed.path + "/ledger.sqlite",
                    ], environment: bucket.store.environment)
                for client in [first.client, secondClient] {
                    var status = HTTPResponse.Status.notFound
                    var body = ""
                    let deadline = ContinuousClock.now + .seconds(30)
                    while status != .ok, ContinuousClock.now < deadline {
                        try await Task.sleep(for: .milliseconds(200))
                        let answer = try await client.execute(uri: "/v1/catalog/com.example.big", method: .get)
                        (status, body) = (answer.status, String(buffer: answer.body))
                    }
                    #expect(status == .ok)
                    #expect(body.contains(ByteEncoding.hex(SHA256.hash(level))))
                }
            }
        }
    }
}
