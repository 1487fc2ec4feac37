import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import StockroomCore
import StockroomTestSupport
import Testing
@testable import StockroomServer

/// `/console`'s sign-in: off without an admin token, the session cookie's flags, a wrong token,
/// what happens without a session, and the headers every page carries.
@Suite struct ConsoleSignInTests {
    static let token = "console-admin-token-for-tests"

    @Test func theConsoleIsOffWithoutAnAdminToken() async throws {
        try await DownloadFixture.run { fixture in
            let dashboard = try await fixture.client.execute(uri: "/console", method: .get)
            let login = try await fixture.client.execute(uri: "/console/login", method: .get)
            #expect(dashboard.status == .notFound && login.status == .notFound)
        }
    }

    @Test func theRightTokenGetsAStrictHttpOnlySessionCookieAndTheDashboard() async throws {
        try await DownloadFixture.run({ $0.adminToken = Self.token }) { fixture in
            var browser = ConsoleClient(fixture.client)
            let form = try await browser.get("/console/login")
            #expect(form.status == .ok)
            #expect(String(buffer: form.body).contains(#"<input type="password" name="token""#))
            let signedIn = try await browser.signIn(token: Self.token)
            #expect(signedIn.status == .seeOther)
            #expect(signedIn.headers[.location] == "/console")
            let cookie = try #require(signedIn.headers[.setCookie])
            #expect(cookie.hasPrefix("stockroom_console=v1."))
            for flag in ["HttpOnly", "SameSite=Strict", "Path=/console", "Max-Age=28800"] { #expect(cookie.contains(flag), "\(flag)") }
            #expect(!cookie.contains("Secure"), "plain HTTP straight to the server: a Secure cookie would never come back")
            let dashboard = try await browser.get("/console")
            #expect(dashboard.status == .ok)
            #expect(String(buffer: dashboard.body).contains("<h1>Dashboard</h1>"))
        }
    }

    @Test func behindATrustedTLSProxyTheCookieIsSecure() async throws {
        try await DownloadFixture.run({
            $0.adminToken = Self.token; $0.trustedProxies = try! TrustedProxies(parsing: ["127.0.0.1"])
        }) { fixture in
            // The test client connects from 127.0.0.1, as the nginx of deploy/ does.
            let browser = ConsoleClient(fixture.client)
            let response = try await browser.post(
                "/console/login", form: ["token": Self.token], headers: [.xForwardedProto: "https"])
            #expect(try #require(response.headers[.setCookie]).hasSuffix("; Secure"))
        }
    }

    @Test func aLoopbackPeerThatIsNotATrustedProxyCannotClaimTLS() async throws {
        try await DownloadFixture.run({ $0.adminToken = Self.token }) { fixture in
            let browser = ConsoleClient(fixture.client)
            let response = try await browser.post(
                "/console/login", form: ["token": Self.token], headers: [.xForwardedProto: "https"])
            #expect(
                try !#require(response.headers[.setCookie]).contains("Secure"), "no --trusted-proxy: the header is the client's own word")
        }
    }

    @Test func aWrongTokenIs401WithTheFormAndNoCookie() async throws {
        try await DownloadFixture.run({ $0.adminToken = Self.token }) { fixture in
            var browser = ConsoleClient(fixture.client)
            for wrong in [Self.token + "x", "", String(Self.token.dropLast()), String(repeating: "a", count: 5000)] {
                let response = try await browser.signIn(token: wrong)
                #expect(response.status == .unauthorized)
                #expect(response.headers[.setCookie] == nil)
                let page = String(buffer: response.body)
                #expect(page.contains("That is not the admin token.") && page.contains(#"action="/console/login""#))
            }
            #expect(try await browser.get("/console").status == .seeOther, "still signed out")
        }
    }

    @Test func withoutASessionPagesRedirectToSignInAndActionsAre401() async throws {
        try await DownloadFixture.run({ $0.adminToken = Self.token }) { fixture in
            let anonymous = ConsoleClient(fixture.client)
            for uri in ["/console", "/console/fulfilments", "/console/fulfilments/1000"] {
                let response = try await anonymous.get(uri)
                #expect(response.status == .seeOther, "\(uri)")
                #expect(response.headers[.location] == "/console/login")
            }
            let forged = ConsoleClient(fixture.client, cookie: "stockroom_console=v1.9999999999.00.00")
            #expect(try await forged.get("/console").status == .seeOther, "an unsigned session is no session")
            let otherKey = ConsoleSessions(adminToken: "another-token").issue()
            #expect(try await ConsoleClient(fixture.client, cookie: "stockroom_console=\(otherKey)").get("/console").status == .seeOther)
            for action in ["refulfil", "revoke", "reinstate"] {
                let response = try await anonymous.post("/console/fulfilments/1000/\(action)", form: ["reason": "x"])
                #expect(response.status == .unauthorized)
                #expect(String(buffer: response.body).contains(#"data-code="console_session_missing""#))
            }
            #expect(try await anonymous.post("/console/logout", form: [:]).status == .unauthorized)
        }
    }

    @Test func everyConsoleResponseForbidsScriptsFramingCachingAndReferrers() async throws {
        try await DownloadFixture.run({ $0.adminToken = Self.token }) { fixture in
            var browser = ConsoleClient(fixture.client)
            let responses = [
                try await browser.get("/console/login"), try await browser.signIn(token: "wrong"),
                try await browser.signIn(token: Self.token),
                try await browser.get("/console"), try await browser.get("/console/fulfilments"),
                try await browser.get("/console/fulfilments/404"),
                try await browser.get("/console/fulfilments?state=lost"),
            ]
            for response in responses {
                let policy = try #require(response.headers[.contentSecurityPolicy])
                #expect(
                    policy.contains("default-src 'none'") && !policy.contains("script-src") && policy.contains("frame-ancestors 'none'"))
                #expect(response.headers[.xFrameOptions] == "DENY")
                #expect(response.headers[.cacheControl] == "no-store")
                #expect(response.headers[.referrerPolicy] == "no-referrer")
                #expect(response.headers[.contentType] == "text/html; charset=utf-8")
            }
            #expect(!String(buffer: try await browser.get("/console").body).contains("<script"))
        }
    }

    @Test func signingOutEndsTheCookieAndNeedsTheCSRFToken() async throws {
        try await DownloadFixture.run({ $0.adminToken = Self.token }) { fixture in
            var browser = ConsoleClient(fixture.client)
            _ = try await browser.signIn(token: Self.token)
            #expect(try await browser.post("/console/logout", form: ["csrf": "0"]).status == .forbidden)
            let out = try await browser.post("/console/logout", form: ["csrf": try await browser.csrfToken()])
            #expect(out.status == .seeOther && out.headers[.location] == "/console/login")
            #expect(try #require(out.headers[.setCookie]).hasPrefix("stockroom_console=; Max-Age=0"))
        }
    }
}
