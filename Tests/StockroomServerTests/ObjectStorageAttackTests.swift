import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import StockroomCore
import StockroomPostgresTestSupport
import StockroomTestSupport
import Testing
@testable import StockroomServer

/// A hostile review of content in S3-compatible object storage: each case is an attack or a
/// fault a stranger (or an unlucky operator) can bring, written when it succeeded and kept to
/// show that it no longer does. Uses the throwaway SeaweedFS store (`.ci/s3`).
@Suite struct ObjectStorageAttackTests {
    /// A bucket holding the book under `shop/books/book.epub` and the big file under `shop/big.bin`.
    static func bucket() async throws -> (store: ScratchBucket.Store, client: S3Client) {
        let (store, client) = try await ScratchBucket.make()
        try await client.put("shop/books/book.epub", body: ServerFixture.book, contentType: "application/epub+zip")
        try await client.put("shop/big.bin", body: ServerFixture.big, contentType: "application/octet-stream")
        return (store, client)
    }

    static func configure(
        _ configuration: inout ServerConfiguration, _ bucket: (store: ScratchBucket.Store, client: S3Client), delivery: ContentDelivery
    ) {
        configuration.contentFolder = "s3://\(bucket.client.bucket)/shop"
        configuration.objectStore = try? ObjectStoreSettings(
            endpoint: bucket.store.endpoint, region: "us-east-1", credentials: bucket.store.credentials)
        configuration.contentDelivery = delivery
        configuration.objectPollInterval = .milliseconds(200)
    }

    /// Stream mode from a scripted store on `port` (bucket `fakebucket`, any credentials).
    static func streaming(fromScriptedStoreOn port: Int) -> @Sendable (inout ServerConfiguration) -> Void {
        { configuration in
            configuration.contentFolder = "s3://fakebucket/shop"
            configuration.objectStore = try? ObjectStoreSettings(
                endpoint: "http://127.0.0.1:\(port)", region: "us-east-1",
                credentials: .init(accessKeyID: "AKID", secretAccessKey: "secret"))
            configuration.contentDelivery = .stream
        }
    }

    /// What the simulator (Apple) knows of a transaction.
    static func apple(_ fixture: DownloadFixture, _ transactionID: String) async throws -> [String: Any] {
        let response = try await fixture.control.client.execute(uri: "/sim/transactions/\(transactionID)", method: .get)
        return try JSONSerialization.jsonObject(with: Data(buffer: response.body)) as? [String: Any] ?? [:]
    }

    // MARK: 1. Redirect: the buyer who never acknowledges

    /// With `--content-delivery redirect` the store hands every byte to the buyer, yet the ledger
    /// records nothing unless the app acknowledges. A buyer who follows the 303 (`curl -L`, a patched
    /// app) and never acknowledges, then asks Apple for a refund, must not be answered as
    /// `UNDELIVERED_SERVER_OUTAGE` (the failure was Stockroom's own) for a buyer who may hold the
    /// whole file, nor `UNDELIVERED_OTHER` (nothing went out): Stockroom cannot tell, and says
    /// nothing, recording the call skipped with why.
    @Test(arguments: LedgerEngine.allCases) func aRedirectedBuyerWhoNeverAcknowledgesIsNotReportedToAppleAsAServerOutage(
        _ engine: LedgerEngine
    ) async throws {
        let bucket = try await Self.bucket()
        try await DownloadFixture.run(engine: engine, { Self.configure(&$0, bucket, delivery: .redirect) }) { fixture in
            let purchase = try await fixture.control.purchase(DownloadFixture.book)
            let claim: [String: Any] = [
                "productId": DownloadFixture.book, "signedTransaction": purchase.signedTransaction, "consent": true,
            ]
            let response = try await fixture.client.execute(
                uri: "/v1/downloads", method: .post, body: ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: claim)))
            #expect(response.status == .seeOther)
            let location = try #require(response.headers[.location])
            // The buyer takes the whole file from the store, with no credential, and never acknowledges.
            let whole = try await CurlHTTPClient(configuration: .init(maximumResponseBytes: 16 << 20)).send(
                UpstreamRequest(method: .get, url: location))
            #expect(whole.status == 200)
            #expect(whole.body == ServerFixture.book)

            // Then asks Apple for a refund.
            let minted = try await fixture.control.client.execute(
                uri: "/sim/notifications", method: .post,
                body: ByteBuffer(
                    bytes: try JSONSerialization.data(withJSONObject: [
                        "type": "CONSUMPTION_REQUEST", "transactionId": purchase.transactionId,
                    ])))
            #expect(minted.status == .created)
            #expect(try await fixture.client.execute(uri: "/v1/notifications/appstore", method: .post, body: minted.body).status == .ok)
            #expect(
                try await LifecycleTests.eventually {
                    try await fixture.ledger.serverCalls(ServerCallListQuery(kind: .consumption)).first?.status == .skipped
                })
            let call = try #require(try await fixture.ledger.serverCalls(ServerCallListQuery(kind: .consumption)).first)
            #expect(call.lastError?.contains("presigned URL") == true, "\(call.lastError ?? "")")
            // Stockroom handed out a presigned URL and the store served every byte: Apple hears nothing.
            #expect(try await Self.apple(fixture, purchase.transactionId)["consumptionAnswers"] as? Int == 0)
            #expect(try await fixture.ledger.fulfilment(purchase.transactionId)?.handedOffAt != nil)
        }
    }

    // MARK: 1b. A stranger's flood reaches the store while an object is missing

    /// `POST /v1/downloads` checks the object (a HEAD) before anything is verified, so a stranger
    /// with no purchase reaches the store. `ObjectHeads` shares a good answer for 250 ms and a
    /// failure for 500 ms: while an object is missing (or denied, or the store answers 5xx
    /// quickly), strangers' requests cost the store a few HEADs a second, not one each.
    @Test func strangersRequestsForAMissingObjectCostTheStoreAFewHeadsNotOneEach() async throws {
        let bucket = try await Self.bucket()
        let port = try #require(URL(string: bucket.store.endpoint)?.port)
        let proxy = try TCPProxy(upstreamPort: port)
        defer { proxy.stop() }
        try await DownloadFixture.run(
            engine: .sqlite,
            { configuration in
                Self.configure(&configuration, bucket, delivery: .redirect)
                configuration.objectStore = try? ObjectStoreSettings(
                    endpoint: "http://127.0.0.1:\(proxy.port)", region: "us-east-1", credentials: bucket.store.credentials)
                // The catalogue's own poll HEADs every object; only the requests' HEADs are counted here.
                configuration.objectPollInterval = .seconds(3600)
            }
        ) { fixture in
            try await bucket.client.delete("shop/books/book.epub")
            try await Task.sleep(for: .milliseconds(300))
            let before = proxy.requests.filter { $0.method == "HEAD" }.count
            let started = ContinuousClock.now
            for _ in 0..<40 {
                // No purchase at all: a made-up receipt.
                let refused = try await fixture.post(["productId": DownloadFixture.book, "receiptData": "AAAA"])
                #expect(refused.status == .serviceUnavailable)
            }
            let elapsed = ContinuousClock.now - started
            let heads = proxy.requests.filter { $0.method == "HEAD" }.count - before
            // A good answer is shared for 250 ms: at most a few a second would match that promise.
            let allowed = Int(elapsed.components.seconds) * 4 + 4
            #expect(heads <= allowed, "40 strangers' requests in \(elapsed) cost the store \(heads) HEADs")
        }
    }

    // MARK: 1c. Stream mode: a store that ignores Range must not overrun the response

    /// A stream reads one GET per response. A store (or a proxy or CDN before it) that ignores
    /// `Range` answers 200 with the whole object; passed on as it came, `Range: bytes=0-99` would be
    /// answered `206`, `Content-Length: 100`, followed by the whole object, and the bytes past the
    /// declared length would read as the keep-alive connection's next response (a desync, for a
    /// shared proxy connection too). Shown with a minimal S3 stand-in that answers every GET 200.
    @Test func aStoreThatIgnoresRangeNeverMakesAResponseLongerThanItsContentLength() async throws {
        let folder = try TemporaryFolder()
        let storePort = try FreePort.make(SOCK_STREAM)
        let script = try folder.write(
            "store.py",
            """
            import sys
            from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
            objects = {"/fakebucket/shop/books/book.epub": bytes(range(256)) * 80, "/fakebucket/shop/big.bin": b"x" * 1000}
            class Store(BaseHTTPRequestHandler):
                protocol_version = "HTTP/1.1"
                def log_message(self, *args): pass
                def head(self, body):
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(body)))
                    self.send_header("ETag", '"0123456789abcdef0123456789abcdef"')
                    self.end_headers()
                def do_HEAD(self):
                    self.head(objects.get(self.path.split("?")[0], b""))
                def do_GET(self):
                    body = objects.get(self.path.split("?")[0], b"")
                    self.head(body)  # 200 and the whole object, whatever Range asked
                    self.wfile.write(body)
            ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Store).serve_forever()
            """)
        let store = try ChildProcess("/usr/bin/python3", [script, String(storePort)])
        defer { store.terminate(SIGKILL) }
        try await Task.sleep(for: .milliseconds(700))
        let reader = try folder.write(
            "raw.py",
            """
            import socket, sys
            s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
            s.sendall(("GET %s HTTP/1.1\\r\\nHost: x\\r\\nAuthorization: Bearer %s\\r\\nRange: bytes=0-99\\r\\n\\r\\n" % (sys.argv[2], \
            sys.argv[3])).encode())
            # Up to 30 s for the answer to start (a loaded suite is slow), then 2 s of silence ends it:
            # the connection stays open, so silence, not a close, says nothing more is coming.
            s.settimeout(30)
            data = b""
            try:
                while True:
                    d = s.recv(65536)
                    if not d: break
                    data += d
                    s.settimeout(2)
            except Exception: pass
            head, _, body = data.partition(b"\\r\\n\\r\\n")
            print(head.split(b"\\r\\n")[0].decode(), [l.decode() for l in head.split(b"\\r\\n") if \
            l.lower().startswith(b"content-length")], len(body))
            """)
        try await DownloadFixture.run(
            engine: .sqlite,
            Self.streaming(fromScriptedStoreOn: storePort)
        ) { fixture in
            let purchase = try await fixture.control.purchase(DownloadFixture.book)
            let claimed = try await fixture.post(purchase)
            #expect(claimed.status == .ok)
            let token = try #require(claimed.headers[.init("X-Download-Token")!])
            let port = try #require(fixture.client.port)
            let raw = try await ChildProcess.run(
                "/usr/bin/python3", [reader, String(port), "/v1/downloads/\(purchase.transactionId)/content", token])
            // "HTTP/1.1 206 Partial Content ['Content-Length: 100'] N": N bytes came after the head.
            let received = Int(raw.output.split(separator: " ").last.map { $0.trimmingCharacters(in: .whitespacesAndNewlines) } ?? "") ?? -1
            #expect(raw.output.contains("206"), "\(raw.output)")
            #expect(received == 100, "the 100-byte range was answered with \(received) bytes after the head: \(raw.output)")
        }
    }

    // MARK: 2. content push: a refused catalogue must leave the live object alone

    /// A typo in `--type` (or an invalid product ID, a catalogue edited meanwhile) for a published
    /// product must change nothing: were the upload made first, to the product's live key, every
    /// server would answer 503 `content_changing` and then publish the new bytes under the old
    /// entry, content published by a command that reported failure.
    @Test func aPushRefusedForATypoLeavesThePublishedObjectAlone() async throws {
        let bucket = try await Self.bucket()
        let folder = try TemporaryFolder()
        try await bucket.client.put(
            "shop/products.json",
            body: Array(ServerFixture.catalog([ServerFixture.entry(DownloadFixture.book, file: "books/book.epub")]).utf8),
            contentType: "application/json")
        let before = try await bucket.client.head("shop/books/book.epub")
        try folder.write("new.epub", sampleBytes(count: 5_000, seed: 9))
        let settings = [
            "--content", "s3://\(bucket.client.bucket)/shop", "--catalog", "s3://\(bucket.client.bucket)/shop/products.json",
            "--s3-endpoint",
            bucket.store.endpoint, "--database", folder.path + "/ledger.sqlite",
        ]
        let binary = try StockroomProcess.binary()
        await #expect(throws: (any Error).self) {
            _ = try await StockroomProcess.run(
                binary,
                ["content", "push", folder.path + "/new.epub", "--product", DownloadFixture.book, "--type", "nonconsumable"] + settings,
                environment: bucket.store.environment)
        }
        // The catalogue was not changed, so the object it publishes must not have been either.
        let after = try await bucket.client.head("shop/books/book.epub")
        #expect(after == before, "the refused push replaced the live object: \(before) -> \(after)")
    }

    // MARK: 3. content push must not read every other object in the bucket

    /// `content push` of one new product checks the other entries with a HEAD each; validating
    /// with the server's loader would stream (GET) every object whose digest is not in the local
    /// digest cache: every push would download the whole bucket (egress paid on S3).
    @Test func aPushOfOneProductDoesNotDownloadTheOtherProductsObjects() async throws {
        let bucket = try await Self.bucket()
        let port = try #require(URL(string: bucket.store.endpoint)?.port)
        let proxy = try TCPProxy(upstreamPort: port)
        defer { proxy.stop() }
        let folder = try TemporaryFolder()
        try await bucket.client.put(
            "shop/products.json",
            body: Array(ServerFixture.catalog([ServerFixture.entry("com.example.big", file: "big.bin", title: "Big")]).utf8),
            contentType: "application/json")
        try folder.write("level.pak", sampleBytes(count: 3_000, seed: 3))
        let settings = [
            "--content", "s3://\(bucket.client.bucket)/shop", "--catalog", "s3://\(bucket.client.bucket)/shop/products.json",
            "--s3-endpoint",
            "http://127.0.0.1:\(proxy.port)", "--database", folder.path + "/ledger.sqlite",
        ]
        _ = try await StockroomProcess.run(
            try StockroomProcess.binary(),
            [
                "content", "push", folder.path + "/level.pak", "--product", "com.example.level", "--title", "Level", "--type",
                "non-consumable",
            ] + settings,
            environment: bucket.store.environment)
        let reads = proxy.requests.filter { $0.method == "GET" && $0.path.hasSuffix("/shop/big.bin") }
        #expect(reads.isEmpty, "content push of com.example.level read big.bin: \(reads.map(\.description))")
    }

    /// The catalogue is written back "only over the ETag it read": shown against the test store, a
    /// PUT with the ETag of a version another operator already replaced must be refused.
    @Test func aCatalogueWriteOverAReplacedVersionIsRefused() async throws {
        let bucket = try await Self.bucket()
        let first = try await bucket.client.put(
            "shop/products.json", body: Array(#"{"products": []}"#.utf8), contentType: "application/json")
        _ = try await bucket.client.put("shop/products.json", body: Array(#"{"products": [ ]}"#.utf8), contentType: "application/json")
        await #expect(throws: ObjectStoreError.changed(key: "shop/products.json")) {
            _ = try await bucket.client.put(
                "shop/products.json", body: Array(#"{"products":[]}"#.utf8), contentType: "application/json", ifMatch: first)
        }
    }

    // MARK: 4. Presigned URLs for an endpoint with an explicit default port or an IPv6 address

    /// `--s3-endpoint https://s3.example.com:443` (or `http://host:80`): libcurl (and URLSession)
    /// send `Host: host` without a default port, so a presigned URL that signed `host:PORT` would be
    /// refused by every store while stream mode, doctor and start-up (signed by libcurl from the Host
    /// it sends) all pass. Shown with a forwarder on port 80 in front of the test store.
    @Test func aPresignedURLForAnEndpointWithItsDefaultPortIsAccepted() async throws {
        let bucket = try await Self.bucket()
        let upstream = try #require(URL(string: bucket.store.endpoint)?.port)
        let folder = try TemporaryFolder()
        let script = try folder.write(
            "forward.py",
            """
            import socket, sys, threading
            up = int(sys.argv[1])
            s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("127.0.0.1", 80)); s.listen(16)
            def pipe(a, b):
                try:
                    while True:
                        d = a.recv(65536)
                        if not d: break
                        b.sendall(d)
                except Exception: pass
                try: b.shutdown(socket.SHUT_WR)
                except Exception: pass
            while True:
                c, _ = s.accept()
                u = socket.create_connection(("127.0.0.1", up))
                threading.Thread(target=pipe, args=(c, u), daemon=True).start()
                threading.Thread(target=pipe, args=(u, c), daemon=True).start()
            """)
        let forwarder = try ChildProcess("/usr/bin/python3", [script, String(upstream)])
        defer { forwarder.terminate(SIGKILL) }
        try await Task.sleep(for: .milliseconds(500))

        let settings = try ObjectStoreSettings(endpoint: "http://127.0.0.1:80", region: "us-east-1", credentials: bucket.store.credentials)
        let client = S3Client(settings: settings, bucket: bucket.client.bucket)
        // Requests libcurl signs itself pass through the forwarder.
        #expect(try await client.head("shop/books/book.epub").size == 20_000)
        // A presigned URL, as the 303 hands it to the app.
        let url = try #require(client.presignedGET("shop/books/book.epub", lifetime: .seconds(60)))
        let fetched = try await CurlHTTPClient(configuration: .init(maximumResponseBytes: 16 << 20)).send(
            UpstreamRequest(method: .get, url: url.absoluteString))
        #expect(
            fetched.status == 200,
            "the store refused the presigned URL \(url.host ?? "")…: \(String(decoding: fetched.body.prefix(400), as: UTF8.self))")
        // Control: the same endpoint written without its default port is signed as curl sends it.
        let bare = S3Client(
            settings: try ObjectStoreSettings(endpoint: "http://127.0.0.1", region: "us-east-1", credentials: bucket.store.credentials),
            bucket: bucket.client.bucket)
        let bareURL = try #require(bare.presignedGET("shop/books/book.epub", lifetime: .seconds(60)))
        #expect(
            try await CurlHTTPClient(configuration: .init(maximumResponseBytes: 16 << 20)).send(
                UpstreamRequest(method: .get, url: bareURL.absoluteString)
            ).status == 200)
    }

    /// Keys with every character `ObjectKey` allows besides letters and digits: signed requests
    /// (libcurl's SigV4) and presigned URLs (`SigV4.encode`) must name the same object.
    @Test func aKeyWithEveryAllowedPunctuationIsSignedAndPresignedAlike() async throws {
        let bucket = try await Self.bucket()
        let key = "shop/a+b=c,d@e!f~g_h-i.j"
        #expect(ObjectKey.isValid(key))
        try await bucket.client.put(key, body: Array("the right object".utf8), contentType: "application/octet-stream")
        #expect(try await bucket.client.head(key).size == 16)
        #expect(try await bucket.client.read(key, range: 0...2, ifMatch: nil) == Array("the".utf8))
        let url = try #require(bucket.client.presignedGET(key, lifetime: .seconds(60)))
        let fetched = try await CurlHTTPClient(configuration: .init(maximumResponseBytes: 16 << 20)).send(
            UpstreamRequest(method: .get, url: url.absoluteString))
        #expect(fetched.status == 200, "\(String(decoding: fetched.body.prefix(300), as: UTF8.self))")
        #expect(fetched.body == Array("the right object".utf8))
    }

    /// `--s3-endpoint http://[::1]:PORT`: the presigned URL's authority keeps the brackets (rebuilt
    /// from `URL.host` without them, no URL could be made, and every redirect claim would be
    /// recorded and then answered 503).
    @Test func aPresignedURLForAnIPv6EndpointKeepsItsBrackets() throws {
        let settings = try ObjectStoreSettings(
            endpoint: "http://[::1]:9000", region: "us-east-1", credentials: .init(accessKeyID: "AKID", secretAccessKey: "secret"))
        #expect(settings.base(bucket: "shop").origin == "http://[::1]:9000")
        let url = S3Client(settings: settings, bucket: "shop").presignedGET("books/book.epub", lifetime: .seconds(60))
        #expect(
            url?.absoluteString.hasPrefix("http://[::1]:9000/shop/books/book.epub?") == true, "presigned: \(url?.absoluteString ?? "nil")")
    }
}
