import AppStoreSimulator
import Foundation
import Hummingbird
import HummingbirdTesting
import StockroomTestSupport
import Testing
@testable import StockroomCore

/// Get Notification History through the client, against the live simulator, and what the
/// simulator keeps: delivered, failed and never-sent notifications.
@Suite struct ServerAPINotificationHistoryTests {
    static let lastHour = NotificationHistoryQuery(start: Date() - 3600, end: Date() + 3600)

    /// Every page of `query`, and how many pages it took.
    static func everything(
        _ api: AppStoreServerAPIClient, _ query: NotificationHistoryQuery = lastHour, environment: StoreEnvironment = .production
    ) async throws -> (payloads: [String], pages: Int) {
        var payloads: [String] = []
        var token: String?
        for page in 1...NotificationHistoryPage.maximumPagesPerSync {
            let answer = try await api.notificationHistory(query, paginationToken: token, environment: environment).get()
            payloads += answer.signedPayloads
            guard answer.hasMore else { return (payloads, page) }
            guard let next = answer.paginationToken else { Issue.record("hasMore without a token"); break }
            token = next
        }
        Issue.record("paging did not end")
        return (payloads, NotificationHistoryPage.maximumPagesPerSync)
    }

    /// The decoded payload of a JWS (the simulator signed it; these tests read it only).
    static func payload(_ jws: String) throws -> [String: Any] {
        let part = try #require(jws.split(separator: ".").dropFirst().first)
        let bytes = try #require(ByteEncoding.decodeBase64(part))
        let object = try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any]
        return try #require(object)
    }

    static func transactionID(of notification: [String: Any]) throws -> String {
        let data = try #require(notification["data"] as? [String: Any])
        let info = try #require(data["signedTransactionInfo"] as? String)
        let transaction = try payload(info)
        return try #require(transaction["transactionId"] as? String)
    }

    @Test func historyPagesThroughEveryMintedNotificationOnce() async throws {
        try await AppStoreServerAPIClientTests.withAPI { control, api in
            var bought: [String] = []
            for number in 0..<23 {
                let type = number % 2 == 0 ? "Consumable" : "Non-Consumable"
                bought.append(
                    try await control.purchase(["productId": "com.example.stockroom.demo.item\(number)", "type": type]).transactionId)
            }
            _ = try await control.purchase(json: ["productId": "com.example.stockroom.demo.monthly", "expiresInSeconds": 3600])
            let request = try await control.mintNotification(
                ["type": "CONSUMPTION_REQUEST", "transactionId": bought[0], "consumptionRequestReason": "UNINTENDED_PURCHASE"])
            #expect(request.status == .created)
            let (payloads, pages) = try await Self.everything(api)
            #expect(pages == 2, "20 to a page")
            let notifications = try payloads.map(Self.payload)
            #expect(Set(notifications.compactMap { $0["notificationUUID"] as? String }).count == 24, "each once")
            let charges = notifications.filter { $0["notificationType"] as? String == "ONE_TIME_CHARGE" }
            #expect(
                try Set(charges.map(Self.transactionID)) == Set(bought),
                "one ONE_TIME_CHARGE per one-time purchase, none for the subscription")
            let consumption = try #require(notifications.last)
            #expect(consumption["notificationType"] as? String == "CONSUMPTION_REQUEST")
            #expect((consumption["data"] as? [String: Any])?["consumptionRequestReason"] as? String == "UNINTENDED_PURCHASE")
            let filtered = try await Self.everything(
                api, NotificationHistoryQuery(start: Date() - 3600, end: Date() + 60, notificationType: "CONSUMPTION_REQUEST"))
            #expect(filtered.payloads.count == 1)
            let byTransaction = try await Self.everything(
                api, NotificationHistoryQuery(start: Date() - 3600, end: Date() + 60, transactionID: bought[0]))
            #expect(try byTransaction.payloads.map { try Self.transactionID(of: try Self.payload($0)) } == [bought[0], bought[0]])
            #expect(try await control.endpointCalls("notificationHistory") == 2 + 1 + 1)
        }
    }

    @Test func onlyFailuresListsWhatWasNotDelivered() async throws {
        try await ServerAPISimulatorWireTests.withReceiver { url, inbox in
            try await AppStoreServerAPIClientTests.withAPI { control, api in
                try await control.setNotificationURL(url)
                let delivered = try await control.purchase()
                try await control.setNotificationURL("http://127.0.0.1:1/dead")
                let failed = try await control.purchase()
                try await control.setNotificationURL(nil)
                let unsent = try await control.purchase()
                #expect(await inbox.count == 1)
                var failures = NotificationHistoryQuery(start: Date() - 3600, end: Date() + 60)
                failures.onlyFailures = true
                let listed = try await Self.everything(api, failures).payloads.map { try Self.transactionID(of: try Self.payload($0)) }
                #expect(listed == [failed.transactionId, unsent.transactionId])
                let all = try await Self.everything(api).payloads.map { try Self.transactionID(of: try Self.payload($0)) }
                #expect(all == [delivered.transactionId, failed.transactionId, unsent.transactionId])
            }
        }
    }

    @Test func sandboxAndProductionHistoriesAreSeparate() async throws {
        try await AppStoreServerAPIClientTests.withAPI { control, api in
            let production = try await control.purchase()
            let sandbox = try await control.purchase(environment: "Sandbox")
            let inProduction = try await Self.everything(api).payloads.map { try Self.transactionID(of: try Self.payload($0)) }
            let inSandbox = try await Self.everything(api, environment: .sandbox).payloads.map {
                try Self.transactionID(of: try Self.payload($0))
            }
            #expect(inProduction == [production.transactionId])
            #expect(inSandbox == [sandbox.transactionId])
        }
    }

    @Test func aQueryAppleRefusesIsRefusedWithApplesCode() async throws {
        try await AppStoreServerAPIClientTests.withAPI { control, api in
            let purchase = try await control.purchase()
            let old = NotificationHistoryQuery(start: Date() - 200 * 86_400, end: Date())
            #expect(await api.notificationHistory(old, paginationToken: nil, environment: .production).error?.code == 4_000_012)
            let backwards = NotificationHistoryQuery(start: Date(), end: Date() - 60)
            #expect(await api.notificationHistory(backwards, paginationToken: nil, environment: .production).error?.code == 4_000_013)
            let both = NotificationHistoryQuery(
                start: Date() - 60, end: Date(), notificationType: "REFUND", transactionID: purchase.transactionId)
            #expect(await api.notificationHistory(both, paginationToken: nil, environment: .production).error?.code == 4_000_019)
            let unknownType = NotificationHistoryQuery(start: Date() - 60, end: Date(), notificationType: "NOT_A_TYPE")
            #expect(await api.notificationHistory(unknownType, paginationToken: nil, environment: .production).error?.code == 4_000_018)
            #expect(
                await api.notificationHistory(Self.lastHour, paginationToken: "forged", environment: .production).error?.code == 4_000_014)
            #expect(try await control.endpointCalls("notificationHistory") == 5, "a refusal is not retried")
        }
    }

    @Test func aTokenFromAnotherQueryOrEnvironmentIsRefused() async throws {
        try await AppStoreServerAPIClientTests.withAPI { control, api in
            for number in 0..<21 { _ = try await control.purchase(["productId": "com.example.stockroom.demo.item\(number)"]) }
            let first = try await api.notificationHistory(Self.lastHour, paginationToken: nil, environment: .production).get()
            let token = try #require(first.paginationToken)
            #expect(first.signedPayloads.count == 20)
            #expect(await api.notificationHistory(Self.lastHour, paginationToken: token, environment: .sandbox).error?.code == 4_000_014)
            var other = Self.lastHour
            other.onlyFailures = true
            #expect(await api.notificationHistory(other, paginationToken: token, environment: .production).error?.code == 4_000_014)
            let second = try await api.notificationHistory(Self.lastHour, paginationToken: token, environment: .production).get()
            #expect(second.signedPayloads.count == 1)
            #expect(!second.hasMore && second.paginationToken == nil)
        }
    }

    @Test func transientFailuresAreRetriedWithinTheBudget() async throws {
        try await AppStoreServerAPIClientTests.withAPI { control, api in
            _ = try await control.purchase()
            try await control.fault(["kind": "http-status", "status": 429, "retryAfterSeconds": 1, "endpoint": "notificationHistory"])
            try await control.fault(["kind": "malformed", "endpoint": "notificationHistory"])
            let start = ContinuousClock.now
            let page = try await api.notificationHistory(Self.lastHour, paginationToken: nil, environment: .production).get()
            #expect(ContinuousClock.now - start >= .milliseconds(950), "waited as Retry-After asked")
            #expect(page.signedPayloads.count == 1)
            #expect(try await control.endpointCalls("notificationHistory") == 3)
            try await control.fault(["kind": "http-status", "status": 503, "count": 4, "endpoint": "notificationHistory"])
            guard
                case .failure(.unavailable(let reason, _)) = await api.notificationHistory(
                    Self.lastHour, paginationToken: nil, environment: .production)
            else { Issue.record("four 503s were not unavailable"); return }
            #expect(reason.contains("4 attempt"))
        }
    }
}

extension Result where Failure == ServerAPIFailure {
    /// The refusal's Apple error code, when this is a refusal.
    var error: (status: Int, code: Int?)? {
        guard case .failure(.refused(let status, let code, _)) = self else { return nil }
        return (status, code)
    }
}
