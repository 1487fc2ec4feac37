import AppStoreSimulator
import Foundation
import Hummingbird
import HummingbirdTesting
import StockroomCore
import StockroomTestSupport
import Testing
@testable import StockroomServer

/// The simulator is a test tool, and upstream trust comes only from the configuration.
@Suite struct ConfigurationTrustTests {
    @Test func theDefaultUpstreamIsAppleAndMountsNoSimulator() async throws {
        var fixture = try ServerFixture()
        fixture.configuration.upstream = ServerConfiguration().upstream
        #expect(fixture.configuration.upstream == .apple)
        try await fixture.application().test(.router) { client in
            let purchase = try await client.execute(
                uri: "/simulator/sim/purchases", method: .post, body: ByteBuffer(string: #"{"productId": "com.example.book"}"#))
            #expect(purchase.status == .notFound)
            let key = try await client.execute(uri: "/simulator/sim/api-key", method: .get)
            #expect(key.status == .notFound)
        }
    }

    @Test func theSimulatorUpstreamMountsTheSimulatorOnLoopback() async throws {
        var fixture = try ServerFixture()
        fixture.configuration.upstream = .simulator
        fixture.configuration.port = 18_080  // never bound: the router test framework has no socket
        try await fixture.application().test(.router) { client in
            let purchase = try await client.execute(
                uri: "/simulator/sim/purchases", method: .post, body: ByteBuffer(string: #"{"productId": "com.example.book"}"#))
            #expect(purchase.status == .created)
        }
    }

    @Test(arguments: ["0.0.0.0", "::", "192.168.1.20", "10.0.0.1", "stockroom.example.com", "128.0.0.1", "::ffff:127.0.0.1"])
    func theSimulatorRefusesAHostOthersCanReach(host: String) async throws {
        var fixture = try ServerFixture()
        fixture.configuration.upstream = .simulator
        fixture.configuration.host = host
        fixture.configuration.port = 18_080
        await #expect {
            _ = try await fixture.application()
        } throws: { error in
            "\(error)"
                == #"""
                the built-in simulator (--upstream simulator) is a test tool and serves only a loopback --host (127.0.0.1, ::1, \#
                localhost), not "\#(host)"
                """#
        }
        #expect(!FileManager.default.fileExists(atPath: fixture.configuration.databaseLocation), "refused before the ledger is created")
    }

    @Test func loopbackHostsAreExactlyTheLocalOnes() {
        for host in ["127.0.0.1", "127.8.9.10", "::1", "[::1]", "0:0:0:0:0:0:0:1", "localhost", "LocalHost"] {
            #expect(LoopbackHost.contains(host), "\(host)")
        }
        for host in ["0.0.0.0", "::", "128.0.0.1", "127.0.0.1.example.com", "localhost.example.com", "", "127.0.0.256", "::2"] {
            #expect(!LoopbackHost.contains(host), "\(host)")
        }
    }

    @Test func aTrustRootIsRefusedWithApplesUpstream() async throws {
        var fixture = try ServerFixture()
        fixture.configuration.upstream = .apple
        fixture.configuration.trustedRoots = [try SigningChain().root]
        await #expect {
            _ = try await fixture.application()
        } throws: { error in
            "\(error)" == "--trust-root is for --upstream URL; with --upstream apple only Apple's roots are trusted"
        }
    }

    @Test func aServerAPIKeyGivenInPartIsRefused() async throws {
        var fixture = try ServerFixture()
        fixture.configuration.appStoreKeyID = "ABC123"
        await #expect {
            _ = try await fixture.application()
        } throws: { error in
            "\(error)" == "the App Store Server API needs --app-store-key, --app-store-key-id and --app-store-issuer-id together"
        }
    }

    /// A live simulator, its trust (root and API key), and a download body carrying one of its
    /// signed transactions for `com.example.book`.
    static func withSignedPurchase(
        _ body:
            @Sendable @escaping (SimulatorControl, (root: Certificate, credentials: AppStoreServerAPIClient.Credentials), Data) async throws
            -> Void
    ) async throws {
        var simulator = SimulatorConfiguration()
        simulator.port = 0
        simulator.bundleID = "com.example.stockroom.demo"
        let bundleID = simulator.bundleID
        try await buildSimulatorApplication(configuration: simulator).test(.live) { simulatorClient in
            let control = SimulatorControl(simulatorClient)
            let trust = try await control.trust(bundleID: bundleID)
            let purchase = try await control.purchase("com.example.book")
            try await body(
                control, trust,
                try JSONSerialization.data(withJSONObject: [
                    "productId": "com.example.book", "signedTransaction": purchase.signedTransaction,
                ]))
        }
    }

    @Test func aChainMayEndAtAnyOfSeveralTrustRoots() async throws {
        try await Self.withSignedPurchase { control, trust, body in
            var server = try ServerFixture()
            server.configuration.upstream = .url(control.baseURL)
            // Apple's root first, the simulator's second (two --trust-root flags).
            server.configuration.trustedRoots = [try AppleRootCertificates.rootCAG3(), trust.root]
            server.configuration.serverAPICredentials = trust.credentials
            try await buildApplication(configuration: server.configuration).test(.router) { client in
                let response = try await client.execute(uri: "/v1/downloads", method: .post, body: ByteBuffer(bytes: body))
                #expect(response.status == .ok)
            }
        }
    }

    @Test func aURLUpstreamTrustsOnlyTheRootsItIsGiven() async throws {
        try await Self.withSignedPurchase { control, trust, body in

            // Not named: the server does not take the simulator's published root on its word.
            var untrusting = try ServerFixture()
            untrusting.configuration.upstream = .url(control.baseURL)
            try await buildApplication(configuration: untrusting.configuration).test(.router) { client in
                let response = try await client.execute(uri: "/v1/downloads", method: .post, body: ByteBuffer(bytes: body))
                #expect(response.status == .forbidden)
                #expect(String(buffer: response.body).contains("jws_bad_chain"))
            }
            #expect(try await control.calls().total == 0, "nothing was fetched from or asked of the upstream")

            // Named (--trust-root, --app-store-key): the same transaction downloads.
            var trusting = try ServerFixture()
            trusting.configuration.upstream = .url(control.baseURL)
            trusting.configuration.trustedRoots = [trust.root]
            trusting.configuration.serverAPICredentials = trust.credentials
            try await buildApplication(configuration: trusting.configuration).test(.router) { client in
                let response = try await client.execute(uri: "/v1/downloads", method: .post, body: ByteBuffer(bytes: body))
                #expect(response.status == .ok)
                #expect(Array(buffer: response.body) == ServerFixture.book)
            }
        }
    }
}
