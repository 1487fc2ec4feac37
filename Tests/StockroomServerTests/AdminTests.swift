import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import StockroomCore
import StockroomTestSupport
import Testing
@testable import StockroomServer

/// `/v1/admin`: a bearer token, then the operator's list, show, re-fulfil and revoke.
@Suite struct AdminTests {
    static let token = "admin-token-for-tests"

    static func admin(
        _ fixture: DownloadFixture, _ uri: String, method: HTTPRequest.Method = .get, token: String? = AdminTests.token, body: String? = nil
    ) async throws -> TestResponse {
        var headers: HTTPFields = [:]
        if let token { headers[.authorization] = "Bearer \(token)" }
        return try await fixture.client.execute(uri: uri, method: method, headers: headers, body: body.map { ByteBuffer(string: $0) })
    }

    @Test func adminRoutesAreOffWithoutAConfiguredToken() async throws {
        try await DownloadFixture.run { fixture in
            let response = try await Self.admin(fixture, "/v1/admin/fulfilments")
            #expect(response.status == .notFound)
        }
    }

    @Test func aMissingOrWrongTokenIsRefused() async throws {
        try await DownloadFixture.run({ $0.adminToken = Self.token }) { fixture in
            let missing = try await Self.admin(fixture, "/v1/admin/fulfilments", token: nil)
            #expect(missing.status == .unauthorized)
            #expect(try DownloadFixture.code(missing) == "admin_token_missing")
            let wrong = try await Self.admin(fixture, "/v1/admin/fulfilments", token: Self.token + "x")
            #expect(wrong.status == .forbidden)
            #expect(try DownloadFixture.code(wrong) == "admin_token_invalid")
        }
    }

    @Test func listShowRefulfilAndRevoke() async throws {
        try await DownloadFixture.run({ $0.adminToken = Self.token }) { fixture in
            let purchase = try await fixture.control.purchase(DownloadFixture.book)
            try await fixture.control.fault(["kind": "http-status", "status": 503, "count": 10])
            #expect(try await fixture.post(purchase).status == .serviceUnavailable)
            _ = try await fixture.control.client.execute(uri: "/sim/faults", method: .delete)

            let listed = try DownloadFixture.json(try await Self.admin(fixture, "/v1/admin/pending-proofs"))
            let kept = try #require((listed["pendingProofs"] as? [[String: Any]])?.first)
            #expect(kept["transactionId"] as? String == purchase.transactionId)
            #expect(kept["status"] as? String == "pending")
            #expect(kept["proof"] == nil, "the receipt itself is never shown")
            let missing = try await Self.admin(fixture, "/v1/admin/fulfilments/\(purchase.transactionId)")
            #expect(missing.status == .notFound, "a kept proof is no fulfilment")

            // The re-fulfilment runs as a job the request only starts (202); its outcomes come with the finished job.
            let dry = try await fixture.refulfilPendingJob(token: Self.token, dryRun: true)
            #expect((dry["results"] as? [[String: Any]])?.first?["outcome"] as? String == "verified")
            #expect(try await fixture.ledger.fulfilment(purchase.transactionId) == nil)
            let done = try await fixture.refulfilPendingJob(token: Self.token)
            #expect((done["results"] as? [[String: Any]])?.first?["outcome"] as? String == "verified")
            #expect(try await fixture.ledger.fulfilment(purchase.transactionId)?.state == .verified)
            let shown = try DownloadFixture.json(try await Self.admin(fixture, "/v1/admin/fulfilments/\(purchase.transactionId)"))
            #expect(shown["state"] as? String == "verified")
            #expect(
                shown["proof"] == nil && shown["proofLength"] as? Int == purchase.receiptData.utf8.count,
                "the receipt itself is never shown")

            let badRevoke = try await Self.admin(
                fixture, "/v1/admin/fulfilments/\(purchase.transactionId)/revoke", method: .post, body: "{}")
            #expect(badRevoke.status == .badRequest)
            #expect(try await fixture.ledger.fulfilment(purchase.transactionId)?.state == .verified)
            let revoked = try await Self.admin(
                fixture, "/v1/admin/fulfilments/\(purchase.transactionId)/revoke", method: .post, body: #"{"reason": "chargeback"}"#)
            #expect(revoked.status == .ok)
            #expect(try await fixture.ledger.fulfilment(purchase.transactionId)?.state == .revoked)
            #expect(try DownloadFixture.code(try await fixture.post(purchase)) == "revoked", "the server reads the new state at once")
        }
    }

    @Test func badReinstatesAreRefusedAndChangeNothing() async throws {
        try await DownloadFixture.run({ $0.adminToken = Self.token }) { fixture in
            let purchase = try await fixture.control.purchase(DownloadFixture.book)
            #expect(try await fixture.post(purchase).status == .ok)
            let revoke = try await Self.admin(
                fixture, "/v1/admin/fulfilments/\(purchase.transactionId)/revoke", method: .post, body: #"{"reason": "fraud"}"#)
            #expect(revoke.status == .ok)
            let before = try await fixture.snapshot()
            let cases: [(String, String?, HTTPResponse.Status, String)] = [
                ("/v1/admin/fulfilments/\(purchase.transactionId)/reinstate", "{}", .badRequest, "bad_request"),
                ("/v1/admin/fulfilments/\(purchase.transactionId)/reinstate", #"{"reason": "  "}"#, .badRequest, "bad_request"),
                ("/v1/admin/fulfilments/\(purchase.transactionId)/reinstate", "not json", .badRequest, "bad_request"),
                // Refused before Foundation parses it: nested past JSONNesting's limit, or past the upload bound.
                (
                    "/v1/admin/fulfilments/\(purchase.transactionId)/reinstate", String(repeating: "[", count: 600), .badRequest,
                    "bad_request"
                ),
                (
                    "/v1/admin/fulfilments/\(purchase.transactionId)/reinstate",
                    #"{"reason": ""# + String(repeating: "x", count: 1 << 20) + #""}"#,
                    .contentTooLarge, "body_too_large"
                ),
                ("/v1/admin/fulfilments/2999/reinstate", #"{"reason": "x"}"#, .notFound, "unknown_transaction"),
                ("/v1/admin/fulfilments/a%20b/reinstate", #"{"reason": "x"}"#, .badRequest, "bad_request"),
                // The reason becomes the event's `detail`: 500 characters at most, as the console's form.
                (
                    "/v1/admin/fulfilments/\(purchase.transactionId)/reinstate",
                    #"{"reason": ""# + String(repeating: "é", count: 501) + #""}"#,
                    .badRequest, "bad_request"
                ),
            ]
            for (uri, body, status, code) in cases {
                let response = try await Self.admin(fixture, uri, method: .post, body: body)
                #expect(response.status == status, "\(uri) \(body ?? "")")
                #expect(try DownloadFixture.code(response) == code)
            }
            #expect(try await fixture.snapshot() == before)
            let lifted = try await Self.admin(
                fixture, "/v1/admin/fulfilments/\(purchase.transactionId)/reinstate", method: .post, body: #"{"reason": "resolved"}"#)
            #expect(try DownloadFixture.json(lifted)["reinstated"] as? [String] == [purchase.transactionId])
            #expect(try await fixture.post(purchase).status == .ok)
        }
    }

    @Test func refulfilmentOfARefundedPurchaseRevokesIt() async throws {
        try await DownloadFixture.run({ $0.adminToken = Self.token }) { fixture in
            let purchase = try await fixture.control.purchase(DownloadFixture.book)
            #expect(try await fixture.post(purchase).status == .ok)
            try await fixture.control.refund(purchase.transactionId)
            let outcome = try DownloadFixture.json(
                try await Self.admin(fixture, "/v1/admin/fulfilments/\(purchase.transactionId)/refulfil", method: .post))
            #expect(outcome["outcome"] as? String == "revoked")
            #expect(try await fixture.ledger.fulfilment(purchase.transactionId)?.state == .revoked)
        }
    }

    @Test func refulfilmentOfAStoreKit2TransactionAsksTheServerAPI() async throws {
        try await DownloadFixture.run({ $0.adminToken = Self.token }) { fixture in
            let purchase = try await fixture.control.purchase(DownloadFixture.book)
            #expect(
                try await fixture.post(["productId": DownloadFixture.book, "signedTransaction": purchase.signedTransaction]).status == .ok)
            let uri = "/v1/admin/fulfilments/\(purchase.transactionId)/refulfil"
            #expect(try DownloadFixture.json(try await Self.admin(fixture, uri, method: .post))["outcome"] as? String == "verified")
            try await fixture.control.refund(purchase.transactionId)
            let outcome = try DownloadFixture.json(try await Self.admin(fixture, uri, method: .post))
            #expect(outcome["outcome"] as? String == "revoked")
            #expect(try await fixture.ledger.fulfilment(purchase.transactionId)?.state == .revoked)
            let calls = try await fixture.control.calls()
            #expect(calls.production + calls.sandbox == 0, "no verifyReceipt for a StoreKit 2 transaction")
        }
    }

    @Test(arguments: [
        ("/v1/admin/fulfilments?state=shipped", HTTPResponse.Status.badRequest, "bad_request"),
        ("/v1/admin/fulfilments?limit=0", .badRequest, "bad_request"),
        ("/v1/admin/fulfilments?since=yesterday", .badRequest, "bad_request"),
        ("/v1/admin/fulfilments/2999", .notFound, "unknown_transaction"),
        ("/v1/admin/fulfilments/a%20b", .badRequest, "bad_request"),
        ("/v1/admin/pending-proofs?status=lost", .badRequest, "bad_request"),
    ])
    func badAdminRequestsAreRefused(uri: String, status: HTTPResponse.Status, code: String) async throws {
        try await DownloadFixture.run({ $0.adminToken = Self.token }) { fixture in
            let response = try await Self.admin(fixture, uri)
            #expect(response.status == status)
            #expect(try DownloadFixture.code(response) == code)
        }
    }
}
