import AppStoreSimulator
import Foundation
import Hummingbird
import HummingbirdTesting
import StockroomTestSupport
import Testing
@testable import StockroomCore

/// The simulator's lifecycle endpoints byte for byte as Apple's clients read them, its
/// notifications as a server receives them, and the client's limits on hostile pages.
@Suite struct ServerAPISimulatorWireTests {
    /// Collects what the simulator posts to `url`.
    actor Inbox {
        private(set) var bodies: [[UInt8]] = []
        var count: Int { bodies.count }
        func add(_ body: [UInt8]) { bodies.append(body) }
    }

    /// Runs `body` with a live loopback receiver for notifications at the URL it is given.
    static func withReceiver<Value: Sendable>(_ body: @Sendable @escaping (String, Inbox) async throws -> Value) async throws -> Value {
        let inbox = Inbox()
        let router = Router()
        router.post("hook") { request, _ -> HTTPResponse.Status in
            await inbox.add(Array(buffer: try await request.body.collect(upTo: 1 << 20)))
            return .ok
        }
        let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)))
        return try await app.test(.live) { client in try await body("http://127.0.0.1:\(client.port!)/hook", inbox) }
    }

    /// A raw call with the client's bearer token (or `token`).
    static func call(
        _ control: SimulatorControl, _ api: AppStoreServerAPIClient, _ method: HTTPRequest.Method, _ uri: String, json: String? = nil,
        token: String? = nil
    ) async throws -> (status: Int, body: [String: Any], raw: String) {
        let bearer = try token ?? api.bearerToken()
        let response = try await control.client.execute(
            uri: uri, method: method, headers: [.authorization: "Bearer \(bearer)"], body: json.map { ByteBuffer(string: $0) })
        let raw = String(buffer: response.body)
        let object = raw.isEmpty ? [:] : (try? JSONSerialization.jsonObject(with: Data(raw.utf8)) as? [String: Any]) ?? [:]
        return (response.status.code, object, raw)
    }

    @Test func finishAndConsumptionAnswerInApplesShapes() async throws {
        try await AppStoreServerAPIClientTests.withAPI { control, api in
            let purchase = try await control.purchase()
            let id = purchase.transactionId
            let finish = try await Self.call(control, api, .post, "/inApps/v1/transactions/\(id)/finish")
            #expect(finish.status == 200 && finish.raw.isEmpty)
            #expect(try await Self.call(control, api, .post, "/inApps/v1/transactions/\(id)/finish", token: "x.y.z").status == 401)
            #expect(
                try await Self.call(control, api, .post, "/sandbox/inApps/v1/transactions/\(id)/finish").body["errorCode"] as? Int
                    == 4_040_010)
            #expect(try await Self.call(control, api, .post, "/inApps/v1/transactions/abc/finish").body["errorCode"] as? Int == 4_000_006)
            let path = "/inApps/v2/transactions/consumption/\(id)"
            let good = #"{"customerConsented":true,"deliveryStatus":"DELIVERED","sampleContentProvided":true,"consumptionPercentage":0}"#
            let accepted = try await Self.call(control, api, .put, path, json: good)
            #expect(accepted.status == 202 && accepted.raw.isEmpty)
            let refusals: [(String, Int?)] = [
                (#"{"customerConsented":false,"deliveryStatus":"DELIVERED","sampleContentProvided":true}"#, 4_000_035),
                (#"{"customerConsented":1,"deliveryStatus":"DELIVERED","sampleContentProvided":true}"#, 4_000_035),
                (#"{"deliveryStatus":"DELIVERED","sampleContentProvided":true}"#, 4_000_035),
                (#"{"customerConsented":true,"deliveryStatus":"LOST","sampleContentProvided":true}"#, 4_000_036),
                (#"{"customerConsented":true,"deliveryStatus":"DELIVERED"}"#, 4_000_041),
                (#"{"customerConsented":true,"deliveryStatus":"DELIVERED","sampleContentProvided":"yes"}"#, 4_000_041),
                (
                    #"{"customerConsented":true,"deliveryStatus":"DELIVERED","sampleContentProvided":true,"refundPreference":"MAYBE"}"#,
                    4_000_044
                ),
                (
                    #"{"customerConsented":true,"deliveryStatus":"DELIVERED","sampleContentProvided":true,"consumptionPercentage":4.5}"#,
                    4_000_000
                ),
                (
                    #"{"customerConsented":true,"deliveryStatus":"DELIVERED","sampleContentProvided":true,"consumptionPercentage":1e30}"#,
                    4_000_000
                ),
                (
                    #"{"customerConsented":true,"deliveryStatus":"DELIVERED","sampleContentProvided":true,"consumptionPercentage":-1}"#,
                    4_000_000
                ),
                ("not json", nil),
            ]
            for (body, code) in refusals {
                let refused = try await Self.call(control, api, .put, path, json: body)
                #expect(refused.status == 400, "\(body)")
                #expect(refused.body["errorCode"] as? Int == code, "\(body)")
            }
            let view = try await control.transactionView(id)
            #expect(view["consumptionAnswers"] as? Int == 1, "refused bodies are not counted")
            #expect((view["consumption"] as? [String: Any])?["sampleContentProvided"] as? Bool == true, "the accepted body stays")
        }
    }

    @Test func historyEntriesCarryTheirSendAttempts() async throws {
        try await Self.withReceiver { url, inbox in
            try await AppStoreServerAPIClientTests.withAPI { control, api in
                try await control.setNotificationURL(url)
                _ = try await control.purchase()
                try await control.setNotificationURL("http://127.0.0.1:1/dead")
                _ = try await control.purchase()
                #expect(await inbox.count == 1)
                let now = Int64(Date().timeIntervalSince1970 * 1000)
                let history = try await Self.call(
                    control, api, .post, "/inApps/v1/notifications/history",
                    json: #"{"startDate":\#(now - 60_000),"endDate":\#(now + 60_000)}"#)
                #expect(history.status == 200)
                #expect(history.body["hasMore"] as? Bool == false)
                #expect(history.body["paginationToken"] == nil)
                let entries = try #require(history.body["notificationHistory"] as? [[String: Any]])
                let results = entries.map { ($0["sendAttempts"] as? [[String: Any]])?.map { $0["sendAttemptResult"] as? String } }
                #expect(results == [["SUCCESS"], ["SOCKET_ISSUE"]])
                #expect(
                    entries.allSatisfy { (($0["sendAttempts"] as? [[String: Any]])?.first?["attemptDate"] as? Int64 ?? 0) >= now - 60_000 })
                let missing = try await Self.call(control, api, .post, "/inApps/v1/notifications/history", json: #"{"endDate":\#(now)}"#)
                #expect(missing.body["errorCode"] as? Int == 4_000_015)
                #expect(try await Self.call(control, api, .post, "/inApps/v1/notifications/history", json: "{}", token: "x").status == 401)
            }
        }
    }

    @Test func aOneTimeChargeReachesTheServerBeforeThePurchaseAnswers() async throws {
        try await Self.withReceiver { url, inbox in
            try await AppStoreServerAPIClientTests.withAPI { control, api in
                try await control.setNotificationURL(url)
                let response = try await control.client.execute(
                    uri: "/sim/purchases", method: .post,
                    body: ByteBuffer(string: #"{"productId":"com.example.stockroom.demo.coins","type":"Consumable"}"#))
                #expect(response.headers[.init("X-Notification-Status")!] == "200")
                let purchase = try JSONSerialization.jsonObject(with: Data(buffer: response.body)) as? [String: Any]
                let body = try #require(await inbox.bodies.first)
                let signed = try #require(
                    (try JSONSerialization.jsonObject(with: Data(body)) as? [String: Any])?["signedPayload"] as? String)
                let notification = try AppStoreNotification.verify(signed, with: try await AppStoreServerAPIClientTests.verifier(control))
                    .get()
                #expect(notification.notificationType == .oneTimeCharge)
                #expect(notification.transaction?.transactionId == purchase?["transactionId"] as? String)
                // A subscription's purchase raises no ONE_TIME_CHARGE; a restore neither.
                _ = try await control.purchase(json: ["productId": "com.example.stockroom.demo.monthly", "expiresInSeconds": 3600])
                _ = try await control.purchase([
                    "productId": "com.example.stockroom.demo.book1", "originalTransactionId": purchase?["transactionId"] as? String ?? "",
                ])
                #expect(await inbox.count == 1)
                _ = api
            }
        }
    }

    @Test func aRevocationMintedThroughTheSimulatorShowsInTheTransaction() async throws {
        try await AppStoreServerAPIClientTests.withAPI { control, api in
            let purchase = try await control.purchase(["productId": "com.example.stockroom.demo.coins", "type": "Consumable"])
            let minted = try await control.mintNotification([
                "type": "REFUND", "transactionId": purchase.transactionId, "revocationType": "REFUND_PRORATED",
                "revocationPercentage": 40_000,
            ])
            #expect(minted.status == .created)
            let signed = try #require(
                (try JSONSerialization.jsonObject(with: Data(buffer: minted.body)) as? [String: Any])?["signedPayload"] as? String)
            let info = try ServerAPINotificationHistoryTests.payload(
                try #require(
                    (try ServerAPINotificationHistoryTests.payload(signed)["data"] as? [String: Any])?["signedTransactionInfo"] as? String))
            #expect(info["revocationType"] as? String == "REFUND_PRORATED")
            #expect(info["revocationPercentage"] as? Int == 40_000)
            #expect(info["revocationDate"] is Int64)
            let view = try await control.transactionView(purchase.transactionId)
            #expect(view["revoked"] as? Bool == true)
            #expect(view["revocationType"] as? String == "REFUND_PRORATED")
            guard case .found(let current, _) = await api.transaction(purchase.transactionId) else { Issue.record("not found"); return }
            #expect(try await AppStoreServerAPIClientTests.verifier(control).verify(current).get().isRevoked)
            let family = try await control.purchase()
            #expect(try await control.mintNotification(["type": "REVOKE", "transactionId": family.transactionId]).status == .created)
            #expect(try await control.transactionView(family.transactionId)["revocationType"] as? String == "FAMILY_REVOKE")
            #expect(
                try await control.mintNotification(["type": "REFUND_REVERSED", "transactionId": family.transactionId]).status == .created)
            #expect(try await control.transactionView(family.transactionId)["revoked"] as? Bool == false)
            for bad: [String: any Sendable] in [
                [
                    "type": "REFUND", "transactionId": family.transactionId, "revocationType": "REFUND_PRORATED",
                    "revocationPercentage": 100_001,
                ],
                ["type": "REFUND", "transactionId": family.transactionId, "revocationPercentage": 5],
                ["type": "REFUND_DECLINED", "transactionId": family.transactionId, "revocationType": "REFUND_FULL"],
                ["type": "CONSUMPTION_REQUEST", "transactionId": family.transactionId, "consumptionRequestReason": "BORED"],
                ["type": "NOT_A_TYPE", "transactionId": family.transactionId],
            ] {
                #expect(try await control.mintNotification(bad).status == .badRequest, "\(bad)")
            }
            #expect(try await control.transactionView(family.transactionId)["revoked"] as? Bool == false, "refused mints change nothing")
        }
    }

    @Test func hostilePagesAreRefusedNotTrusted() throws {
        typealias Client = AppStoreServerAPIClient
        func page(_ json: String, sent: String? = nil) -> String? {
            switch Client.page(from: Array(json.utf8), sentToken: sent) {
            case .success: nil
            case .failure(let problem): problem.reason
            }
        }
        #expect(page(#"{"notificationHistory":[],"hasMore":false}"#) == nil)
        #expect(page(#"{"notificationHistory":[],"hasMore":true}"#) != nil, "hasMore without a token")
        #expect(
            page(#"{"notificationHistory":[],"hasMore":true,"paginationToken":"same"}"#, sent: "same") != nil,
            "a token that does not advance")
        #expect(page(#"{"notificationHistory":[],"hasMore":true,"paginationToken":"\#(String(repeating: "t", count: 5000))"}"#) != nil)
        #expect(page(#"{"notificationHistory":"x","hasMore":false}"#) != nil)
        #expect(page(#"{"notificationHistory":[{"signedPayload":7}],"hasMore":false}"#) != nil)
        #expect(page("[1,2]") != nil)
        let many = "[" + Array(repeating: #"{"signedPayload":"a.b.c"}"#, count: 1_001).joined(separator: ",") + "]"
        #expect(page(#"{"notificationHistory":\#(many),"hasMore":false}"#) != nil)
        #expect(Client.appleError(in: Array(#"{"errorCode":1e300,"errorMessage":"x"}"#.utf8)).code == nil)
        #expect(Client.appleError(in: Array(#"{"errorCode":4.5}"#.utf8)).code == nil)
        #expect(Client.appleError(in: Array(#"{"errorCode":4000014}"#.utf8)).code == 4_000_014)
        #expect(Client.queryValue("a+b/c=") == "a%2Bb%2Fc%3D")
        #expect(NotificationHistoryQuery(start: .distantPast, end: Date(timeIntervalSince1970: .infinity)).body() == nil)
    }
}
