import Foundation
import StockroomTestSupport
import Hummingbird
import Logging
import StockroomCore
import StockroomSQLite
import StockroomPostgres
import StockroomPostgresTestSupport
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
        configuration.databaseLocation = root.path + "/stockroom.sqlite"
        configuration.catalogPollInterval = .milliseconds(50)
        // HummingbirdTesting's live client connects when the test starts; a test that first
        // buys 24 purchases from the simulator on a loaded machine would otherwise meet the
        // 10 s header deadline ("I/O on closed channel"). LimitsConnectionTests set their own.
        configuration.headerTimeout = .seconds(120)
        configuration.logLevel = .warning
        // Port 0 rules out the in-process simulator; tests that verify point this at a live one
        // and name its root and key (DownloadFixture), as an operator passes --trust-root.
        configuration.upstream = .url(Self.unreachableUpstream)
        configuration.tokenSecret = Self.tokenSecret
        // Every test client is 127.0.0.1: suites that verify often would share one allowance.
        // LimitsUpstreamRateTests turns the limit on.
        configuration.upstreamRate = nil
        configuration.verificationRetryPolicy = RetryPolicy(
            maximumAttempts: 3, initialBackoff: .milliseconds(5), maximumBackoff: .milliseconds(20), totalBudget: .seconds(3))
    }

    static func entry(_ id: String, file: String, title: String = "Book") -> String {
        #"""
        {"productId": "\#(id)", "title": "\#(title)", "type": "non-consumable", "file": "\#(file)", "contentType": \#
        "application/epub+zip", "contentVersion": "1"}
        """#
    }

    static func catalog(_ entries: [String]) -> String {
        #"{"products": [\#(entries.joined(separator: ",\n"))]}"#
    }

    func application() async throws -> some ApplicationProtocol {
        try await buildApplication(configuration: configuration)
    }

    /// Runs `body` with a fixture whose ledger is on `engine`: the SQLite file of `init()`, or a
    /// PostgreSQL database of its own, dropped afterwards (its digest cache stays in the temporary folder).
    static func on<Value: Sendable>(_ engine: LedgerEngine, _ body: @Sendable (ServerFixture) async throws -> Value) async throws -> Value {
        var fixture = try ServerFixture()
        guard engine == .postgres else { return try await body(fixture) }
        return try await ScratchPostgres.withDatabase { address in
            fixture.configuration.databaseLocation = address.url
            fixture.configuration.stateFolder = fixture.root.path
            // A loaded test machine is slow, not a lost database (the outage test sets its own).
            fixture.configuration.databaseTimeout = .seconds(30)
            let configured = fixture
            return try await body(configured)
        }
    }

    /// The ledger the configured server writes, opened for `body` as a second instance opens it.
    func withLedger<Value: Sendable>(_ body: @Sendable (any Ledger) async throws -> Value) async throws -> Value {
        let value: Value
        if configuration.usesPostgres {
            let database = PostgresPool(
                address: try PostgresAddress(url: configuration.databaseLocation), poolSize: 4, checkoutTimeout: .seconds(30),
                logger: ScratchPostgres.quiet)
            value = try await database.running { database in try await body(PostgresLedger(database: database)) }
        } else {
            value = try await body(SQLiteLedger(database: try SQLiteDatabase(path: configuration.databaseLocation)))
        }
        withExtendedLifetime(root) {}  // the temporary folder lives until the test is done
        return value
    }
}
