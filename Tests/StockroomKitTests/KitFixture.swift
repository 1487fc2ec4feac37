import AppStoreSimulator
import Foundation
import Hummingbird
import HummingbirdTesting
import StockroomCore
import StockroomSQLite
import StockroomKit
import StockroomTestSupport
import Testing
@testable import StockroomServer

/// A live simulator, a live server verifying against it, and a TCP proxy in front of the server,
/// over loopback; with temporary folders for the app's journal and files.
struct KitFixture: Sendable {
    let control: SimulatorControl
    let proxy: TCPProxy
    /// The server itself, past the proxy.
    let direct: URL
    let ledger: any Ledger
    let folder: TemporaryFolder

    static let book = "com.example.book"
    static let big = "com.example.big"
    static let bookBytes = sampleBytes(count: 20_000)
    /// Larger than socket buffers, so a cut lands mid-body.
    static let bigBytes = sampleBytes(count: 3 << 20, seed: 8)
    static let tokenSecret = "test-token-secret-0123456789abcdef"

    /// Runs `body` with everything up; `configure` adjusts the server's configuration.
    static func run<Value: Sendable>(
        _ configure: @Sendable (inout ServerConfiguration) -> Void = { _ in },
        _ body: @Sendable @escaping (KitFixture) async throws -> Value
    ) async throws -> Value {
        var simulator = SimulatorConfiguration()
        simulator.port = 0
        simulator.bundleID = "com.example.stockroom.demo"
        return try await buildSimulatorApplication(configuration: simulator).test(.live) { simulatorClient in
            let control = SimulatorControl(simulatorClient)
            let trust = try await control.trust(bundleID: "com.example.stockroom.demo")
            let root = try TemporaryFolder()
            try root.write("content/books/book.epub", bookBytes)
            try root.write("content/big.bin", bigBytes)
            try root.write(
                "catalog/products.json",
                #"""
                {"products": [{"productId": "\#(book)", "title": "Book", "type": "non-consumable", "file": "books/book.epub", \#
                "contentType": "application/epub+zip", "contentVersion": "1"}, {"productId": "\#(big)", "title": "Big", "type": \#
                "non-consumable", "file": "big.bin", "contentType": "application/octet-stream", "contentVersion": "1"}]}
                """#
            )
            var configuration = ServerConfiguration()
            configuration.host = "127.0.0.1"
            configuration.port = 0
            configuration.catalogFolder = root.path + "/catalog"
            configuration.contentFolder = root.path + "/content"
            configuration.databaseLocation = root.path + "/stockroom.sqlite"
            configuration.headerTimeout = .seconds(120)
            configuration.logLevel = .warning
            configuration.upstream = .url(control.baseURL)
            configuration.trustedRoots = [trust.root]
            configuration.serverAPICredentials = trust.credentials
            configuration.tokenSecret = tokenSecret
            configuration.upstreamRate = nil
            // The server's own finish calls would add to the simulator's counts.
            configuration.finishOn = nil
            configuration.verificationRetryPolicy = RetryPolicy(
                maximumAttempts: 3, initialBackoff: .milliseconds(5), maximumBackoff: .milliseconds(20), totalBudget: .seconds(20))
            configure(&configuration)
            let configured = configuration
            return try await buildApplication(configuration: configured).test(.live) { client in
                let port = try #require(client.port)
                let proxy = try TCPProxy(upstreamPort: port)
                defer { proxy.stop() }
                let ledger = SQLiteLedger(database: try SQLiteDatabase(path: configured.databaseLocation))
                let fixture = KitFixture(
                    control: control, proxy: proxy, direct: URL(string: "http://127.0.0.1:\(port)")!, ledger: ledger,
                    folder: try TemporaryFolder())
                let value = try await body(fixture)
                withExtendedLifetime(root) {}
                return value
            }
        }
    }

    /// A delivery through the proxy, with its journal and files in this fixture's folder.
    func delivery(
        journal: String = "journal", files: String = "files", server: URL? = nil, now: @escaping @Sendable () -> Date = { Date() },
        events: EventLog? = nil, maximumInterruptions: Int = 3, adjust: (inout Delivery.Configuration) -> Void = { _ in }
    ) throws -> Delivery {
        var configuration = Delivery.Configuration(
            server: server ?? proxy.url, journalFolder: URL(fileURLWithPath: folder.path + "/" + journal),
            folder: URL(fileURLWithPath: folder.path + "/" + files))
        configuration.now = now
        configuration.maximumInterruptions = maximumInterruptions
        if let events { configuration.observer = { events.append($0) } }
        adjust(&configuration)
        return try Delivery(configuration: configuration)
    }

    func file(_ productID: String, files: String = "files") -> String { folder.path + "/" + files + "/" + productID }

    /// Whether the product's file is on disk with exactly these bytes (a Bool, so a failure does not print megabytes).
    func holds(_ productID: String, _ bytes: [UInt8], files: String = "files") -> Bool {
        contents(productID, files: files) == bytes
    }

    func contents(_ productID: String, files: String = "files") -> [UInt8]? {
        FileManager.default.contents(atPath: file(productID, files: files)).map { Array($0) }
    }

    func state(_ transactionID: String) async throws -> FulfilmentState? {
        try await ledger.fulfilment(transactionID)?.state
    }

    /// Upstream verifications so far: verifyReceipt in both environments, and the Server API.
    func verifications() async throws -> Int {
        let calls = try await control.calls()
        return calls.production + calls.sandbox + (try await control.serverAPICalls())
    }

    func clearFaults() async throws {
        _ = try await control.client.execute(uri: "/sim/faults", method: .delete)
    }

    /// Files left in the files folder, partial ones included.
    func filesOnDisk(_ files: String = "files") -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: folder.path + "/" + files)) ?? []).sorted()
    }
}

/// Collects a delivery's events, in order.
final class EventLog: @unchecked Sendable {
    private let lock = NSLock()
    private var events: [DeliveryEvent] = []

    func append(_ event: DeliveryEvent) { lock.withLock { events.append(event) } }

    var all: [DeliveryEvent] { lock.withLock { events } }

    /// `METHOD status [from N]` per answered request, for readable expectations; `store` for an
    /// object store's (an absolute URL).
    var requests: [String] {
        all.compactMap { event in
            guard case .response(_, let method, let path, let rangeStart, let status) = event else { return nil }
            let kind =
                path.hasPrefix("http")
                ? "store"
                : path.hasSuffix("/ack") ? "ack" : path.hasSuffix("/content") ? "GET" : path == "/v1/restores" ? "restore" : method
            return rangeStart.map { "\(kind) \(status) from \($0)" } ?? "\(kind) \(status)"
        }
    }
}

/// Counts what `Delivery.safeToFinish` reports.
final class Reports: @unchecked Sendable {
    private let lock = NSLock()
    private var ids: [String] = []
    private var tasks: [Task<Void, Never>] = []

    func listen(_ delivery: Delivery) {
        let task = Task { for await id in delivery.safeToFinish { self.lock.withLock { self.ids.append(id) } } }
        lock.withLock { tasks.append(task) }
    }

    /// Reports so far, after letting the listeners catch up.
    func ids(settling: Bool = true) async -> [String] {
        if settling { try? await Task.sleep(for: .milliseconds(100)) }
        return lock.withLock { ids }
    }

    deinit { for task in tasks { task.cancel() } }
}

extension SimulatorControl {
    /// The simulator's root and Server API key, as a test (never the server) reads them.
    func trust(bundleID: String) async throws -> (root: Certificate, credentials: AppStoreServerAPIClient.Credentials) {
        let pem = String(buffer: try await client.execute(uri: "/sim/root.pem", method: .get).body)
        let key =
            try JSONSerialization.jsonObject(with: Data(buffer: try await client.execute(uri: "/sim/api-key", method: .get).body))
            as? [String: String]
        let credentials = AppStoreServerAPIClient.Credentials(
            issuerID: key?["issuerId"] ?? "", keyID: key?["keyId"] ?? "", bundleID: bundleID,
            privateKey: try ECPrivateKey(pem: key?["privateKey"] ?? ""))
        return (try Certificate(pem: pem), credentials)
    }
}

extension SimulatorControl.Purchase {
    /// The purchase as the app would hand it to the delivery, proved by the app receipt.
    func withReceipt(_ product: String? = nil) -> Purchase {
        Purchase(
            productID: product ?? productId, transactionID: transactionId, originalTransactionID: originalTransactionId,
            proof: .appReceipt(Data(base64Encoded: receiptData, options: .ignoreUnknownCharacters)!))
    }

    /// Proved by the StoreKit 2 signed transaction.
    func withSignedTransaction(account: UUID? = nil) -> Purchase {
        Purchase(
            productID: productId, transactionID: transactionId, originalTransactionID: originalTransactionId,
            proof: .signedTransaction(signedTransaction), appAccountToken: account)
    }

    /// Proved by the iOS 6 transaction receipt.
    func withTransactionReceipt() -> Purchase {
        Purchase(
            productID: productId, transactionID: transactionId, originalTransactionID: originalTransactionId,
            proof: .transactionReceipt(Data(base64Encoded: transactionReceipt ?? "", options: .ignoreUnknownCharacters)!))
    }
}

/// A clock the test moves forward, to reach a `Retry-After` without waiting for it.
final class TestClock: @unchecked Sendable {
    private let lock = NSLock()
    private var offset: TimeInterval = 0

    func advance(_ seconds: TimeInterval) { lock.withLock { offset += seconds } }

    var now: @Sendable () -> Date { { [self] in Date().addingTimeInterval(lock.withLock { offset }) } }
}
