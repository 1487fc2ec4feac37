import AppStoreSimulator
import Foundation
import Hummingbird
import HummingbirdTesting
import StockroomTestSupport
import Testing
@testable import StockroomCore

/// Finish Transaction and Send Consumption Information through the client, against the live
/// simulator over loopback with real libcurl.
@Suite struct ServerAPILifecycleTests {
    /// One call, asked again (twice at most) when it timed out upstream: the suite runs some 700
    /// tests on two cores, and a simulator stalled past the 10 s call timeout is the machine's
    /// load, not the classification these tests are about. Any other outcome stands.
    static func settled(_ call: () async -> ServerAPICallOutcome) async -> ServerAPICallOutcome {
        var outcome = await call()
        for _ in 0..<2 {
            guard case .retryLater(let reason, _) = outcome, reason.contains("timed out") else { return outcome }
            outcome = await call()
        }
        return outcome
    }

    static let information = ConsumptionInformation(
        customerConsented: true, deliveryStatus: .delivered, sampleContentProvided: false, consumptionPercentage: 25_000,
        refundPreference: .decline)

    @Test func finishMarksTheTransactionFinishedInItsEnvironment() async throws {
        try await AppStoreServerAPIClientTests.withAPI { control, api in
            let purchase = try await control.purchase()
            #expect(try await control.transactionView(purchase.transactionId)["finished"] as? Bool == false)
            #expect(await Self.settled { await api.finishTransaction(purchase.transactionId, environment: .production) } == .accepted)
            let view = try await control.transactionView(purchase.transactionId)
            #expect(view["finished"] as? Bool == true)
            let finishedDate = try #require(view["finishedDate"] as? Int64)
            #expect(
                await Self.settled { await api.finishTransaction(purchase.transactionId, environment: .production) } == .accepted,
                "finishing twice is fine")
            #expect(
                try await control.transactionView(purchase.transactionId)["finishedDate"] as? Int64 == finishedDate, "the first date stays")
            #expect(try await control.endpointCalls("finish") == 2)
        }
    }

    @Test func aTransactionTheEnvironmentDoesNotKnowIsNotFound() async throws {
        try await AppStoreServerAPIClientTests.withAPI { control, api in
            let sandbox = try await control.purchase(environment: "Sandbox")
            #expect(
                await Self.settled { await api.finishTransaction(sandbox.transactionId, environment: .production) } == .notFound,
                "no sandbox fallback")
            #expect(try await control.transactionView(sandbox.transactionId)["finished"] as? Bool == false)
            #expect(await Self.settled { await api.finishTransaction(sandbox.transactionId, environment: .sandbox) } == .accepted)
            #expect(await Self.settled { await api.finishTransaction("2999999999999999", environment: .production) } == .notFound)
            #expect(
                await Self.settled { await api.sendConsumptionInformation("2999999999999999", environment: .sandbox, Self.information) }
                    == .notFound)
            #expect(try await control.endpointCalls("finish") == 3)
        }
    }

    @Test func whatIsNoTransactionIDNeverReachesAURL() async throws {
        try await AppStoreServerAPIClientTests.withAPI { control, api in
            for hostile in ["../../sim/api-key", "", "1?x=1", "1/finish", String(repeating: "9", count: 65), "２０００"] {
                guard case .refused(_, _, let reason) = await api.finishTransaction(hostile, environment: .production) else {
                    Issue.record("\(hostile) was not refused"); continue
                }
                #expect(reason.contains("no call made"))
                guard case .refused = await api.sendConsumptionInformation(hostile, environment: .production, Self.information) else {
                    Issue.record("\(hostile) was not refused"); continue
                }
            }
            let calls = try await control.calls()
            #expect(calls.total == 0)
        }
    }

    @Test func a429WithRetryAfterIsRetryLaterWithThatWait() async throws {
        try await AppStoreServerAPIClientTests.withAPI { control, api in
            let purchase = try await control.purchase()
            try await control.fault(["kind": "http-status", "status": 429, "retryAfterSeconds": 2, "endpoint": "finish"])
            // A fault aimed at finish leaves the other endpoints alone.
            guard case .found = await api.transaction(purchase.transactionId) else {
                Issue.record("the lookup took the finish fault"); return
            }
            let outcome = await api.finishTransaction(purchase.transactionId, environment: .production)
            #expect(outcome == .retryLater(reason: "rate limited (429)", after: .seconds(2)))
            #expect(try await control.transactionView(purchase.transactionId)["finished"] as? Bool == false, "one attempt, no retry inside")
            #expect(await Self.settled { await api.finishTransaction(purchase.transactionId, environment: .production) } == .accepted)
        }
    }

    @Test func serverErrorsAndRefusedCredentialsAreRetryLater() async throws {
        try await AppStoreServerAPIClientTests.withAPI { control, api in
            let purchase = try await control.purchase()
            try await control.fault(["kind": "http-status", "status": 503, "endpoint": "consumption"])
            guard
                case .retryLater(_, let after) = await api.sendConsumptionInformation(
                    purchase.transactionId, environment: .production, Self.information)
            else { Issue.record("503 was not retryLater"); return }
            #expect(after == nil)
            try await control.fault(["kind": "http-status", "status": 429, "retryAfterSeconds": 86_400, "endpoint": "finish"])
            guard case .retryLater(_, let capped) = await api.finishTransaction(purchase.transactionId, environment: .production) else {
                Issue.record("429 was not retryLater"); return
            }
            #expect(capped == .seconds(3600), "Retry-After is bounded to an hour")
            #expect(try await control.transactionView(purchase.transactionId)["consumptionAnswers"] as? Int == 0)
        }
        try await AppStoreServerAPIClientTests.withAPI(key: try ECPrivateKey()) { control, api in
            let purchase = try await control.purchase()
            guard case .retryLater(let reason, _) = await api.finishTransaction(purchase.transactionId, environment: .production) else {
                Issue.record("a refused token was not retryLater"); return
            }
            #expect(reason.contains("401"))
            #expect(try await control.transactionView(purchase.transactionId)["finished"] as? Bool == false)
        }
    }

    @Test func aDeadUpstreamIsRetryLater() async throws {
        let credentials = AppStoreServerAPIClient.Credentials(issuerID: "i", keyID: "k", bundleID: "b", privateKey: try ECPrivateKey())
        let api = AppStoreServerAPIClient(credentials: credentials, endpoints: .base("http://127.0.0.1:1"), transport: CurlHTTPClient())
        guard case .retryLater = await api.finishTransaction("2000000000000001", environment: .production) else {
            Issue.record("not retryLater"); return
        }
        guard
            case .failure(.unavailable) = await api.notificationHistory(
                NotificationHistoryQuery(start: Date() - 3600, end: Date()), paginationToken: nil, environment: .production)
        else { Issue.record("not unavailable"); return }
    }

    @Test func consumptionIsStoredVerbatimAndCounted() async throws {
        try await AppStoreServerAPIClientTests.withAPI { control, api in
            let purchase = try await control.purchase(["productId": "com.example.stockroom.demo.coins", "type": "Consumable"])
            #expect(
                await Self.settled {
                    await api.sendConsumptionInformation(purchase.transactionId, environment: .production, Self.information)
                } == .accepted)
            var view = try await control.transactionView(purchase.transactionId)
            let stored = try #require(view["consumption"] as? [String: Any])
            #expect(stored["customerConsented"] as? Bool == true)
            #expect(stored["deliveryStatus"] as? String == "DELIVERED")
            #expect(stored["sampleContentProvided"] as? Bool == false)
            #expect(stored["consumptionPercentage"] as? Int == 25_000)
            #expect(stored["refundPreference"] as? String == "DECLINE")
            #expect(stored.count == 5)
            #expect(view["consumptionAnswers"] as? Int == 1)
            let bare = ConsumptionInformation(
                customerConsented: true, deliveryStatus: .undeliveredServerOutage, sampleContentProvided: true)
            #expect(
                await Self.settled { await api.sendConsumptionInformation(purchase.transactionId, environment: .production, bare) }
                    == .accepted)
            view = try await control.transactionView(purchase.transactionId)
            #expect(view["consumptionAnswers"] as? Int == 2)
            let last = try #require(view["consumption"] as? [String: Any])
            #expect(last.keys.sorted() == ["customerConsented", "deliveryStatus", "sampleContentProvided"], "nil fields are left out")
        }
    }

    @Test func aBodyAppleWouldRefuseIsRefusedWithApplesCode() async throws {
        try await AppStoreServerAPIClientTests.withAPI { control, api in
            let subscription = try await control.purchase(json: [
                "productId": "com.example.stockroom.demo.monthly", "expiresInSeconds": 3600,
            ])
            let percentage = ConsumptionInformation(
                customerConsented: true, deliveryStatus: .delivered, sampleContentProvided: false, consumptionPercentage: 10_000)
            guard
                case .refused(400, 4_000_209, _) = await api.sendConsumptionInformation(
                    subscription.transactionId, environment: .production, percentage)
            else {
                Issue.record("a percentage for an auto-renewable subscription was not refused with 4000209"); return
            }
            let book = try await control.purchase()
            var outOfRange = percentage
            outOfRange.consumptionPercentage = 100_001
            guard
                case .refused(400, _, let reason) = await api.sendConsumptionInformation(
                    book.transactionId, environment: .production, outOfRange)
            else {
                Issue.record("an out-of-range percentage was accepted"); return
            }
            #expect(reason.contains("ConsumptionPercentageOutOfRangeError"))
            let undelivered = ConsumptionInformation(
                customerConsented: true, deliveryStatus: .undeliveredOther, sampleContentProvided: false, consumptionPercentage: 5)
            guard
                case .refused(400, _, let nonZero) = await api.sendConsumptionInformation(
                    book.transactionId, environment: .production, undelivered)
            else {
                Issue.record("a non-zero percentage while undelivered was accepted"); return
            }
            #expect(nonZero.contains("UndeliveredConsumptionPercentageNonZeroError"))
            #expect(try await control.endpointCalls("consumption") == 3)
            // Without consent no call is made at all.
            var unconsented = Self.information
            unconsented.customerConsented = false
            #expect(
                await api.sendConsumptionInformation(book.transactionId, environment: .production, unconsented)
                    == .refused(status: 400, errorCode: 4_000_035, reason: "the customer did not consent; no call made"))
            #expect(try await control.endpointCalls("consumption") == 3)
            #expect(try await control.transactionView(book.transactionId)["consumptionAnswers"] as? Int == 0)
        }
    }
}

/// A control call the simulator refused.
struct ControlCallFailed: Error {
    var status: Int
    var body: String
}

/// The simulator's control API, for the lifecycle tests.
extension SimulatorControl {
    /// `GET /sim/transactions/{id}`: what Apple would know.
    func transactionView(_ id: String) async throws -> [String: Any] {
        let response = try await client.execute(uri: "/sim/transactions/\(id)", method: .get)
        guard response.status == .ok else { throw ControlCallFailed(status: response.status.code, body: String(buffer: response.body)) }
        return try JSONSerialization.jsonObject(with: Data(buffer: response.body)) as? [String: Any] ?? [:]
    }

    /// Calls `endpoint` received, in all environments.
    func endpointCalls(_ endpoint: String) async throws -> Int {
        let response = try await client.execute(uri: "/sim/stats", method: .get)
        let object = try JSONSerialization.jsonObject(with: Data(buffer: response.body)) as? [String: Any]
        return ((object?["endpoints"] as? [String: [String: Int]])?[endpoint] ?? [:]).values.reduce(0, +)
    }

    /// `PUT /sim/notification-url`; nil stops posting.
    func setNotificationURL(_ url: String?) async throws {
        let body = try JSONSerialization.data(withJSONObject: ["url": url.map { $0 as Any } ?? NSNull()])
        let response = try await client.execute(uri: "/sim/notification-url", method: .put, body: ByteBuffer(bytes: body))
        guard response.status == .noContent else {
            throw ControlCallFailed(status: response.status.code, body: String(buffer: response.body))
        }
    }

    /// `POST /sim/notifications` with `fields`.
    func mintNotification(_ fields: [String: any Sendable]) async throws -> TestResponse {
        try await client.execute(
            uri: "/sim/notifications", method: .post, body: ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: fields)))
    }
}
