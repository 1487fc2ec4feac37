import Foundation
import StockroomTestSupport
import Hummingbird
import Logging
import StockroomCore
@testable import StockroomServer

/// A server configuration over temporary catalogue, content and database, port 0.
struct ServerFixture {
    let root: TemporaryFolder
    var configuration: ServerConfiguration

    static let book = sampleBytes(count: 20_000)
    /// Larger than socket buffers, so a client that stops reading interrupts the body.
    static let big = sampleBytes(count: 8 << 20, seed: 8)
    static let tokenSecret = "test-token-secret-0123456789abcdef"
    /// The upstream of tests that never verify: nothing answers there.
    static let unreachableUpstream = "http://127.0.0.1:9"

    init() throws {
        root = try TemporaryFolder()
        try root.write("content/books/book.epub", Self.book)
        try root.write("content/big.bin", Self.big)
        try root.write(
            "catalog/products.json",
            Self.catalog([Self.entry("com.example.book", file: "books/book.epub"), Self.entry("com.example.big", file: "big.bin")]))
        configuration = ServerConfiguration()
        configuration.host = "127.0.0.1"
        configuration.port = 0
        configuration.catalogFolder = root.path + "/catalog"
        configuration.contentFolder = root.path + "/content"
        configuration.databasePath = root.path + "/stockroom.sqlite"
        configuration.catalogPollInterval = .milliseconds(50)
        configuration.logLevel = .warning
        // Port 0 rules out the in-process simulator; tests that verify point this at a live one.
        configuration.upstream = .url(Self.unreachableUpstream)
        configuration.tokenSecret = Self.tokenSecret
        configuration.verificationRetryPolicy = RetryPolicy(
            maximumAttempts: 3, initialBackoff: .milliseconds(5), maximumBackoff: .milliseconds(20), totalBudget: .seconds(3))
    }

    static func entry(_ id: String, file: String, title: String = "Book") -> String {
        #"{"productId": "\#(id)", "title": "\#(title)", "type": "non-consumable", "file": "\#(file)", "contentType": "application/epub+zip", "contentVersion": "1"}"#
    }

    static func catalog(_ entries: [String]) -> String {
        #"{"products": [\#(entries.joined(separator: ",\n"))]}"#
    }

    /// The server on `configuration`. A test that points `upstream` at a live simulator and names
    /// no trust gets that simulator's root and API key, as an operator passes `--trust-root` and
    /// `--app-store-key`: the test fetches them, the server never does.
    func application() async throws -> some ApplicationProtocol {
        var configuration = configuration
        if case .url(let base) = configuration.upstream, base != Self.unreachableUpstream,
            configuration.trustedRoots.isEmpty, configuration.serverAPICredentials == nil,
            let trust = await Self.simulatorTrust(at: base, bundleID: configuration.bundleID)
        {
            configuration.trustedRoots = [trust.root]
            configuration.serverAPICredentials = trust.credentials
        }
        return try await buildApplication(configuration: configuration)
    }

    /// A live simulator's signing root and Server API key, or nil when `base` serves none.
    static func simulatorTrust(at base: String, bundleID: String) async -> (root: Certificate, credentials: AppStoreServerAPIClient.Credentials)? {
        let client = CurlHTTPClient(configuration: .init(connectTimeout: .seconds(2), totalTimeout: .seconds(3), maximumResponseBytes: 64 * 1024))
        guard let rootResponse = try? await client.send(UpstreamRequest(method: .get, url: base + "/sim/root.pem")), rootResponse.status == 200,
            let root = try? Certificate(pem: String(decoding: rootResponse.body, as: UTF8.self)),
            let keyResponse = try? await client.send(UpstreamRequest(method: .get, url: base + "/sim/api-key")), keyResponse.status == 200,
            let key = try? JSONSerialization.jsonObject(with: Data(keyResponse.body)) as? [String: String],
            let keyID = key["keyId"], let issuerID = key["issuerId"], let pem = key["privateKey"], let privateKey = try? ECPrivateKey(pem: pem)
        else { return nil }
        return (root, .init(issuerID: issuerID, keyID: keyID, bundleID: bundleID, privateKey: privateKey))
    }
}
