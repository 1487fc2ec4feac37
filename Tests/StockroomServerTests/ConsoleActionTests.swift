import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import StockroomCore
import StockroomPostgresTestSupport
import StockroomTestSupport
import Testing
@testable import StockroomServer

/// The console's forms: refulfil, revoke and reinstate go through `Entitlements` as the admin
/// API does; a post without the session's CSRF token, or with bad input, changes nothing.
@Suite struct ConsoleActionTests {
    static let token = ConsoleSignInTests.token

    /// A signed-in browser and a purchase downloaded whole.
    static func signedIn(_ fixture: DownloadFixture) async throws -> (ConsoleClient, SimulatorControl.Purchase) {
        let purchase = try await fixture.control.purchase(DownloadFixture.book)
        #expect(try await fixture.post(purchase).status == .ok)
        #expect(try await fixture.eventually { try await fixture.ledger.fulfilment(purchase.transactionId)?.state == .delivered })
        var browser = ConsoleClient(fixture.client)
        #expect(try await browser.signIn(token: token).status == .seeOther)
        return (browser, purchase)
    }

    @Test(arguments: LedgerEngine.allCases) func aRefulfilThroughTheFormSeesTheRefund(_ engine: LedgerEngine) async throws {
        try await DownloadFixture.run(engine: engine, { $0.adminToken = Self.token }) { fixture in
            let (browser, purchase) = try await Self.signedIn(fixture)
            let page = "/console/fulfilments/\(purchase.transactionId)"
            _ = try await fixture.control.refund(purchase.transactionId)
            let response = try await browser.post(page + "/refulfil", form: ["csrf": try await browser.csrfToken(on: page)])
            #expect(response.status == .seeOther)
            #expect(response.headers[.location] == page + "?done=refulfil-revoked")
            #expect(try await fixture.ledger.fulfilment(purchase.transactionId)?.state == .revoked)
            let shown = String(buffer: try await browser.get(page + "?done=refulfil-revoked").body)
            #expect(shown.contains(#"data-flash="refulfil-revoked""#))
            #expect(shown.contains(#"id="state">revoked<"#))
        }
    }

    @Test(arguments: LedgerEngine.allCases) func revokeAndReinstateThroughTheForms(_ engine: LedgerEngine) async throws {
        try await DownloadFixture.run(engine: engine, { $0.adminToken = Self.token }) { fixture in
            let (browser, purchase) = try await Self.signedIn(fixture)
            let page = "/console/fulfilments/\(purchase.transactionId)"
            let csrf = try await browser.csrfToken(on: page)
            let revoked = try await browser.post(page + "/revoke", form: ["csrf": csrf, "reason": "chargeback <b>fraud</b>"])
            #expect(revoked.headers[.location] == page + "?done=revoked")
            let row = try #require(try await fixture.ledger.fulfilment(purchase.transactionId))
            #expect(row.state == .revoked && row.lastError?.contains("chargeback") == true)
            #expect(try DownloadFixture.code(try await fixture.post(purchase)) == "revoked", "the download route sees it at once")
            let shown = String(buffer: try await browser.get(page).body)
            #expect(shown.contains("chargeback &lt;b&gt;fraud&lt;/b&gt;") && !shown.contains("<b>fraud"), "the reason is escaped")
            let reinstated = try await browser.post(page + "/reinstate", form: ["csrf": csrf, "reason": "resolved"])
            #expect(reinstated.headers[.location] == page + "?done=reinstated")
            #expect(try await fixture.ledger.fulfilment(purchase.transactionId)?.state.isEntitled == true)
        }
    }

    @Test(arguments: LedgerEngine.allCases) func aFormWithoutTheSessionsCSRFTokenIs403AndChangesNothing(_ engine: LedgerEngine) async throws
    {
        try await DownloadFixture.run(engine: engine, { $0.adminToken = Self.token }) { fixture in
            let (browser, purchase) = try await Self.signedIn(fixture)
            var other = ConsoleClient(fixture.client)
            _ = try await other.signIn(token: Self.token)
            let othersToken = try await other.csrfToken()
            let page = "/console/fulfilments/\(purchase.transactionId)"
            let before = try await fixture.settledSnapshot()
            let callsBefore = try await fixture.control.calls()
            let forms: [KeyValuePairs<String, String>] = [
                ["reason": "x"], ["csrf": "", "reason": "x"], ["csrf": "00", "reason": "x"], ["csrf": othersToken, "reason": "x"],
            ]
            for action in ["refulfil", "revoke", "reinstate"] {
                for form in forms {
                    let response = try await browser.post("\(page)/\(action)", form: form)
                    #expect(response.status == .forbidden, "\(action) \(form)")
                    #expect(String(buffer: response.body).contains(#"data-code="csrf_token_invalid""#))
                }
            }
            #expect(try await fixture.snapshot() == before)
            let callsAfter = try await fixture.control.calls()
            #expect(
                callsAfter.production == callsBefore.production && callsAfter.sandbox == callsBefore.sandbox,
                "no re-verification was asked for")
        }
    }

    @Test func badActionInputGetsAClearPageAndChangesNothing() async throws {
        try await DownloadFixture.run({ $0.adminToken = Self.token }) { fixture in
            let (browser, purchase) = try await Self.signedIn(fixture)
            let page = "/console/fulfilments/\(purchase.transactionId)"
            let csrf = try await browser.csrfToken(on: page)
            let before = try await fixture.settledSnapshot()
            let cases: [(String, String, String, HTTPResponse.Status, String)] = [
                (page + "/revoke", ConsoleClient.encode(["csrf": csrf]), "application/x-www-form-urlencoded", .badRequest, "bad_request"),
                (
                    page + "/revoke", ConsoleClient.encode(["csrf": csrf, "reason": "   "]), "application/x-www-form-urlencoded",
                    .badRequest, "bad_request"
                ),
                (
                    page + "/reinstate", ConsoleClient.encode(["csrf": csrf, "reason": String(repeating: "r", count: 501)]),
                    "application/x-www-form-urlencoded", .badRequest, "bad_request"
                ),
                (
                    page + "/revoke", ConsoleClient.encode(["csrf": csrf, "reason": "a\u{7}b"]), "application/x-www-form-urlencoded",
                    .badRequest, "bad_request"
                ),
                (
                    "/console/fulfilments/2999/refulfil", ConsoleClient.encode(["csrf": csrf]), "application/x-www-form-urlencoded",
                    .notFound, "unknown_transaction"
                ),
                (
                    "/console/fulfilments/a%20b/revoke", ConsoleClient.encode(["csrf": csrf, "reason": "x"]),
                    "application/x-www-form-urlencoded", .badRequest, "bad_request"
                ),
                (
                    page + "/revoke", #"{"csrf": "\#(csrf)", "reason": "x"}"#, "application/json", .unsupportedMediaType,
                    "unsupported_media_type"
                ),
                (
                    page + "/revoke", ConsoleClient.encode(["csrf": csrf, "reason": String(repeating: "r", count: 20_000)]),
                    "application/x-www-form-urlencoded", .contentTooLarge, "body_too_large"
                ),
            ]
            for (uri, body, type, status, code) in cases {
                let response = try await browser.post(uri, body: body, contentType: type)
                #expect(response.status == status, "\(uri) \(body.prefix(60))")
                #expect(String(buffer: response.body).contains(#"data-code="\#(code)""#), "\(uri)")
                #expect(response.headers[.contentType] == "text/html; charset=utf-8")
            }
            #expect(try await fixture.snapshot() == before)
        }
    }
}
