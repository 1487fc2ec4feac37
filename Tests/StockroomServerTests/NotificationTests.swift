import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import StockroomCore
import StockroomPostgresTestSupport
import StockroomTestSupport
import Testing
@testable import StockroomServer

/// App Store Server Notifications V2, from the simulator's signing chain to the ledger.
@Suite struct NotificationTests {
    static func notification(_ fixture: DownloadFixture, type: String, transactionId: String) async throws -> ByteBuffer {
        let body = try JSONSerialization.data(withJSONObject: ["type": type, "transactionId": transactionId])
        return try await fixture.control.client.execute(uri: "/sim/notifications", method: .post, body: ByteBuffer(bytes: body)).body
    }

    static func deliver(_ fixture: DownloadFixture, _ body: ByteBuffer) async throws -> TestResponse {
        try await fixture.client.execute(uri: "/v1/notifications/appstore", method: .post, body: body)
    }

    @Test(arguments: LedgerEngine.allCases) func aRefundThroughTheSimulatorsNotificationRevokesTheDownload(_ engine: LedgerEngine)
        async throws
    {
        try await DownloadFixture.run(engine: engine) { fixture in
            let purchase = try await fixture.control.purchase(DownloadFixture.book)
            let token = try #require(try await fixture.post(purchase).headers[.init("X-Download-Token")!])
            let url = #"{"url": "http://127.0.0.1:\#(fixture.client.port!)/v1/notifications/appstore"}"#
            _ = try await fixture.control.client.execute(uri: "/sim/notification-url", method: .put, body: ByteBuffer(string: url))
            let refund = try await fixture.control.client.execute(uri: "/sim/transactions/\(purchase.transactionId)/refund", method: .post)
            #expect(refund.headers[.init("X-Notification-Status")!] == "200")
            #expect(try await fixture.ledger.fulfilment(purchase.transactionId)?.state == .revoked)
            let resume = try await fixture.get("/v1/downloads/\(purchase.transactionId)/content", token: token)
            #expect(try DownloadFixture.code(resume) == "revoked")
        }
    }

    @Test(arguments: LedgerEngine.allCases) func notificationsAreIdempotentOnTheirUUID(_ engine: LedgerEngine) async throws {
        try await DownloadFixture.run(engine: engine) { fixture in
            let purchase = try await fixture.control.purchase(DownloadFixture.book)
            #expect(try await fixture.post(purchase).status == .ok)
            let refund = try await Self.notification(fixture, type: "REFUND", transactionId: purchase.transactionId)
            let first = try await Self.deliver(fixture, refund)
            #expect(String(buffer: first.body) == #"{"status":"recorded"}"#)
            // Reinstated by hand, the same REFUND delivered again changes nothing.
            let reversed = try await Self.notification(fixture, type: "REFUND_REVERSED", transactionId: purchase.transactionId)
            #expect(try await Self.deliver(fixture, reversed).status == .ok)
            let before = try await fixture.settledSnapshot()
            let again = try await Self.deliver(fixture, refund)
            #expect(again.status == .ok)
            #expect(String(buffer: again.body) == #"{"status":"duplicate"}"#)
            #expect(try await fixture.snapshot() == before)
            #expect(try await fixture.ledger.fulfilment(purchase.transactionId)?.state == .verified)
        }
    }

    @Test(arguments: LedgerEngine.allCases) func aRefundReversedRestoresTheDownload(_ engine: LedgerEngine) async throws {
        try await DownloadFixture.run(engine: engine) { fixture in
            let purchase = try await fixture.control.purchase(DownloadFixture.book)
            #expect(try await fixture.post(purchase).status == .ok)
            _ = try await Self.deliver(fixture, try await Self.notification(fixture, type: "REVOKE", transactionId: purchase.transactionId))
            #expect(try await fixture.ledger.fulfilment(purchase.transactionId)?.state == .revoked)
            _ = try await Self.deliver(
                fixture, try await Self.notification(fixture, type: "REFUND_REVERSED", transactionId: purchase.transactionId))
            #expect(try await fixture.ledger.fulfilment(purchase.transactionId)?.state == .verified)
            #expect(try await fixture.post(purchase).status == .ok)
        }
    }

    @Test(arguments: LedgerEngine.allCases) func aRefundOfATransactionNeverSeenStopsItsLaterDownload(_ engine: LedgerEngine) async throws {
        try await DownloadFixture.run(engine: engine) { fixture in
            let purchase = try await fixture.control.purchase(DownloadFixture.book)
            _ = try await Self.deliver(fixture, try await Self.notification(fixture, type: "REFUND", transactionId: purchase.transactionId))
            let row = try #require(try await fixture.ledger.fulfilment(purchase.transactionId))
            #expect(row.state == .revoked)
            #expect(row.proofKind == .signedTransaction)
            let response = try await fixture.post(["productId": DownloadFixture.book, "signedTransaction": purchase.signedTransaction])
            #expect(try DownloadFixture.code(response) == "revoked")
        }
    }

    @Test(arguments: LedgerEngine.allCases) func unknownTypesAreRecordedAndAcknowledged(_ engine: LedgerEngine) async throws {
        try await DownloadFixture.run(engine: engine) { fixture in
            let purchase = try await fixture.control.purchase(DownloadFixture.book)
            #expect(try await fixture.post(purchase).status == .ok)
            #expect(try await fixture.eventually { try await fixture.ledger.attempts(of: purchase.transactionId).count == 1 })
            let before = try await fixture.snapshot()
            let response = try await Self.deliver(
                fixture, try await Self.notification(fixture, type: "CONSUMPTION_REQUEST", transactionId: purchase.transactionId))
            #expect(response.status == .ok)
            #expect(String(buffer: response.body) == #"{"status":"recorded"}"#)
            #expect(try await fixture.snapshot() == before)
        }
    }

    @Test(arguments: LedgerEngine.allCases) func notificationsThatDoNotVerifyAreRefusedAndChangeNothing(_ engine: LedgerEngine) async throws
    {
        try await DownloadFixture.run(engine: engine) { fixture in
            let purchase = try await fixture.control.purchase(DownloadFixture.book)
            #expect(try await fixture.post(purchase).status == .ok)
            #expect(try await fixture.eventually { try await fixture.ledger.attempts(of: purchase.transactionId).count == 1 })
            let genuine = String(buffer: try await Self.notification(fixture, type: "REFUND", transactionId: purchase.transactionId))
            let object = try JSONSerialization.jsonObject(with: Data(genuine.utf8)) as! [String: String]
            let parts = object["signedPayload"]!.split(separator: ".").map(String.init)
            let payload = String(decoding: ByteEncoding.decodeBase64(parts[1])!, as: UTF8.self).replacingOccurrences(
                of: "REFUND", with: "REVOKE")
            let forged = #"{"signedPayload": "\#(parts[0]).\#(ByteEncoding.base64URL(Array(payload.utf8))).\#(parts[2])"}"#
            let before = try await fixture.snapshot()
            let cases: [(String, String)] = [
                (forged, "jws_bad_signature"), (#"{"signedPayload": "a.b.c"}"#, "jws_malformed"), (#"{}"#, "bad_request"),
                ("nope", "bad_request"),
            ]
            for (body, code) in cases {
                let response = try await fixture.client.execute(
                    uri: "/v1/notifications/appstore", method: .post, body: ByteBuffer(string: body))
                #expect(response.status == .badRequest)
                #expect(try DownloadFixture.code(response) == code)
            }
            #expect(try await fixture.snapshot() == before)
        }
    }
}
