import AppStoreSimulator
import Foundation
import Hummingbird
import HummingbirdTesting
import StockroomTestSupport
import Testing
@testable import StockroomCore

/// The App Store Server API client against the simulator's `/inApps/v1/transactions/{id}`.
@Suite struct AppStoreServerAPIClientTests {
    static let bundle = "com.example.stockroom.demo"

    /// Runs `body` with a live simulator and a client holding its published API key.
    static func withAPI<Value: Sendable>(
        key: ECPrivateKey? = nil, cacheInterval: Duration = .zero,
        _ body: @Sendable @escaping (SimulatorControl, AppStoreServerAPIClient) async throws -> Value
    ) async throws -> Value {
        var configuration = SimulatorConfiguration()
        configuration.port = 0
        return try await buildSimulatorApplication(configuration: configuration).test(.live) { client in
            let control = SimulatorControl(client)
            let published =
                try JSONSerialization.jsonObject(
                    with: Data(buffer: try await client.execute(uri: "/sim/api-key", method: .get).body)) as! [String: String]
            let credentials = AppStoreServerAPIClient.Credentials(
                issuerID: published["issuerId"]!, keyID: published["keyId"]!, bundleID: bundle,
                privateKey: try key ?? ECPrivateKey(pem: published["privateKey"]!))
            let api = AppStoreServerAPIClient(
                credentials: credentials, endpoints: .base(control.baseURL), transport: CurlHTTPClient(),
                policy: RetryPolicy(
                    maximumAttempts: 4, initialBackoff: .milliseconds(5), maximumBackoff: .milliseconds(20), totalBudget: .seconds(20)),
                cacheInterval: cacheInterval)
            return try await body(control, api)
        }
    }

    static func verifier(_ control: SimulatorControl) async throws -> SignedTransactionVerifier {
        let pem = String(buffer: try await control.client.execute(uri: "/sim/root.pem", method: .get).body)
        return SignedTransactionVerifier(root: try Certificate(pem: pem), bundleID: bundle, environment: nil)
    }

    @Test func applesHostsAreTheOnesRecommendedSinceMay2026() {
        #expect(AppStoreServerAPIClient.Endpoints.apple.production == "https://api.storekit.apple.com")
        #expect(AppStoreServerAPIClient.Endpoints.apple.sandbox == "https://api.storekit-sandbox.apple.com")
    }

    @Test func aProductionTransactionIsFoundWithOneCall() async throws {
        try await Self.withAPI { control, api in
            let purchase = try await control.purchase()
            guard case .found(let info, let environment) = await api.transaction(purchase.transactionId) else {
                Issue.record("not found"); return
            }
            #expect(environment == .production)
            #expect(try await Self.verifier(control).verify(info).get().transactionId == purchase.transactionId)
            let calls = try await control.calls()
            #expect(calls.total == 1)
        }
    }

    @Test func a4040010InProductionFallsBackToTheSandbox() async throws {
        try await Self.withAPI { control, api in
            let purchase = try await control.purchase(environment: "Sandbox")
            guard case .found(_, let environment) = await api.transaction(purchase.transactionId) else { Issue.record("not found"); return }
            #expect(environment == .sandbox)
            let calls = try await control.calls()
            #expect(calls.total == 2)
            #expect(await api.transaction("2999999999999999") == .notFound)
        }
    }

    @Test func aRefundShowsInTheCurrentTransaction() async throws {
        try await Self.withAPI { control, api in
            let purchase = try await control.purchase()
            try await control.refund(purchase.transactionId)
            guard case .found(let info, _) = await api.transaction(purchase.transactionId) else { Issue.record("not found"); return }
            #expect(try await Self.verifier(control).verify(info).get().isRevoked)
        }
    }

    @Test func aTokenFromAnotherKeyIsRefused() async throws {
        try await Self.withAPI(key: try ECPrivateKey()) { control, api in
            let purchase = try await control.purchase()
            guard case .unavailable(let reason, _) = await api.transaction(purchase.transactionId) else { Issue.record("accepted"); return }
            #expect(reason.contains("401"))
            #expect(try await control.calls().total == 1, "refused credentials are not asked again within the request")
        }
    }

    @Test func serverErrorsAreRetriedAnd429HonoursRetryAfter() async throws {
        try await Self.withAPI { control, api in
            let purchase = try await control.purchase()
            try await control.fault(["kind": "http-status", "status": 503, "count": 2])
            guard case .found = await api.transaction(purchase.transactionId) else { Issue.record("not found after 503s"); return }
            let calls = try await control.calls()
            #expect(calls.total == 3)
            try await control.fault(["kind": "http-status", "status": 429, "retryAfter": 1])
            let start = ContinuousClock.now
            guard case .found = await api.transaction(purchase.transactionId) else { Issue.record("not found after 429"); return }
            #expect(ContinuousClock.now - start >= .milliseconds(950), "waited as Retry-After asked")
        }
    }

    @Test func aSecondLookupWithinTheCacheIntervalMakesNoUpstreamCall() async throws {
        try await Self.withAPI(cacheInterval: .seconds(60)) { control, api in
            let purchase = try await control.purchase()
            guard case .found(let first, _) = await api.transaction(purchase.transactionId, freshness: .cachedAllowed) else {
                Issue.record("not found"); return
            }
            // The default is the download path's: a cached answer will do.
            guard case .found(let second, _) = await api.transaction(purchase.transactionId) else { Issue.record("not found"); return }
            #expect(first == second)
            let lookups = try await control.serverAPICalls()
            #expect(lookups == 1)
            // A refund check that must be current asks Apple again, and sees the refund.
            try await control.refund(purchase.transactionId)
            guard case .found(let fresh, _) = await api.transaction(purchase.transactionId, freshness: .upstreamOnly) else {
                Issue.record("not found"); return
            }
            #expect(try await Self.verifier(control).verify(fresh).get().isRevoked)
            let lookupsAfterRefund = try await control.serverAPICalls()
            #expect(lookupsAfterRefund == 2)
        }
    }

    @Test func unavailableAndNotFoundAreNeverCached() async throws {
        try await Self.withAPI(cacheInterval: .seconds(60)) { control, api in
            let purchase = try await control.purchase()
            try await control.fault(["kind": "http-status", "status": 503, "count": 4])
            guard case .unavailable = await api.transaction(purchase.transactionId, freshness: .cachedAllowed) else {
                Issue.record("expected unavailable"); return
            }
            guard case .found = await api.transaction(purchase.transactionId, freshness: .cachedAllowed) else {
                Issue.record("the outage was cached"); return
            }
            #expect(await api.transaction("2999999999999999", freshness: .cachedAllowed) == .notFound)
            #expect(await api.transaction("2999999999999999", freshness: .cachedAllowed) == .notFound)
            #expect(
                await api.transaction("../../sim/api-key", freshness: .cachedAllowed) == .notFound,
                "no path is built from what is no transaction ID")
            let lookups = try await control.serverAPICalls()
            #expect(lookups == 4 + 1 + 4)
        }
    }

    @Test func theBearerTokenCarriesAppleClaims() async throws {
        try await Self.withAPI { _, api in
            let token = try api.bearerToken()
            let parts = token.split(separator: ".")
            let header = try JSONSerialization.jsonObject(with: Data(ByteEncoding.decodeBase64(parts[0])!)) as! [String: Any]
            let claims = try JSONSerialization.jsonObject(with: Data(ByteEncoding.decodeBase64(parts[1])!)) as! [String: Any]
            #expect(header["alg"] as? String == "ES256")
            #expect(header["kid"] as? String == api.credentials.keyID)
            #expect(claims["iss"] as? String == api.credentials.issuerID)
            #expect(claims["aud"] as? String == "appstoreconnect-v1")
            #expect(claims["bid"] as? String == Self.bundle)
            let lifetime = (claims["exp"] as! Int) - (claims["iat"] as! Int)
            #expect(lifetime > 0 && lifetime <= 3600)
            #expect(
                api.credentials.privateKey.publicKey.isValidSignature(
                    ByteEncoding.decodeBase64(parts[2])!, for: Array("\(parts[0]).\(parts[1])".utf8)))
            #expect(try api.bearerToken() == token, "reused until it nears expiry")
        }
    }
}
