import Foundation

/// Where events are pushed: a name (what the ledger's deliveries and the metrics say), a URL, and
/// the secrets that sign each request (`WebhookSignature`), the first the newest.
public struct WebhookEndpoint: Sendable, Equatable, Codable {
    public var name: String
    public var url: String
    /// Never logged; an operator reads them with `stockroom webhooks list --show-secrets`.
    public var secrets: [String]

    public init(name: String, url: String, secrets: [String]) {
        self.name = name
        self.url = url
        self.secrets = secrets
    }

    /// Why an endpoint cannot be used.
    public struct Invalid: Error, CustomStringConvertible, Equatable {
        public let description: String
    }

    /// The endpoint checked: a name of letters, digits, `-` and `_`; an `https` URL (plain
    /// `http` only to a loopback host); at least one secret of 16 characters or more, at most two.
    public func validated() throws(Invalid) -> WebhookEndpoint {
        guard (1...64).contains(name.utf8.count), name.utf8.allSatisfy({ $0.isNameByte }) else {
            throw Invalid(description: "webhook endpoint name \"\(name)\" must be 1 to 64 letters, digits, '-' or '_'")
        }
        guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased(), let host = components.host,
            !host.isEmpty, components.user == nil, components.password == nil
        else {
            throw Invalid(
                description: "webhook endpoint \(name): \(Self.redacted(url)) is not an absolute http(s) URL without user information")
        }
        switch scheme {
        case "https": break
        case "http" where Self.isLoopback(host): break
        default:
            throw Invalid(description: "webhook endpoint \(name): the URL must be https (plain http only to a loopback host)")
        }
        guard (1...2).contains(secrets.count), secrets.allSatisfy({ $0.utf8.count >= 16 && $0.utf8.count <= 256 }) else {
            throw Invalid(description: "webhook endpoint \(name): one or two secrets of 16 to 256 characters (two while rotating)")
        }
        return self
    }

    /// The URL's scheme, host and port only, its path shown as `/…`: a receiver may carry a
    /// credential in its user information, path or query (as Slack's and Discord's hooks do).
    /// What logs, errors and listings show.
    public static func redacted(_ url: String) -> String {
        guard let components = URLComponents(string: url), let scheme = components.scheme, let host = components.host, !host.isEmpty
        else { return "(a URL that does not parse)" }
        let port = components.port.map { ":\($0)" } ?? ""
        let bracketed = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
        return "\(scheme)://\(bracketed)\(port)" + (components.path.isEmpty || components.path == "/" ? "/" : "/…")
    }

    /// `localhost`, `::1`, or an IPv4 address in 127.0.0.0/8, written as one: a name that merely
    /// starts with "127." is not loopback.
    private static func isLoopback(_ host: String) -> Bool {
        if host == "localhost" || host == "::1" || host == "[::1]" { return true }
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4, parts[0] == "127" else { return false }
        return parts.allSatisfy { part in
            (1...3).contains(part.utf8.count) && part.utf8.allSatisfy { (0x30...0x39).contains($0) } && Int(part)! <= 255
        }
    }

    /// The secret of an endpoint given only by its URL (`--webhook URL`): derived from the server's
    /// download-token key, so each URL has its own and none is written on a command line.
    public static func derivedSecret(for url: String, key: [UInt8]) -> String {
        "whsec_" + ByteEncoding.hex(HMACSHA256.authenticationCode(for: Array("stockroom webhook secret\u{0}\(url)".utf8), key: key))
    }

    /// The endpoints of a file (`--webhooks FILE`): `{"endpoints": [{"name", "url", "secrets"}]}`.
    public static func endpoints(file data: Data) throws(Invalid) -> [WebhookEndpoint] {
        struct File: Decodable { var endpoints: [WebhookEndpoint] }
        let file: File
        do { file = try JSONDecoder().decode(File.self, from: data) } catch {
            throw Invalid(description: "the webhooks file is not {\"endpoints\": [{\"name\", \"url\", \"secrets\"}, …]}: \(error)")
        }
        return try file.endpoints.map { endpoint throws(Invalid) in try endpoint.validated() }
    }

    /// Every configured endpoint: those of the file, then one per URL given alone, each checked;
    /// names must differ. A URL given alone is named by it (`webhook-` and 8 hex digits of its
    /// SHA-256), so its deliveries stay its own whatever other endpoints come and go.
    public static func resolve(urls: [String], file: Data?, key: [UInt8]) throws(Invalid) -> [WebhookEndpoint] {
        var endpoints = try file.map { data throws(Invalid) in try Self.endpoints(file: data) } ?? []
        for url in urls {
            let name = "webhook-" + String(ByteEncoding.hex(SHA256.hash(Array(url.utf8))).prefix(8))
            let endpoint = WebhookEndpoint(name: name, url: url, secrets: [derivedSecret(for: url, key: key)])
            endpoints.append(try endpoint.validated())
        }
        guard Set(endpoints.map(\.name)).count == endpoints.count else {
            throw Invalid(description: "two webhook endpoints have one name")
        }
        return endpoints
    }
}

extension UInt8 {
    fileprivate var isNameByte: Bool {
        (0x30...0x39).contains(self) || (0x41...0x5A).contains(self) || (0x61...0x7A).contains(self) || self == 0x2D || self == 0x5F
    }
}
