import Foundation
import StockroomCore

/// Signs and checks the console's session cookies, and derives each session's CSRF token.
///
/// A session is `v1.<expiry>.<nonce>.<mac>`: nothing is stored server-side. The key is derived
/// from the admin token, so changing the token ends every session; each expires after `lifetime`.
/// The CSRF token is an HMAC of the session under the same key: a forged form cannot know it.
struct ConsoleSessions: Sendable {
    /// The session cookie's name.
    static let cookieName = "stockroom_console"
    /// Longer values are not looked at.
    static let maximumCookieLength = 256

    private static let signInProbe = Array("stockroom console sign-in".utf8)
    private let key: [UInt8]
    /// The admin token's MAC of `signInProbe`: what a sign-in's token is compared with.
    private let tokenCheck: [UInt8]
    let lifetime: Duration

    init(adminToken: String, lifetime: Duration = .seconds(8 * 3600)) {
        self.key = HMACSHA256.authenticationCode(for: Array("stockroom console session key v1".utf8), key: Array(adminToken.utf8))
        self.tokenCheck = HMACSHA256.authenticationCode(for: Self.signInProbe, key: Array(adminToken.utf8))
        self.lifetime = lifetime
    }

    /// Whether `token` is the admin token, compared in constant time (it is MACed first, so its
    /// length does not show either).
    func accepts(adminToken token: String) -> Bool {
        constantTimeEquals(HMACSHA256.authenticationCode(for: Self.signInProbe, key: Array(token.utf8)), tokenCheck)
    }

    /// A new session's cookie value, valid until `now + lifetime`.
    func issue(now: Date = Date()) -> String {
        let expiry = Int64((now.timeIntervalSince1970 + Double(lifetime.components.seconds)).rounded(.down))
        let body = "v1.\(expiry).\(ByteEncoding.hex(secureRandomBytes(count: 16)))"
        return body + "." + mac(body)
    }

    /// The session in `value` when it is signed with this key and not expired; nil otherwise.
    func session(from value: String, now: Date = Date()) -> ConsoleSession? {
        guard value.utf8.count <= Self.maximumCookieLength else { return nil }
        let parts = value.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4, parts[0] == "v1", let expiry = Int64(parts[1]) else { return nil }
        let body = parts[0...2].joined(separator: ".")
        guard constantTimeEquals(Array(mac(body).utf8), Array(parts[3].utf8)) else { return nil }
        guard Double(expiry) > now.timeIntervalSince1970 else { return nil }
        return ConsoleSession(value: value, expiresAt: Date(timeIntervalSince1970: Double(expiry)), csrfToken: mac("csrf." + value))
    }

    /// Whether `token` is `session`'s CSRF token, compared in constant time.
    func isCSRFToken(_ token: String?, of session: ConsoleSession) -> Bool {
        guard let token else { return false }
        return constantTimeEquals(Array(token.utf8), Array(session.csrfToken.utf8))
    }

    private func mac(_ text: String) -> String {
        ByteEncoding.hex(HMACSHA256.authenticationCode(for: Array(text.utf8), key: key))
    }
}

/// A signed-in operator's session, as its cookie proved it.
struct ConsoleSession: Sendable, Equatable {
    /// The cookie's value.
    let value: String
    let expiresAt: Date
    /// Goes in a hidden field of every form the session's pages show.
    let csrfToken: String
}
