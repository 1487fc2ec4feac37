import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import StockroomCore
import StockroomPostgresTestSupport
import StockroomTestSupport
import Testing
@testable import StockroomServer

/// The console's pages read the ledger on both engines: the dashboard's charts and counts, the
/// filtered list, a transaction's page; bad filters get a clear 400 page.
@Suite struct ConsolePageTests {
    static let token = ConsoleSignInTests.token

    @Test(arguments: LedgerEngine.allCases) func theDashboardChartsWhatTheLedgerHolds(_ engine: LedgerEngine) async throws {
        try await DownloadFixture.run(engine: engine, { $0.adminToken = Self.token }) { fixture in
            let (browser, purchase) = try await ConsoleActionTests.signedIn(fixture)
            _ = try await fixture.control.refund(purchase.transactionId)
            _ = try await fixture.admin(.post, "fulfilments/\(purchase.transactionId)/refulfil", token: Self.token)
            let page = String(buffer: try await browser.get("/console").body)
            for id in ["deliveries-chart", "latency-chart", "error-chart", "products-chart", "bytes-chart", "states-chart"] {
                #expect(page.contains(#"<svg id="\#(id)""#), "\(id)")
            }
            #expect(page.contains(#"data-series="delivered" data-value="1""#), "this hour's complete download")
            #expect(page.contains(#"<td class="num" data-state="revoked">1</td>"#))
            #expect(page.contains(#"data-series="com.example.book" data-value="1 · 19.5 KiB""#), "top product with its bytes")
            #expect(page.contains(#"<strong id="bytes-total">19.5 KiB</strong>"#))
            #expect(page.contains(#"data-series="mean ms""#), "the verification's upstream calls")
        }
    }

    @Test(arguments: LedgerEngine.allCases) func theListFiltersByStateProductAndDay(_ engine: LedgerEngine) async throws {
        try await DownloadFixture.run(engine: engine, { $0.adminToken = Self.token }) { fixture in
            let (browser, purchase) = try await ConsoleActionTests.signedIn(fixture)
            let today = String(Date().ISO8601Format().prefix(10))
            let row = #"<tr data-transaction="\#(purchase.transactionId)">"#
            let shown: [(String, Bool)] = [
                ("/console/fulfilments", true), ("/console/fulfilments?state=delivered", true),
                ("/console/fulfilments?state=revoked", false),
                ("/console/fulfilments?product=com.example.book", true), ("/console/fulfilments?product=com.example.big", false),
                ("/console/fulfilments?from=\(today)&to=\(today)", true), ("/console/fulfilments?to=2001-01-01", false),
                ("/console/fulfilments?state=&product=&from=&to=&page=1", true), ("/console/fulfilments?page=2", false),
            ]
            for (uri, present) in shown {
                let response = try await browser.get(uri)
                #expect(response.status == .ok, "\(uri)")
                #expect(String(buffer: response.body).contains(row) == present, "\(uri)")
            }
            #expect(
                String(buffer: try await browser.get("/console/fulfilments?state=delivered").body).contains(
                    "<option selected>delivered</option>"))
        }
    }

    @Test(arguments: [
        "/console/fulfilments?state=shipped", "/console/fulfilments?page=0", "/console/fulfilments?page=10001",
        "/console/fulfilments?page=x",
        "/console/fulfilments?from=yesterday", "/console/fulfilments?to=2026-13-45", "/console/fulfilments/a%20b",
        "/console/fulfilments?product=" + String(repeating: "p", count: 201),
    ])
    func badFiltersGetA400Page(uri: String) async throws {
        try await DownloadFixture.run({ $0.adminToken = Self.token }) { fixture in
            var browser = ConsoleClient(fixture.client)
            _ = try await browser.signIn(token: Self.token)
            let response = try await browser.get(uri)
            #expect(response.status == .badRequest)
            #expect(String(buffer: response.body).contains(#"data-code="bad_request""#))
        }
    }

    /// A transaction the ledger knows only by a proof kept during an outage has a page (it was a
    /// 404): the kept proofs, and re-fulfil, which verifies them once the App Store answers again.
    @Test(arguments: LedgerEngine.allCases) func aTransactionWithOnlyAKeptProofHasAPageAndIsReFulfilledFromIt(_ engine: LedgerEngine)
        async throws
    {
        try await DownloadFixture.run(engine: engine, { $0.adminToken = Self.token }) { fixture in
            let (browser, _) = try await ConsoleActionTests.signedIn(fixture)
            let purchase = try await fixture.control.purchase(DownloadFixture.book)
            try await fixture.control.fault(["kind": "http-status", "status": 503, "count": 10])
            #expect(try await fixture.post(purchase).status == .serviceUnavailable)
            _ = try await fixture.control.client.execute(uri: "/sim/faults", method: .delete)
            #expect(try await fixture.ledger.fulfilment(purchase.transactionId) == nil)

            let page = "/console/fulfilments/\(purchase.transactionId)"
            let response = try await browser.get(page)
            #expect(response.status == .ok)
            let html = String(buffer: response.body)
            #expect(html.contains(#"id="state">pending<"#))
            #expect(html.contains(#"<tr data-status="pending">"#))
            #expect(html.contains("HTTP 503"), "why it waits")
            #expect(!html.contains(purchase.receiptData.prefix(40)), "never the receipt itself")
            #expect(html.contains(#"action="\#(page)/refulfil""#))
            #expect(!html.contains(#"action="\#(page)/revoke""#), "nothing to revoke without an entitlement")

            let refulfilled = try await browser.post(page + "/refulfil", form: ["csrf": try await browser.csrfToken(on: page)])
            #expect(refulfilled.status == .seeOther)
            #expect(refulfilled.headers[.location] == page + "?done=refulfil-verified")
            #expect(try await fixture.ledger.fulfilment(purchase.transactionId)?.state == .verified)
            let after = String(buffer: try await browser.get(page + "?done=refulfil-verified").body)
            #expect(after.contains(#"id="state">verified<"#))
            #expect(after.contains(#"data-flash="refulfil-verified""#))
        }
    }

    @Test(arguments: LedgerEngine.allCases) func aTransactionsPageShowsItsTimelineProofAndNotifications(_ engine: LedgerEngine) async throws
    {
        try await DownloadFixture.run(engine: engine, { $0.adminToken = Self.token }) { fixture in
            let (browser, purchase) = try await ConsoleActionTests.signedIn(fixture)
            let row = try #require(try await fixture.ledger.fulfilment(purchase.transactionId))
            let response = try await browser.get("/console/fulfilments/\(purchase.transactionId)")
            #expect(response.status == .ok)
            let page = String(buffer: response.body)
            #expect(page.contains(#"<code id="proof-digest">\#(try #require(row.proofDigest))</code>"#))
            #expect(!page.contains(purchase.receiptData.prefix(40)), "never the receipt itself")
            for event in ["recorded", "verified", "attempt-complete", "delivered", "updated"] {
                #expect(page.contains(#"data-event="\#(event)""#), "\(event)")
            }
            #expect(page.contains("by the App Store (Production)"))
            #expect(page.contains("No App Store notification names this purchase."))
            for action in ["refulfil", "revoke", "reinstate"] {
                #expect(page.contains(#"action="/console/fulfilments/\#(purchase.transactionId)/\#(action)""#))
            }
            #expect(!page.contains("data-flash"), "no flash without an action")
            #expect(
                !String(buffer: try await browser.get("/console/fulfilments/\(purchase.transactionId)?done=%3Cscript%3E").body).contains(
                    "<script>"))

            let missing = try await browser.get("/console/fulfilments/2999")
            #expect(missing.status == .notFound)
            #expect(String(buffer: missing.body).contains(#"data-code="unknown_transaction""#))
        }
    }
}
