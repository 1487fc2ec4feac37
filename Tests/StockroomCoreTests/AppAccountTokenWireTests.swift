import AppStoreSimulator
import Foundation
import Hummingbird
import HummingbirdTesting
import StockroomTestSupport
import Testing
@testable import StockroomCore

/// Set App Account Token against the simulator: Apple's statuses and error codes as the
/// endpoint's documentation lists them, and the client's reading of each.
///
/// See https://developer.apple.com/documentation/appstoreserverapi/set-app-account-token
@Suite struct AppAccountTokenWireTests {
    static let token = "7d1b3c8e-2f4a-4b6c-9d0e-1a2b3c4d5e6f"

    static func path(_ id: String, sandbox: Bool = false) -> String {
        (sandbox ? "/sandbox" : "") + "/inApps/v1/transactions/\(id)/appAccountToken"
    }

    @Test func theSimulatorAnswersAsAppleDocumentsIt() async throws {
        try await AppStoreServerAPIClientTests.withAPI { control, api in
            let purchase = try await control.purchase()
            let id = purchase.transactionId
            let renewal = try await control.purchase(json: ["productId": purchase.productId, "originalTransactionId": id])
            let good = #"{"appAccountToken":"\#(Self.token)"}"#
            func call(_ path: String, _ json: String?, token: String? = nil) async throws -> (status: Int, body: [String: Any], raw: String)
            {
                try await ServerAPISimulatorWireTests.call(control, api, .put, path, json: json, token: token)
            }
            #expect(try await call(Self.path(id), good, token: "x.y.z").status == 401)
            let notAnID = try await call(Self.path("abc"), good)
            #expect(notAnID.status == 400 && notAnID.body["errorCode"] as? Int == 4_000_006)
            for malformed in ["", "{}", #"{"appAccountToken":7}"#, "[]"] {
                let answer = try await call(Self.path(id), malformed)
                #expect(answer.status == 400 && answer.raw.isEmpty, "no error code: the request is malformed (\(malformed))")
            }
            let notAUUID = try await call(Self.path(id), #"{"appAccountToken":"account-42"}"#)
            #expect(notAUUID.status == 400 && notAUUID.body["errorCode"] as? Int == 4_000_183)
            let notOriginal = try await call(Self.path(renewal.transactionId), good)
            #expect(notOriginal.status == 400 && notOriginal.body["errorCode"] as? Int == 4_000_187)
            let otherEnvironment = try await call(Self.path(id, sandbox: true), good)
            #expect(otherEnvironment.status == 404 && otherEnvironment.body["errorCode"] as? Int == 4_040_005)
            #expect(try await control.transactionView(id)["appAccountToken"] == nil, "nothing refused set anything")

            let accepted = try await call(Self.path(id), #"{"appAccountToken":"\#(Self.token.uppercased())"}"#)
            #expect(accepted.status == 200 && accepted.raw.isEmpty)
            for transaction in [id, renewal.transactionId] {
                #expect(try await control.transactionView(transaction)["appAccountToken"] as? String == Self.token)
            }
            // A later transaction of the purchase, and a later signed copy, carry it as Apple signs it.
            let later = try await control.purchase(json: ["productId": purchase.productId, "originalTransactionId": id])
            #expect(try ServerAPINotificationHistoryTests.payload(later.signedTransaction)["appAccountToken"] as? String == Self.token)
            let refunded = try await control.refund(renewal.transactionId)
            #expect(try ServerAPINotificationHistoryTests.payload(refunded)["appAccountToken"] as? String == Self.token)
        }
    }

    @Test func theClientReadsEachAnswerAsTheQueueNeedsIt() async throws {
        try await AppStoreServerAPIClientTests.withAPI { control, api in
            let purchase = try await control.purchase()
            let request = UpdateAppAccountTokenRequest(appAccountToken: Self.token)
            #expect(await api.setAppAccountToken(purchase.transactionId, environment: .production, request) == .accepted)
            #expect(try await control.transactionView(purchase.transactionId)["appAccountToken"] as? String == Self.token)
            #expect(await api.setAppAccountToken(purchase.transactionId, environment: .sandbox, request) == .notFound)
            let renewal = try await control.purchase(json: [
                "productId": purchase.productId, "originalTransactionId": purchase.transactionId,
            ])
            guard case .refused(400, 4_000_187, _) = await api.setAppAccountToken(renewal.transactionId, environment: .production, request)
            else { Issue.record("a renewal's ID is refused for good"); return }
            // Not sent at all: no URL is built from a text that is no transaction ID, no body from a token that is no UUID.
            let before = try await control.endpointCalls("appAccountToken")
            guard case .refused(400, nil, _) = await api.setAppAccountToken("../finish", environment: .production, request) else {
                Issue.record("not a transaction ID"); return
            }
            let badToken = UpdateAppAccountTokenRequest(appAccountToken: "account-42")
            guard
                case .refused(400, 4_000_183, _) = await api.setAppAccountToken(purchase.transactionId, environment: .production, badToken)
            else { Issue.record("not a UUID"); return }
            #expect(try await control.endpointCalls("appAccountToken") == before)
            try await control.fault(["kind": "http-status", "status": 503, "count": 1, "endpoint": "appAccountToken"])
            guard case .retryLater = await api.setAppAccountToken(purchase.transactionId, environment: .production, request) else {
                Issue.record("Apple down is a retry"); return
            }
        }
    }
}
