import Foundation
import Hummingbird
import HummingbirdTesting
@testable import StockroomCore
import StockroomTestSupport
import Testing
@testable import AppStoreSimulator

/// Get Transaction History v2, served by the simulator and read by the App Store Server API client.
@Suite struct TransactionHistoryWireTests {
    static let bundle = "com.example.stockroom.demo"

    /// A live simulator and a client holding its published key; its 60 s budget is a ceiling for a
    /// loaded machine (a sandbox lookup follows production's 4040010 within the same budget).
    static func withAPI<Value: Sendable>(_ body: @Sendable @escaping (SimulatorControl, AppStoreServerAPIClient) async throws -> Value)
        async throws -> Value
    {
        var configuration = SimulatorConfiguration()
        configuration.port = 0
        configuration.bundleID = bundle
        return try await buildSimulatorApplication(configuration: configuration).test(.live) { client in
            let control = SimulatorControl(client)
            let published =
                try JSONSerialization.jsonObject(with: Data(buffer: try await client.execute(uri: "/sim/api-key", method: .get).body))
                as? [String: String] ?? [:]
            let credentials = AppStoreServerAPIClient.Credentials(
                issuerID: published["issuerId"] ?? "", keyID: published["keyId"] ?? "", bundleID: bundle,
                privateKey: try ECPrivateKey(pem: published["privateKey"] ?? ""))
            let api = AppStoreServerAPIClient(
                credentials: credentials, endpoints: .base(control.baseURL), transport: CurlHTTPClient(),
                policy: RetryPolicy(
                    maximumAttempts: 3, initialBackoff: .milliseconds(5), maximumBackoff: .milliseconds(20), totalBudget: .seconds(60)))
            return try await body(control, api)
        }
    }

    static func transactionIDs(_ signed: [String], _ control: SimulatorControl) async throws -> [String] {
        let pem = String(buffer: try await control.client.execute(uri: "/sim/root.pem", method: .get).body)
        let verifier = SignedTransactionVerifier(root: try Certificate(pem: pem), bundleID: bundle, environment: nil)
        return try signed.map { try verifier.verify($0).get().transactionId }
    }

    @Test func aCustomersHistoryComesInPagesOfTwentyOldestFirstAndLeavesOtherDevicesOut() async throws {
        try await Self.withAPI { control, api in
            var bought: [String] = []
            for index in 0..<23 {
                bought.append(try await control.purchase(["productId": "com.example.p\(index)", "deviceId": "device-a"]).transactionId)
            }
            _ = try await control.purchase(["productId": "com.example.p0", "deviceId": "device-b"])
            let first = try await api.transactionHistory(bought[5], revision: nil).get()
            #expect(first.signedTransactions.count == 20)
            #expect(first.hasMore)
            #expect(first.environment == .production)
            #expect(first.bundleID == Self.bundle)
            let second = try await api.transactionHistory(bought[5], revision: first.revision, environment: first.environment).get()
            #expect(second.signedTransactions.count == 3)
            #expect(!second.hasMore)
            #expect(try await Self.transactionIDs(first.signedTransactions + second.signedTransactions, control) == bought)
            var pages: [Int] = []
            let whole = try await api.fullTransactionHistory(bought[0]) { page, _ in pages.append(page) }.get()
            #expect(whole.pages == 2)
            #expect(pages == [1, 2])
            #expect(whole.signedTransactions.count == 23)
        }
    }

    @Test func aSandboxTransactionIsFoundAfter4040010AndAnUnknownOneIsNotFound() async throws {
        try await Self.withAPI { control, api in
            let purchase = try await control.purchase(environment: "Sandbox")
            let page = try await api.transactionHistory(purchase.transactionId, revision: nil).get()
            #expect(page.environment == .sandbox)
            #expect(try await Self.transactionIDs(page.signedTransactions, control) == [purchase.transactionId])
            #expect(await api.transactionHistory("2999999999999999", revision: nil) == .failure(.notFound))
            #expect(await api.transactionHistory("../../etc", revision: nil) == .failure(.notFound), "no ID enters the URL unchecked")
        }
    }

    @Test func theSimulatorAsksForTheBearerTokenAndReadsItsOwnRevisionsOnly() async throws {
        try await Self.withAPI { control, _ in
            let purchase = try await control.purchase()
            let bare = try await control.client.execute(uri: "/inApps/v2/history/\(purchase.transactionId)", method: .get)
            #expect(bare.status == .unauthorized)
            let json = try JSONSerialization.jsonObject(with: Data(buffer: bare.body)) as? [String: Any]
            #expect(json?["errorCode"] as? Int == 4010000)
        }
        try await Self.withAPI { control, api in
            let purchase = try await control.purchase()
            let token = try api.bearerToken()
            let forged = try await control.client.execute(
                uri: "/inApps/v2/history/\(purchase.transactionId)?revision=bm90LW91cnM", method: .get,
                headers: [.authorization: "Bearer \(token)"])
            #expect(forged.status == .badRequest)
            let json = try JSONSerialization.jsonObject(with: Data(buffer: forged.body)) as? [String: Any]
            #expect(json?["errorCode"] as? Int == 4000005)
        }
    }

    @Test func revokedAndDescendingFiltersFollowApplesParameters() async throws {
        try await Self.withAPI { control, api in
            let kept = try await control.purchase(["productId": "com.example.a", "deviceId": "d"])
            let refunded = try await control.purchase(["productId": "com.example.b", "deviceId": "d"])
            try await control.refund(refunded.transactionId)
            let token = try api.bearerToken()
            func ids(_ query: String) async throws -> [String] {
                let response = try await control.client.execute(
                    uri: "/inApps/v2/history/\(kept.transactionId)?\(query)", method: .get, headers: [.authorization: "Bearer \(token)"])
                let json = try JSONSerialization.jsonObject(with: Data(buffer: response.body)) as? [String: Any]
                return try await Self.transactionIDs(json?["signedTransactions"] as? [String] ?? [], control)
            }
            #expect(try await ids("revoked=false") == [kept.transactionId])
            #expect(try await ids("revoked=true") == [refunded.transactionId])
            #expect(try await ids("sort=DESCENDING") == [refunded.transactionId, kept.transactionId])
            #expect(try await ids("productId=com.example.b") == [refunded.transactionId])
        }
    }

    @Test func a429WithRetryAfterIsRetriedAndAnOutageIsUnavailable() async throws {
        try await Self.withAPI { control, api in
            let purchase = try await control.purchase()
            try await control.fault(["kind": "http-status", "status": 429, "retryAfter": 0, "count": 1])
            #expect(try await api.transactionHistory(purchase.transactionId, revision: nil).get().signedTransactions.count == 1)
            try await control.fault(["kind": "http-status", "status": 503, "count": 10])
            guard case .failure(.unavailable) = await api.transactionHistory(purchase.transactionId, revision: nil) else {
                Issue.record("an outage must be unavailable")
                return
            }
        }
    }

    @Test func aHistoryThatSaysHasMoreForeverEndsAtThePageBound() async throws {
        let api = AppStoreServerAPIClient(
            credentials: .init(issuerID: "i", keyID: "k", bundleID: Self.bundle, privateKey: try ECPrivateKey()),
            endpoints: .base("http://hostile.invalid"), transport: EndlessHistory(), policy: RetryPolicy(maximumAttempts: 1))
        let result = await api.fullTransactionHistory("2000000000000001", maximumPages: 7)
        guard case .failure(.unavailable(let reason, _)) = result else {
            Issue.record("an endless history must end as unavailable, not \(result)")
            return
        }
        #expect(reason.contains("more than 7 pages"))
        #expect(await EndlessHistory.calls.value == 7)
    }
}

/// A hostile upstream (it cannot run here otherwise): every page says `hasMore` with a new revision.
private struct EndlessHistory: UpstreamTransport {
    static let calls = Counter()

    func send(_ request: UpstreamRequest) async throws(UpstreamError) -> UpstreamResponse {
        let page = await Self.calls.increment()
        let body =
            #"""
            {"signedTransactions":[],"hasMore":true,"revision":"r\#(page)","bundleId":"com.example.stockroom.demo",\#
            "environment":"Production"}
            """#
        return UpstreamResponse(status: 200, body: Array(body.utf8))
    }

    actor Counter {
        var value = 0
        func increment() -> Int {
            value += 1
            return value
        }
    }
}
