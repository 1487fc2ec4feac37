import Foundation
import StockroomTestSupport
import Testing

@testable import StockroomKit

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// What a review of the hostile-server hardening found still got through, one test each: a
/// status line hidden in a head, one transaction listed for two products, a restore of endless
/// entries, a journal sharing the files' folder, two deliveries on one folder, and escapes in
/// `--json`.
@Suite struct HostileReviewTests {
    typealias H = HostileServerTests

    /// A download of `body` as Stockroom sends it, with its own digest.
    static func download(_ body: [UInt8], location: String, etag: String = "\"v1\"") -> [ScriptedHTTPServer.Step] {
        var hasher = SHA256Digest()
        hasher.update(Data(body))
        let digest = Data(hasher.finalize()).base64EncodedString()
        let head =
            "HTTP/1.1 200 OK\r\nContent-Length: \(body.count)\r\nETag: \(etag)\r\nRepr-Digest: sha-256=:\(digest):\r\n"
            + "X-Download-Token: token-\(location.count)\r\nLocation: \(location)\r\n\r\n"
        return [.send(head), .raw(body)]
    }

    // MARK: The status of an answer is its status line's

    /// libcurl's own status is 500; `CurlTransfer.header` takes any header line that starts with
    /// `HTTP/` (libcurl passes `HTTP/1.1 200 OK:` on as a header, it has a colon) for a new status
    /// line, so the acknowledgement counts as a 2xx.
    @Test(arguments: TransportTests.engines)
    func anAcknowledgementAnswered500IsNotA2xxBecauseOfAHeaderThatLooksLikeAStatusLine(_ engine: HTTPTransport.Engine) async throws {
        let scene = try H.Scene()
        let refusal = #"{"error": {"code": "internal", "message": "not recorded"}}"#
        let server = try ScriptedHTTPServer { request in
            if request.line.contains("/ack") {
                return [
                    .send(
                        """
                        HTTP/1.1 500 Internal Server Error\r\nHTTP/1.1 200 OK:\r\nContent-Type: application/json\r\nContent-Length: \
                        \(refusal.utf8.count)\r\n\r\n\(refusal)
                        """
                    )
                ]
            }
            return H.download()
        }
        defer { server.stop() }
        let outcome = try await scene.delivery(server) { $0.transportEngine = engine }.deliver(H.purchase())
        #expect(outcome.transactionAction != .finish, "safe to finish on an acknowledgement answered 500: \(outcome)")
    }

    // MARK: One transaction is one product

    /// A restore that lists one transaction ID for two products: the second product is reported
    /// delivered with the first one's file, and its own file is never fetched.
    @Test func aRestoreThatListsOneTransactionForTwoProductsNeverReportsOneWithTheOthersFile() async throws {
        let scene = try H.Scene()
        let transaction = "1000000000000001"
        let products = ["com.example.a", "com.example.b"]
        let bodies = ["com.example.a": sampleBytes(count: 3_000, seed: 11), "com.example.b": sampleBytes(count: 5_000, seed: 12)]
        let server = try ScriptedHTTPServer { request in
            if request.line.hasPrefix("POST /v1/restores") { return H.restoreAnswer(products.map { ($0, transaction, "/c/\($0)") }) }
            if request.line.hasPrefix("GET /v1/catalog") { return H.answer("404 Not Found", "{}") }
            if request.line.contains("/ack") { return H.acknowledged }
            for product in products where request.line.hasPrefix("GET /c/\(product) ") {
                return [.pause(0.3)] + Self.download(bodies[product]!, location: "/c/\(product)")
            }
            return H.answer("404 Not Found", "{}")
        }
        defer { server.stop() }
        let restored = try await scene.delivery(server).restore(signedTransaction: H.proof).get()
        #expect(restored.map(\.productID) == ["com.example.a"], "one product per transaction: the second listed under it is dropped")
        for purchase in restored {
            guard case .delivered(let file) = purchase.outcome else { continue }
            #expect(file.lastPathComponent == purchase.productID, "\(purchase.productID) reported delivered as \(file.path)")
            #expect(FileManager.default.contents(atPath: scene.files + "/" + purchase.productID) == Data(bodies[purchase.productID]!))
        }
    }

    /// `POST /v1/restores` answers one entry per product (its newest transaction), but the client
    /// acts on whatever it lists: 2,000 transactions of the one product the catalogue has are
    /// 2,000 deliveries of the same file, 2,000 requests and 2,000 journal entries (each with a
    /// copy of the signed transaction). A 4 MiB answer lists some 40,000, and each restore can
    /// name new ones: requests and journal files without end.
    @Test func aRestoreActsOnEachProductOnce() async throws {
        let scene = try H.Scene()
        let listed = (0..<2_000).map { (H.product, String(2_000_000_000_000_000 + $0), "/c/\($0)") }
        let server = try ScriptedHTTPServer { request in
            if request.line.hasPrefix("POST /v1/restores") { return H.restoreAnswer(listed) }
            if request.line.hasPrefix("GET /v1/catalog") { return H.answer("404 Not Found", "{}") }
            return H.answer("503 Service Unavailable", #"{"error": {"code": "upstream_unavailable", "message": "later"}}"#)
        }
        defer { server.stop() }
        let restored = try await scene.delivery(server) { $0.catalog = Catalog(products: [Catalog.Product(productID: H.product)]) }
            .restore(signedTransaction: H.proof).get()
        let fetches = server.requests.filter { $0.line.hasPrefix("GET /c/") }.count
        let entries = try FileManager.default.contentsOfDirectory(atPath: scene.journal).filter { $0.hasSuffix(".json") }.count
        #expect(fetches <= 1 && entries <= 1, "one product listed \(restored.count) times: \(fetches) requests, \(entries) journal entries")
    }

    // MARK: The journal holds only what the client wrote

    /// One folder for the journal and the files (`stockroom client --into X --journal X`, or a
    /// link from one to the other) is refused when the delivery is set up: a product named
    /// `<transaction>.json` is a valid product ID, and its file would replace that transaction's
    /// journal entry with the server's bytes (say, one that reads "reported": safe to finish with
    /// no request at all).
    @Test func aJournalInTheFilesFolderIsRefusedBeforeAnyRequest() async throws {
        let scene = try H.Scene()
        let folder = scene.root.path + "/app/data"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: scene.root.path + "/app/alias", withDestinationPath: folder)
        let server = try ScriptedHTTPServer { _ in H.download() }
        defer { server.stop() }
        for files in [folder, folder + "/", scene.root.path + "/app/alias", folder + "/../data"] {
            let configuration = Delivery.Configuration(
                server: server.url, journalFolder: URL(fileURLWithPath: folder), folder: URL(fileURLWithPath: files))
            #expect(throws: Delivery.ConfigurationError.self, "\(files)") { try Delivery(configuration: configuration) }
        }
        #expect(server.requests.isEmpty)
    }

    /// A journal entry whose counters are at `Int.max` (an older version's, a restored backup's)
    /// never traps where a failure adds one.
    @Test func aJournalEntryWithCountersAtTheirLimitNeverTraps() async throws {
        let scene = try H.Scene()
        let journal = try Journal(folder: URL(fileURLWithPath: scene.journal))
        var entry = JournalEntry(
            transactionID: H.transaction, originalTransactionID: nil, productID: H.product, renewal: .download(.signedTransaction(H.proof)),
            appAccountToken: nil, consent: nil, destination: scene.files + "/" + H.product)
        entry.failures = .max
        entry.digestFailures = .max
        try journal.write(entry)
        let server = try ScriptedHTTPServer { _ in
            H.answer("503 Service Unavailable", #"{"error": {"code": "upstream_unavailable", "message": "later"}}"#)
        }
        defer { server.stop() }
        let outcome = try await scene.delivery(server).deliver(H.purchase())
        #expect(outcome.code == "upstream_unavailable")
        #expect(try journal.entry(H.transaction).map { $0.failures <= 1_001 } == true)
    }

    // MARK: Two deliveries on one folder

    /// Two `Delivery`s on the same folders (an app and its extension, two `stockroom client`
    /// runs) deliver the same purchase: the second opens the same partial file and cuts it to 0
    /// while the first is half way; its transfer then breaks off. The first is hashed from the
    /// bytes it received, not from the file, so it places, acknowledges and reports a file whose
    /// first 4 MiB are zeros.
    @Test func twoDeliveriesOfOnePurchaseOnOneFolderNeverPlaceADamagedFile() async throws {
        let scene = try H.Scene()
        let body = sampleBytes(count: 6 << 20, seed: 21)
        var hasher = SHA256Digest()
        hasher.update(Data(body))
        let digest = Data(hasher.finalize()).base64EncodedString()
        let head =
            """
            HTTP/1.1 200 OK\r\nContent-Length: \(body.count)\r\nETag: \"v1\"\r\nRepr-Digest: sha-256=:\(digest):\r\nX-Download-Token: \
            t\r\nLocation: /v1/downloads/\(H.transaction)/content\r\n\r\n
            """
        let posts = ReviewCounter()
        let server = try ScriptedHTTPServer { request in
            if request.line.contains("/ack") { return H.acknowledged }
            guard request.line.hasPrefix("POST /v1/downloads ") else {
                return H.answer("503 Service Unavailable", #"{"error": {"code": "upstream_unavailable", "message": "later"}}"#)
            }
            switch posts.next() {
            case 1:  // the first delivery: 4 MiB, a pause, the rest
                return [.pause(1), .send(head), .raw(Array(body[0..<(4 << 20)])), .pause(3), .raw(Array(body[(4 << 20)...]))]
            case 2:  // the second: the head and a byte, then the connection drops
                return [.pause(2), .send(head), .raw([body[0]]), .close]
            default:
                return H.answer("503 Service Unavailable", #"{"error": {"code": "upstream_unavailable", "message": "later"}}"#)
            }
        }
        defer { server.stop() }
        let first = try scene.delivery(server) { $0.requestTimeout = 10 }
        let second = try scene.delivery(server) { $0.requestTimeout = 10 }
        async let one = first.deliver(H.purchase())
        try await Task.sleep(for: .milliseconds(200))
        async let two = second.deliver(H.purchase())
        let (outcome, _) = await (one, two)
        guard case .delivered(let file) = outcome else { return }
        let placed = FileManager.default.contents(atPath: file.path)
        #expect(
            placed == Data(body),
            "reported delivered (acknowledged) with a file that is not the one checked: \(placed.map { $0.prefix(16).map { $0 } } ?? [])")
    }
}

extension HostileReviewTests {
    // MARK: stockroom client prints nothing from the network that drives a terminal

    /// `--json` goes through `JSONEncoder`, which escapes C0 only: DEL, the C1 controls (U+009B
    /// is CSI) and the bidirectional overrides that `ClientOptions.printable` escapes in the text
    /// output reach the terminal as they came (here a catalogue title; `deliver --json` and
    /// `restore --json` print the server's message and, for a product not in the catalogue, its
    /// unchecked product ID, the same way).
    @Test func theJSONOutputOfStockroomClientEscapesWhatTheTextOutputEscapes() async throws {
        let binary = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent(".build/debug/stockroom").path
        try #require(FileManager.default.isExecutableFile(atPath: binary), "swift build --build-tests builds \(binary)")
        let catalogue = #"{"products": [{"productId": "com.example.book", "title": "\u009b2J\u007f\u202egnp.exe"}]}"#
        let server = try ScriptedHTTPServer { _ in
            [.send("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: \(catalogue.utf8.count)\r\n\r\n\(catalogue)")]
        }
        defer { server.stop() }
        // Standard output alone: the progress notes go to standard error.
        let printed = try await ChildProcess.run(
            "/bin/sh", ["-c", #"exec "$0" "$@" 2>/dev/null"#, binary, "client", "catalog", "--server", server.url.absoluteString, "--json"]
        ).output
        #expect(printed.contains("com.example.book"))
        let raw = printed.unicodeScalars.filter {
            (0x7F...0x9F).contains($0.value) || (0x202A...0x202E).contains($0.value) || (0x2066...0x2069).contains($0.value)
        }
        #expect(raw.isEmpty, "printed as they came: \(raw.map { String($0.value, radix: 16) })")
    }
}

/// A thread-safe count.
final class ReviewCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var value = 0
    func next() -> Int {
        lock.withLock {
            value += 1; return value
        }
    }
}
