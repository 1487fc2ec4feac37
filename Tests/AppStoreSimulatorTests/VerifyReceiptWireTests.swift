import Foundation
import Hummingbird
import HummingbirdTesting
import StockroomCore
import StockroomTestSupport
import Testing
@testable import AppStoreSimulator

/// The simulator's verifyReceipt answers, byte for byte as an Apple client would read them.
@Suite struct VerifyReceiptWireTests {
    static func live<Value: Sendable>(
        _ configure: (inout SimulatorConfiguration) -> Void = { _ in },
        _ body: @Sendable @escaping (SimulatorControl) async throws -> Value
    ) async throws -> Value {
        var configuration = SimulatorConfiguration()
        configuration.port = 0
        configure(&configuration)
        return try await buildSimulatorApplication(configuration: configuration).test(.live) { try await body(SimulatorControl($0)) }
    }

    static func verify(_ control: SimulatorControl, path: String = "/verifyReceipt", _ fields: [String: String]) async throws -> (
        HTTPResponse.Status, [String: Any]
    ) {
        let response = try await control.client.execute(
            uri: path, method: .post, body: ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: fields)))
        let object = try JSONSerialization.jsonObject(with: Data(buffer: response.body)) as? [String: Any] ?? [:]
        return (response.status, object)
    }

    @Test func aValidReceiptIsAnsweredInApplesFormat() async throws {
        try await Self.live { control in
            let purchase = try await control.purchase()
            let (status, body) = try await Self.verify(control, ["receipt-data": purchase.receiptData])
            #expect(status == .ok)
            #expect(body["status"] as? Int == 0)
            #expect(body["environment"] as? String == "Production")
            let receipt = try #require(body["receipt"] as? [String: Any])
            #expect(receipt["bundle_id"] as? String == "com.example.stockroom.demo")
            #expect(receipt["receipt_type"] as? String == "Production")
            #expect(receipt["application_version"] as? String == "1")
            let inApp = try #require((receipt["in_app"] as? [[String: Any]])?.first)
            #expect(inApp["quantity"] as? String == "1")
            #expect(inApp["transaction_id"] as? String == purchase.transactionId)
            #expect(inApp["product_id"] as? String == "com.example.stockroom.demo.book1")
            #expect(Int64(inApp["purchase_date_ms"] as? String ?? "") != nil)
            #expect((inApp["purchase_date"] as? String)?.hasSuffix(" Etc/GMT") == true)
            #expect(inApp["cancellation_date"] == nil)
            #expect((body["latest_receipt_info"] as? [[String: Any]])?.count == 1)
        }
    }

    @Test func aRefundAddsTheCancellationFields() async throws {
        try await Self.live { control in
            let purchase = try await control.purchase()
            try await control.refund(purchase.transactionId)
            let (_, body) = try await Self.verify(control, ["receipt-data": purchase.receiptData])
            let inApp = try #require(((body["receipt"] as? [String: Any])?["in_app"] as? [[String: Any]])?.first)
            #expect(Int64(inApp["cancellation_date_ms"] as? String ?? "") != nil)
            #expect(inApp["cancellation_date"] as? String != nil)
            #expect(inApp["cancellation_reason"] as? String == "0")
        }
    }

    @Test func environmentsAnswer21007And21008() async throws {
        try await Self.live { control in
            let sandbox = try await control.purchase(environment: "Sandbox")
            let production = try await control.purchase()
            #expect(try await Self.verify(control, ["receipt-data": sandbox.receiptData]).1["status"] as? Int == 21007)
            #expect(
                try await Self.verify(control, path: "/sandbox/verifyReceipt", ["receipt-data": production.receiptData]).1["status"] as? Int
                    == 21008)
            let (_, body) = try await Self.verify(control, path: "/sandbox/verifyReceipt", ["receipt-data": sandbox.receiptData])
            #expect(body["status"] as? Int == 0)
            #expect((body["receipt"] as? [String: Any])?["receipt_type"] as? String == "ProductionSandbox")
        }
    }

    @Test func receiptsThatAreNotReceiptsOrAreAlteredAreRefused() async throws {
        try await Self.live { control in
            let purchase = try await control.purchase()
            // Swap the transaction ID inside the signed PKCS#7 bytes (same length): 21003.
            var bytes = ByteEncoding.decodeBase64(purchase.receiptData)!
            let id = Array(purchase.transactionId.utf8)
            let start = try #require((0...(bytes.count - id.count)).first { Array(bytes[$0..<($0 + id.count)]) == id })
            bytes.replaceSubrange(start..<(start + id.count), with: Array("2000000000000999".utf8))
            let forged = ByteEncoding.base64(bytes)
            #expect(try await Self.verify(control, ["receipt-data": forged]).1["status"] as? Int == 21003)
            #expect(try await Self.verify(control, ["receipt-data": "%%%"]).1["status"] as? Int == 21002)
            #expect(try await Self.verify(control, ["receipt-data": ""]).1["status"] as? Int == 21002)
            #expect(try await Self.verify(control, [:]).1["status"] as? Int == 21002)
        }
    }

    @Test func aConfiguredSharedSecretIsEnforcedWith21004() async throws {
        try await Self.live({ $0.sharedSecret = "s3cret" }) { control in
            let purchase = try await control.purchase()
            #expect(try await Self.verify(control, ["receipt-data": purchase.receiptData]).1["status"] as? Int == 21004)
            #expect(
                try await Self.verify(control, ["receipt-data": purchase.receiptData, "password": "nope"]).1["status"] as? Int == 21004)
            #expect(try await Self.verify(control, ["receipt-data": purchase.receiptData, "password": "s3cret"]).1["status"] as? Int == 0)
        }
    }

    @Test func retryableStatusFaultsCarryTheFlagInEitherSpelling() async throws {
        try await Self.live { control in
            try await control.fault(["kind": "status", "status": 21150, "retryable": true])
            try await control.fault(["kind": "status", "status": 21150, "retryable": true, "retryableField": "is_retryable"])
            #expect(try await Self.verify(control, [:]).1["is-retryable"] as? Bool == true)
            #expect(try await Self.verify(control, [:]).1["is_retryable"] as? Bool == true)
            #expect(try await Self.verify(control, [:]).1["status"] as? Int == 21002)  // faults used up
        }
    }

    @Test func faultsApplyToTheNextCountCallsAndCanBeCleared() async throws {
        try await Self.live { control in
            try await control.fault(["kind": "http-status", "status": 502, "count": 2])
            for _ in 0..<2 {
                let response = try await control.client.execute(uri: "/verifyReceipt", method: .post, body: ByteBuffer(string: "{}"))
                #expect(response.status == .badGateway)
            }
            try await control.fault(["kind": "malformed", "count": 5])
            _ = try await control.client.execute(uri: "/sim/faults", method: .delete)
            let (status, body) = try await Self.verify(control, [:])
            #expect(status == .ok)
            #expect(body["status"] as? Int == 21002)
            let calls = try await control.calls()
            #expect(calls == .init(production: 3, sandbox: 0, total: 3))
        }
    }

    @Test(arguments: [
        #"{"kind": "http-status"}"#, #"{"kind": "status"}"#, #"{"kind": "delay"}"#, #"{"kind": "explode"}"#,
        #"{"kind": "drop", "count": 0}"#, #"not json"#, #"{"kind": "status", "status": 21150, "retryableField": "x"}"#,
    ])
    func badFaultsAreRefusedWithJSONErrors(body: String) async throws {
        try await Self.live { control in
            let response = try await control.client.execute(uri: "/sim/faults", method: .post, body: ByteBuffer(string: body))
            #expect(response.status == .badRequest)
            #expect(String(buffer: response.body).contains(#""code":"bad_request""#))
        }
    }

    @Test func purchasesValidateTheirInput() async throws {
        try await Self.live { control in
            let badProduct = try await control.client.execute(
                uri: "/sim/purchases", method: .post, body: ByteBuffer(string: #"{"productId": "no spaces"}"#))
            #expect(badProduct.status == .badRequest)
            let unknownOriginal = try await control.client.execute(
                uri: "/sim/purchases", method: .post, body: ByteBuffer(string: #"{"productId": "a.b", "originalTransactionId": "42"}"#))
            #expect(unknownOriginal.status == .notFound)
            #expect(String(buffer: unknownOriginal.body).contains(#""code":"unknown_transaction""#))
            let refund = try await control.client.execute(uri: "/sim/transactions/42/refund", method: .post)
            #expect(refund.status == .notFound)
        }
    }
}
