import Foundation

/// Where the client's requests may go, and which of them may carry a secret: the one policy for
/// every URL the client builds.
///
/// The proof of purchase and the download token belong to the configured server, so a request
/// goes only to its origin (scheme, host and port): a `Location` from an answer is followed only
/// when it is a path on that origin, and nothing is ever redirected (`HTTPTransport` follows no
/// redirect). Content fetched one day from an object store on another origin, by a presigned
/// URL, would be admitted here, without credentials.
struct ServerOrigin: Sendable {
    /// The server's base URL, as configured.
    let base: URL

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
}
