import AppStoreSimulator
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import StockroomCore
import StockroomPostgresTestSupport
import StockroomTestSupport
@testable import StockroomServer

/// A live simulator and a server verifying against it, with the server's ledger readable, on
/// the ledger engine a test names (SQLite unless told).
struct DownloadFixture: Sendable {
    let control: SimulatorControl
    let client: any TestClientProtocol
    /// The server's ledger, opened as another instance would open it.
    let ledger: any Ledger
    /// The server's `--database`: a SQLite file or a `postgres://` address.
    let databaseLocation: String

    static let book = "com.example.book"

    /// Runs `body` with both running; `configure` adjusts the server's configuration. `server`
    /// `.router` runs the server without a socket: its bodies go through Hummingbird's writer, not
    /// the connection below it (`DirectBody`).
    static func run<Value: Sendable>(
        engine: LedgerEngine = .sqlite,
        server mode: TestingSetup = .live,
        _ configure: @Sendable (inout ServerConfiguration) -> Void = { _ in },
        _ body: @Sendable @escaping (DownloadFixture) async throws -> Value
    ) async throws -> Value {
        var simulator = SimulatorConfiguration()
        simulator.port = 0
        simulator.bundleID = "com.example.stockroom.demo"
        return try await buildSimulatorApplication(configuration: simulator).test(.live) { simulatorClient in
            let control = SimulatorControl(simulatorClient)
            // The server fetches no trust: the test names the simulator's root and API key.
            let trust = try await control.trust(bundleID: "com.example.stockroom.demo")
            return try await ServerFixture.on(engine) { fixture in
                var server = fixture
                server.configuration.upstream = .url(control.baseURL)
                server.configuration.trustedRoots = [trust.root]
                server.configuration.serverAPICredentials = trust.credentials
                configure(&server.configuration)
                let configured = server
                return try await configured.application().test(mode) { client in
                    try await configured.withLedger { ledger in
                        try await body(
                            DownloadFixture(
                                control: control, client: ContractRecorder(client), ledger: ledger,
                                databaseLocation: configured.configuration.databaseLocation))
                    }
                }
            }
        }
    }

    func post(_ fields: [String: String]) async throws -> TestResponse {
        try await client.execute(
            uri: "/v1/downloads", method: .post, body: ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: fields)))
    }

    func post(_ purchase: SimulatorControl.Purchase, product: String = book, transaction: Bool = true) async throws -> TestResponse {
        var fields = ["productId": product, "receiptData": purchase.receiptData]
        if transaction { fields["transactionId"] = purchase.transactionId }
        return try await post(fields)
    }

    func get(_ uri: String, token: String?, headers: HTTPFields = [:]) async throws -> TestResponse {
        var headers = headers
        if let token { headers[.authorization] = "Bearer \(token)" }
        return try await client.execute(uri: uri, method: .get, headers: headers)
    }

    func ack(_ transactionID: String, token: String?) async throws -> TestResponse {
        var headers: HTTPFields = [:]
        if let token { headers[.authorization] = "Bearer \(token)" }
        return try await client.execute(uri: "/v1/downloads/\(transactionID)/ack", method: .post, headers: headers)
    }

    /// An admin API call, `/v1/admin/<path>`, with the bearer `token` and an optional JSON body.
    func admin(_ method: HTTPRequest.Method, _ path: String, token: String, body: [String: String]? = nil) async throws -> TestResponse {
        try await client.execute(
            uri: "/v1/admin/\(path)", method: method, headers: [.authorization: "Bearer \(token)"],
            body: try body.map { ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: $0)) })
    }

    /// Every row and attempt, to show that a refused request changed nothing.
    func snapshot() async throws -> [String] {
        var lines: [String] = []
        for row in try await ledger.list(FulfilmentListQuery(limit: 10_000)).sorted(by: { $0.transactionID < $1.transactionID }) {
            lines.append(
                """
                \(row.transactionID) \(row.state.rawValue) attempts=\(row.attempts) bytes=\(row.bytesDelivered) \
                error=\(row.lastError ?? "")
                """
            )
            for attempt in try await ledger.attempts(of: row.transactionID) {
                lines.append("  \(attempt.rangeStart ?? -1)-\(attempt.rangeEnd ?? -1) \(attempt.bytes) \(attempt.outcome.rawValue)")
            }
        }
        return lines
    }

    /// A snapshot once the ledger has settled: a download's end is recorded after its body went
    /// out, so right after a 200 the attempt may not be logged yet (more so on PostgreSQL).
    /// Waits (up to 30 s, a ceiling for a loaded machine) until every counted attempt is logged
    /// (as many as the log keeps) and two snapshots 100 ms apart agree; two equal snapshots alone
    /// were both taken before a late record on a loaded machine.
    func settledSnapshot() async throws -> [String] {
        var last = try await snapshot()
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(100))
            let next = try await snapshot()
            if next == last, try await everyAttemptLogged() { return next }
            last = next
        }
        return last
    }

    private func everyAttemptLogged() async throws -> Bool {
        for row in try await ledger.list(FulfilmentListQuery(limit: 10_000)) {
            let logged = try await ledger.attempts(of: row.transactionID).count
            if logged < min(row.attempts, DownloadAttempt.keptPerTransaction) { return false }
        }
        return true
    }

    /// Waits (up to 30 s, a ceiling for a loaded machine) until the ledger satisfies `condition`, as
    /// the body's end is recorded after it is sent.
    func eventually(_ condition: @Sendable () async throws -> Bool) async throws -> Bool {
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline {
            if try await condition() { return true }
            try await Task.sleep(for: .milliseconds(20))
        }
        return false
    }

    static func json(_ response: TestResponse) throws -> [String: Any] {
        try JSONSerialization.jsonObject(with: Data(buffer: response.body)) as? [String: Any] ?? [:]
    }

    static func code(_ response: TestResponse) throws -> String? {
        (try json(response)["error"] as? [String: Any])?["code"] as? String
    }

    /// A token minted with the test secret, e.g. already expired.
    static func token(_ transactionID: String, product: String = book, issuedAt: Date = Date()) -> String {
        DownloadTokenSigner(key: Array(ServerFixture.tokenSecret.utf8)).token(
            transactionID: transactionID, productID: product, now: issuedAt)
    }
}

extension SimulatorControl {
    /// The simulator's root certificate and App Store Server API key, read from its control API
    /// as a test (never the server) may.
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
