import Foundation

/// Where the client's requests may go, and which of them may carry a secret: the one policy for
/// every URL the client builds and every redirect it follows.
///
/// The proof of purchase and the download token belong to the configured server, so a request
/// that carries either goes only to its origin (scheme, host and port): a `Location` from an
/// answer is followed only when it is a path on that origin. `HTTPTransport` follows no redirect
/// by itself. One redirect is followed by the client, for content only: Stockroom's `303` to the
/// claim (`POST /v1/downloads`) or `307` to the content (`GET …/content`), to an object store's
/// presigned URL (`storeURL`), which is then fetched with no token, no proof and no cookie.
struct ServerOrigin: Sendable {
    /// The server's base URL, as configured.
    let base: URL

    /// Which of the client's requests an answer came to, where it decides whether a redirect may
    /// be followed: every request not named here stays on the origin.
    enum Exchange: Sendable {
        /// `POST /v1/downloads`, which carries the proof.
        case claim
        /// `GET /v1/downloads/{tx}/content`, which carries the token.
        case content
        /// Anything else: the status, the acknowledgement, a restore, the catalogue.
        case other
    }

    /// Requests to `base`: it must be an `http` or `https` URL with a host.
    init?(_ base: URL) {
        guard let scheme = base.scheme?.lowercased(), scheme == "http" || scheme == "https", base.host?.isEmpty == false else { return nil }
        self.base = base
    }

    /// The URL of one of the client's own paths (`/v1/downloads`, `/v1/catalog`, …).
    func url(_ path: String) -> URL? {
        location(path)
    }

    /// The URL of a `Location` from an answer, when it is a path on the server's origin; nil for an
    /// absolute or scheme-relative URL, a relative path, or text that is not a plain URL path.
    func location(_ text: String) -> URL? {
        let bytes = text.utf8
        guard (1...2048).contains(bytes.count), bytes.first == UInt8(ascii: "/") else { return nil }
        guard !text.hasPrefix("//"), bytes.allSatisfy(Self.isPathByte) else { return nil }
        guard let url = URL(string: text, relativeTo: base)?.absoluteURL, isSameOrigin(url) else { return nil }
        return url
    }

    /// Whether an answer of `status` to `exchange` sends the client to content elsewhere: a `303`
    /// to the claim or a `307` to the content, and nothing else (any other redirect is the answer).
    static func leadsToContent(status: Int, answering exchange: Exchange) -> Bool {
        switch (exchange, status) {
        case (.claim, 303), (.content, 307): true
        default: false
        }
    }

    /// The object store's URL that such a redirect's `Location` names, when the client may fetch
    /// content there: an absolute `http` or `https` URL with a host, no user info, no fragment, and
    /// never `http` when the server is `https`; nil for anything else (relative, scheme-relative,
    /// another scheme, text that is not a plain URL).
    ///
    /// The scheme and authority are read byte by byte, so that Foundation's parser and libcurl's
    /// cannot disagree on the host: an authority is a name or an IP literal and a port, no `@`.
    func storeURL(_ text: String) -> URL? {
        let bytes = Array(text.utf8)
        guard (1...8192).contains(bytes.count) else { return nil }
        let lowered = text.lowercased()
        let scheme = lowered.hasPrefix("https://") ? "https" : lowered.hasPrefix("http://") ? "http" : nil
        guard let scheme, scheme == "https" || base.scheme?.lowercased() != "https" else { return nil }
        let afterScheme = bytes.dropFirst(scheme.utf8.count + 3)
        let authority = afterScheme.prefix { $0 != UInt8(ascii: "/") && $0 != UInt8(ascii: "?") }
        let rest = afterScheme.dropFirst(authority.count)
        guard Self.isAuthority(authority), rest.allSatisfy(Self.isPathByte) else { return nil }
        guard let url = URL(string: text), url.scheme?.lowercased() == scheme, url.host?.isEmpty == false, url.user == nil,
            url.password == nil,
            url.fragment == nil
        else { return nil }
        return url
    }

    /// Whether `url` has the server's scheme, host and port.
    func isSameOrigin(_ url: URL) -> Bool {
        url.scheme?.lowercased() == base.scheme?.lowercased() && url.host?.lowercased() == base.host?.lowercased()
            && Self.port(url) == Self.port(base) && url.user == nil && url.password == nil
    }

    private static func port(_ url: URL) -> Int? {
        url.port ?? (url.scheme?.lowercased() == "https" ? 443 : 80)
    }

    /// RFC 3986's path and query characters (unreserved, percent, sub-delims, `:`, `@`, `/`, `?`),
    /// without `\`, spaces, control bytes, `#` or anything past ASCII.
    private static func isPathByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
        default: "-._~%!$&'()*+,;=:@/?".utf8.contains(byte)
        }
    }

    /// `host[:port]`: a host name of letters, digits, `-` and `.`, or a bracketed IPv6 literal,
    /// then a port of 1 to 5 digits; no user info, no percent-encoding.
    private static func isAuthority(_ bytes: ArraySlice<UInt8>) -> Bool {
        var host = bytes[...]
        var port: ArraySlice<UInt8> = []
        if bytes.first == UInt8(ascii: "[") {
            guard let close = bytes.firstIndex(of: UInt8(ascii: "]")) else { return false }
            host = bytes[bytes.startIndex...close]
            let inside = host.dropFirst().dropLast()
            guard !inside.isEmpty, inside.allSatisfy({ isHexDigit($0) || $0 == UInt8(ascii: ":") || $0 == UInt8(ascii: ".") }) else {
                return false
            }
            let after = bytes[(close + 1)...]
            if !after.isEmpty {
                guard after.first == UInt8(ascii: ":") else { return false }
                port = after.dropFirst()
                guard !port.isEmpty else { return false }
            }
        } else {
            if let colon = bytes.firstIndex(of: UInt8(ascii: ":")) {
                host = bytes[..<colon]
                port = bytes[(colon + 1)...]
                guard !port.isEmpty else { return false }
            }
            guard !host.isEmpty, host.allSatisfy(isNameByte) else { return false }
        }
        guard port.count <= 5, port.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) else { return false }
        return port.isEmpty || (1...65_535).contains(Int(String(decoding: port, as: UTF8.self)) ?? 0)
    }

    /// A letter, a digit, `-` or `.`.
    private static func isNameByte(_ byte: UInt8) -> Bool {
        isHexDigit(byte) || (UInt8(ascii: "g")...UInt8(ascii: "z")).contains(byte | 0x20) || byte == UInt8(ascii: "-")
            || byte == UInt8(ascii: ".")
    }

    private static func isHexDigit(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte | 0x20)
    }
}
