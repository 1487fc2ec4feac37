/// Where `/metrics` is served when it must not share the public port (`--metrics-address`):
/// a loopback `host:port`, so ledger counts and upstream error rates stay on this machine for
/// the Prometheus that scrapes them.
public struct MetricsAddress: Sendable, Equatable, CustomStringConvertible {
    public let host: String
    public let port: Int

    /// Parses `127.0.0.1:9100`, `[::1]:9100` or `localhost:9100`; only loopback hosts.
    public init(parsing text: String) throws(MetricsAddressError) {
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]), (1...65_535).contains(port) else {
            throw .malformed(text)
        }
        var host = String(text[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard LoopbackHost.contains(host) else { throw .notLoopback(text) }
        self.host = host
        self.port = port
    }

    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}

/// A `--metrics-address` that is not a loopback `host:port`.
public enum MetricsAddressError: Error, CustomStringConvertible {
    case malformed(String)
    case notLoopback(String)

    public var description: String {
        switch self {
        case .malformed(let text): "--metrics-address takes host:port (127.0.0.1:9100), not \"\(text)\""
        case .notLoopback(let text): "--metrics-address serves only a loopback host (127.0.0.1, ::1, localhost), not \"\(text)\""
        }
    }
}
