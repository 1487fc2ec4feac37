import Foundation
import Testing
@testable import StockroomServer

/// The console's signed sessions and CSRF tokens, without a server.
@Suite struct ConsoleSessionTests {
    let sessions = ConsoleSessions(adminToken: "token-one")
    let now = Date(timeIntervalSince1970: 1_800_000_000)

    @Test func aSessionHoldsUntilItExpires() throws {
        let value = sessions.issue(now: now)
        let session = try #require(sessions.session(from: value, now: now.addingTimeInterval(8 * 3600 - 1)))
        #expect(session.expiresAt == now.addingTimeInterval(8 * 3600))
        #expect(sessions.session(from: value, now: now.addingTimeInterval(8 * 3600)) == nil)
    }

    @Test func changingTheAdminTokenEndsEverySession() {
        let value = sessions.issue(now: now)
        #expect(ConsoleSessions(adminToken: "token-two").session(from: value, now: now) == nil)
        #expect(ConsoleSessions(adminToken: "token-one").session(from: value, now: now) != nil, "the same token keeps them")
    }

    @Test func aTamperedSessionIsRefused() throws {
        let value = sessions.issue(now: now)
        let parts = value.split(separator: ".").map(String.init)
        let later = [parts[0], String(Int64(parts[1])! + 86_400 * 365), parts[2], parts[3]].joined(separator: ".")
        #expect(sessions.session(from: later, now: now) == nil, "the expiry is signed")
        for hostile in [
            "", "v1", "v1...", value + "0", "v2." + value.dropFirst(3), String(repeating: "v1.1.", count: 100),
            "v1.99999999999999999999.0.0",
        ] {
            #expect(sessions.session(from: hostile, now: now) == nil, "\(hostile.prefix(40))")
        }
    }

    @Test func theCSRFTokenBelongsToOneSession() throws {
        let one = try #require(sessions.session(from: sessions.issue(now: now), now: now))
        let two = try #require(sessions.session(from: sessions.issue(now: now), now: now))
        #expect(one.csrfToken != two.csrfToken)
        #expect(sessions.isCSRFToken(one.csrfToken, of: one))
        #expect(!sessions.isCSRFToken(two.csrfToken, of: one))
        #expect(!sessions.isCSRFToken(nil, of: one) && !sessions.isCSRFToken("", of: one))
    }

    @Test func onlyTheAdminTokenSignsIn() {
        #expect(sessions.accepts(adminToken: "token-one"))
        #expect(!sessions.accepts(adminToken: "token-on"))
        #expect(!sessions.accepts(adminToken: "token-one "))
        #expect(!sessions.accepts(adminToken: ""))
    }
}

/// The console's error pages: each refusal's status, code and headers, as a browser gets them.
@Suite struct ConsoleErrorPageTests {
    @Test func aLostLedgerIsA503PageWithRetryAfter() {
        let page = ConsoleError.ledgerUnavailable(retryAfter: .seconds(7)).page(session: nil)
        #expect(page.status == .serviceUnavailable)
        #expect(page.headers[.retryAfter] == "7")
        #expect(page.body.contains(#"data-code="ledger_unavailable""#))
        #expect(page.headers[.cacheControl] == "no-store")
    }

    @Test(arguments: [
        (ConsoleError.notSignedIn, 401, "console_session_missing"), (.csrfRefused, 403, "csrf_token_invalid"),
        (.badRequest("<b>x</b>"), 400, "bad_request"), (.unknownTransaction("9"), 404, "unknown_transaction"),
        (.formTooLarge, 413, "body_too_large"), (.unsupportedForm, 415, "unsupported_media_type"),
    ])
    func eachRefusalHasItsStatusAndCode(error: ConsoleError, status: Int, code: String) {
        let page = error.page(session: nil)
        #expect(page.status.code == status)
        #expect(page.body.contains(#"data-code="\#(code)""#))
        #expect(!page.body.contains("<b>x</b>"), "the message is escaped")
    }
}
