import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import StockroomCore
import StockroomPostgresTestSupport
import StockroomTestSupport
import Testing
@testable import StockroomServer

/// A hostile review of issue 29 (content in S3-compatible object storage): each case shows a
/// defect, and fails until it is fixed. Uses the throwaway SeaweedFS store (`.ci/s3`).
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
        configuration.objectStore = try? ObjectStoreSettings(endpoint: bucket.store.endpoint, region: "us-east-1", credentials: bucket.store.credentials)
        configuration.contentDelivery = delivery
        configuration.objectPollInterval = .milliseconds(200)
    }

    /// What the simulator (Apple) knows of a transaction.
    static func apple(_ fixture: DownloadFixture, _ transactionID: String) async throws -> [String: Any] {
        let response = try await fixture.control.client.execute(uri: "/sim/transactions/\(transactionID)", method: .get)
        return try JSONSerialization.jsonObject(with: Data(buffer: response.body)) as? [String: Any] ?? [:]
    }

    // MARK: 1. Redirect: the buyer who never acknowledges

    /// With `--content-delivery redirect` the store hands every byte to the buyer, yet the ledger
    /// records nothing unless the app acknowledges. A buyer who follows the 303 (`curl -L`, a patched
    /// app) and never acknowledges, then asks Apple for a refund, is answered by Stockroom as
    /// `UNDELIVERED_SERVER_OUTAGE` with 0% consumed: Stockroom tells Apple the failure was its own, for
    /// a buyer who holds the whole file. (In stream mode the same buyer is `DELIVERED`.)
    @Test func aRedirectedBuyerWhoNeverAcknowledgesIsNotReportedToAppleAsAServerOutage() async throws {
        let bucket = try await Self.bucket()
        try await DownloadFixture.run(engine: .sqlite, { Self.configure(&$0, bucket, delivery: .redirect) }) { fixture in
            let purchase = try await fixture.control.purchase(DownloadFixture.book)
            let claim: [String: Any] = ["productId": DownloadFixture.book, "signedTransaction": purchase.signedTransaction, "consent": true]
            let response = try await fixture.client.execute(
                uri: "/v1/downloads", method: .post, body: ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: claim)))
            #expect(response.status == .seeOther)
            let location = try #require(response.headers[.location])
            // The buyer takes the whole file from the store, with no credential, and never acknowledges.
            let whole = try await CurlHTTPClient(configuration: .init(maximumResponseBytes: 16 << 20)).send(UpstreamRequest(method: .get, url: location))
            #expect(whole.status == 200)
            #expect(whole.body == ServerFixture.book)

            // Then asks Apple for a refund.
            let minted = try await fixture.control.client.execute(
                uri: "/sim/notifications", method: .post,
                body: ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: ["type": "CONSUMPTION_REQUEST", "transactionId": purchase.transactionId])))
            #expect(minted.status == .created)
            #expect(try await fixture.client.execute(uri: "/v1/notifications/appstore", method: .post, body: minted.body).status == .ok)
            let deadline = ContinuousClock.now + .seconds(15)
            while ContinuousClock.now < deadline, try await Self.apple(fixture, purchase.transactionId)["consumptionAnswers"] as? Int != 1 {
                try await Task.sleep(for: .milliseconds(100))
            }
            let answer = try #require(try await Self.apple(fixture, purchase.transactionId)["consumption"] as? [String: Any])
            // Stockroom handed out a presigned URL and the store served every byte: not "our outage, 0% used".
            #expect(answer["deliveryStatus"] as? String != "UNDELIVERED_SERVER_OUTAGE", "Apple was told: \(answer)")
            #expect(answer["consumptionPercentage"] as? Int != 0, "Apple was told: \(answer)")
        }
    }

    // MARK: 2. content push: a refused catalogue still replaces the live object

    /// `content push` uploads before it checks the entry: a typo in `--type` (or an invalid
    /// product ID, a catalogue edited meanwhile) for a published product leaves the catalogue
    /// unchanged, "the object is uploaded", and that upload went to the product's live key. Every
    /// server then answers 503 `content_changing` and, at its next poll, hashes and publishes the
    /// new bytes under the old entry (old title, old contentVersion): content published by a
    /// command that reported failure.
    @Test func aPushRefusedForATypoLeavesThePublishedObjectAlone() async throws {
        let bucket = try await Self.bucket()
        let folder = try TemporaryFolder()
        try await bucket.client.put(
            "shop/products.json", body: Array(ServerFixture.catalog([ServerFixture.entry(DownloadFixture.book, file: "books/book.epub")]).utf8),
            contentType: "application/json")
        let before = try await bucket.client.head("shop/books/book.epub")
        try folder.write("new.epub", sampleBytes(count: 5_000, seed: 9))
        let settings = [
            "--content", "s3://\(bucket.client.bucket)/shop", "--catalog", "s3://\(bucket.client.bucket)/shop/products.json", "--s3-endpoint",
            bucket.store.endpoint, "--database", folder.path + "/ledger.sqlite",
        ]
        let binary = try StockroomProcess.binary()
        await #expect(throws: (any Error).self) {
            _ = try await StockroomProcess.run(
                binary, ["content", "push", folder.path + "/new.epub", "--product", DownloadFixture.book, "--type", "nonconsumable"] + settings,
                environment: bucket.store.environment)
        }
        // The catalogue was not changed, so the object it publishes must not have been either.
        let after = try await bucket.client.head("shop/books/book.epub")
        #expect(after == before, "the refused push replaced the live object: \(before) -> \(after)")
    }

    // MARK: 3. content push reads every other object in the bucket

    /// `content push` of one new product validates the whole catalogue with the loader the server
    /// uses, which streams (GETs) every object whose digest is not in the local digest cache: on an
    /// operator's machine, every push downloads the whole bucket (egress paid on S3).
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
            "--content", "s3://\(bucket.client.bucket)/shop", "--catalog", "s3://\(bucket.client.bucket)/shop/products.json", "--s3-endpoint",
            "http://127.0.0.1:\(proxy.port)", "--database", folder.path + "/ledger.sqlite",
        ]
        _ = try await StockroomProcess.run(
            try StockroomProcess.binary(),
            ["content", "push", folder.path + "/level.pak", "--product", "com.example.level", "--title", "Level", "--type", "non-consumable"] + settings,
            environment: bucket.store.environment)
        let reads = proxy.requests.filter { $0.method == "GET" && $0.path.hasSuffix("/shop/big.bin") }
        #expect(reads.isEmpty, "content push of com.example.level read big.bin: \(reads.map(\.description))")
    }

    /// The catalogue is written back "only over the ETag it read": shown against the test store, a
    /// PUT with the ETag of a version another operator already replaced must be refused.
    @Test func aCatalogueWriteOverAReplacedVersionIsRefused() async throws {
        let bucket = try await Self.bucket()
        let first = try await bucket.client.put("shop/products.json", body: Array(#"{"products": []}"#.utf8), contentType: "application/json")
        _ = try await bucket.client.put("shop/products.json", body: Array(#"{"products": [ ]}"#.utf8), contentType: "application/json")
        await #expect(throws: ObjectStoreError.changed(key: "shop/products.json")) {
            _ = try await bucket.client.put("shop/products.json", body: Array(#"{"products":[]}"#.utf8), contentType: "application/json", ifMatch: first)
        }
    }

    // MARK: 4. Presigned URLs for an endpoint with an explicit default port or an IPv6 address

    /// `--s3-endpoint https://s3.example.com:443` (or `http://host:80`) is kept with its port, and
    /// the presigned URL signs `host:PORT`; but libcurl (and URLSession) send `Host: host` without a
    /// default port, so the store recomputes another signature and refuses every presigned URL:
    /// redirect delivery is down while stream mode, doctor and start-up (signed by libcurl from
    /// the Host it sends) all pass. Shown with a forwarder on port 80 in front of the test store.
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
        let fetched = try await CurlHTTPClient(configuration: .init(maximumResponseBytes: 16 << 20)).send(UpstreamRequest(method: .get, url: url.absoluteString))
        #expect(fetched.status == 200, "the store refused the presigned URL \(url.host ?? "")…: \(String(decoding: fetched.body.prefix(400), as: UTF8.self))")
    }

    /// `--s3-endpoint http://[::1]:PORT`: the settings keep the brackets for requests Stockroom
    /// sends, but `SigV4.presignedURL` rebuilds the authority from `URL.host` without them, so no
    /// presigned URL (or a broken one) can be made: every redirect claim is recorded in the ledger
    /// and then answered 503.
    @Test func aPresignedURLForAnIPv6EndpointKeepsItsBrackets() throws {
        let settings = try ObjectStoreSettings(
            endpoint: "http://[::1]:9000", region: "us-east-1", credentials: .init(accessKeyID: "AKID", secretAccessKey: "secret"))
        #expect(settings.base(bucket: "shop").origin == "http://[::1]:9000")
        let url = S3Client(settings: settings, bucket: "shop").presignedGET("books/book.epub", lifetime: .seconds(60))
        #expect(url?.absoluteString.hasPrefix("http://[::1]:9000/shop/books/book.epub?") == true, "presigned: \(url?.absoluteString ?? "nil")")
    }
}
