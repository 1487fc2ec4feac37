import Foundation
import Hummingbird
import HummingbirdTesting
import StockroomCore
import StockroomTestSupport
import Testing
@testable import AppStoreSimulator

/// The simulator's control API for the purchase lifecycle: aimed faults, what Apple knows of a
/// transaction, and where ONE_TIME_CHARGE goes.
@Suite struct LifecycleControlTests {
    static func post(_ control: SimulatorControl, _ uri: String, _ json: String) async throws -> TestResponse {
        try await control.client.execute(uri: uri, method: .post, body: ByteBuffer(string: json))
    }

    @Test func aFaultIsAimedOnlyAtAKnownEndpointAndAnHonestRetryAfter() async throws {
        try await VerifyReceiptWireTests.live { control in
            #expect(
                try await Self.post(
                    control, "/sim/faults", #"{"kind":"http-status","status":429,"endpoint":"finish","retryAfterSeconds":2}"#
                ).status == .created)
            #expect(
                try await Self.post(control, "/sim/faults", #"{"kind":"http-status","status":429,"endpoint":"refunds"}"#).status
                    == .badRequest)
            #expect(
                try await Self.post(control, "/sim/faults", #"{"kind":"http-status","status":429,"retryAfterSeconds":-1}"#).status
                    == .badRequest)
            // The aimed fault waits for a finish call: verifyReceipt passes untouched.
            let purchase = try await control.purchase()
            let (status, body) = try await VerifyReceiptWireTests.verify(control, ["receipt-data": purchase.receiptData])
            #expect(status == .ok && body["status"] as? Int == 0)
            let finish = try await control.client.execute(uri: "/inApps/v1/transactions/\(purchase.transactionId)/finish", method: .post)
            #expect(finish.status == .tooManyRequests)
            #expect(finish.headers[.retryAfter] == "2")
        }
    }

    @Test func theTransactionViewShowsWhatAppleKnows() async throws {
        try await VerifyReceiptWireTests.live { control in
            let purchase = try await control.purchase(environment: "Sandbox")
            let response = try await control.client.execute(uri: "/sim/transactions/\(purchase.transactionId)", method: .get)
            #expect(response.status == .ok)
            let view = try #require(try JSONSerialization.jsonObject(with: Data(buffer: response.body)) as? [String: Any])
            #expect(view["transactionId"] as? String == purchase.transactionId)
            #expect(view["productId"] as? String == purchase.productId)
            #expect(view["environment"] as? String == "Sandbox")
            #expect(view["deviceId"] as? String == purchase.deviceId)
            #expect(view["finished"] as? Bool == false)
            #expect(view["consumptionAnswers"] as? Int == 0)
            #expect(view["revoked"] as? Bool == false)
            #expect(view["consumption"] == nil && view["finishedDate"] == nil)
            _ = try await control.refund(purchase.transactionId)
            let refunded =
                try JSONSerialization.jsonObject(
                    with: Data(
                        buffer: try await control.client.execute(uri: "/sim/transactions/\(purchase.transactionId)", method: .get).body))
                as? [String: Any]
            #expect(refunded?["revocationType"] as? String == "REFUND_FULL")
            #expect(refunded?["revocationDate"] is Int64)
            #expect(try await control.client.execute(uri: "/sim/transactions/2999999999999999", method: .get).status == .notFound)
        }
    }

    @Test func aOneTimeChargeToADeadURLIsReportedFailedAndNoURLPostsNothing() async throws {
        try await VerifyReceiptWireTests.live({ $0.notificationURL = "http://127.0.0.1:1/dead" }) { control in
            let consumable = try await Self.post(
                control, "/sim/purchases", #"{"productId":"com.example.stockroom.demo.coins","type":"Consumable"}"#)
            #expect(consumable.status == .created)
            #expect(consumable.headers[.init("X-Notification-Status")!] == "failed")
            let subscription = try await Self.post(
                control, "/sim/purchases", #"{"productId":"com.example.stockroom.demo.monthly","expiresInSeconds":60}"#)
            #expect(subscription.headers[.init("X-Notification-Status")!] == nil, "no ONE_TIME_CHARGE for an auto-renewable subscription")
            let cleared = try await control.client.execute(
                uri: "/sim/notification-url", method: .put, body: ByteBuffer(string: #"{"url":null}"#))
            #expect(cleared.status == .noContent)
            let unsent = try await Self.post(control, "/sim/purchases", #"{"productId":"com.example.stockroom.demo.book1"}"#)
            #expect(unsent.status == .created)
            #expect(unsent.headers[.init("X-Notification-Status")!] == nil)
        }
    }
}

/// A revocation minted as a notification is what every other endpoint then reports.
@Suite struct MintedRevocationTests {
    @Test func aRevokeMintedThroughTheSimulatorShowsAsACancellationInVerifyReceipt() async throws {
        try await VerifyReceiptWireTests.live { control in
            let purchase = try await control.purchase()
            let minted = try await LifecycleControlTests.post(
                control, "/sim/notifications", #"{"type":"REVOKE","transactionId":"\#(purchase.transactionId)"}"#)
            #expect(minted.status == .created)
            let (_, body) = try await VerifyReceiptWireTests.verify(control, ["receipt-data": purchase.receiptData])
            let inApp = try #require(((body["receipt"] as? [String: Any])?["in_app"] as? [[String: Any]])?.first)
            #expect(inApp["cancellation_date_ms"] as? String != nil)
            #expect(inApp["cancellation_reason"] as? String == "0")
            let declined = try await LifecycleControlTests.post(
                control, "/sim/notifications", #"{"type":"REFUND_DECLINED","transactionId":"\#(purchase.transactionId)"}"#)
            #expect(declined.status == .created)
            let unknown = try await LifecycleControlTests.post(
                control, "/sim/notifications", #"{"type":"REFUND","transactionId":"2999999999999999"}"#)
            #expect(unknown.status == .notFound)
        }
    }
}
