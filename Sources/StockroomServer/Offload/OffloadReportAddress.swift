/// The loopback address where nginx sends its delivery reports (`--offload-report`), and where
/// Stockroom listens for them.
///
/// Loopback only: a report can move a transaction to `delivered`, so nothing off this machine
/// may send one.
public struct OffloadReportAddress: Sendable, Equatable, CustomStringConvertible {
    /// `127.x.y.z` or `::1`, unbracketed.
    public let host: String
    /// 1...65535; 0 only for a listener in tests that asks the system for a port.
    public let port: Int

    /// The address used when none is given: syslog's number, above the privileged ports.
    public static let `default` = OffloadReportAddress(checkedHost: "127.0.0.1", port: 5514)

    private init(checkedHost host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// `host` must be a loopback IP address (not a name: nginx and Stockroom must agree on it).
    public init(host: String, port: Int) throws(OffloadSettingError) {
        let text = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        guard (0...65535).contains(port), Self.isLoopbackAddress(host) else { throw .report(text) }
        self.init(checkedHost: host, port: port)
    }

    /// Parses `127.0.0.1:5514` or `[::1]:5514`.
    public init(parsing text: String) throws(OffloadSettingError) {
        guard text.utf8.count <= 64, let colon = text.lastIndex(of: ":") else { throw .report(text) }
        var host = String(text[..<colon])
        let portText = text[text.index(after: colon)...]
        if host.hasPrefix("[") && host.hasSuffix("]") {
            host = String(host.dropFirst().dropLast())
        } else if host.contains(":") {
            throw .report(text)
        }
        let isDecimal = portText.utf8.allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }
        guard (1...5).contains(portText.utf8.count), isDecimal, let port = Int(portText), (1...65535).contains(port) else {
            throw .report(text)
        }
        guard Self.isLoopbackAddress(host) else { throw .report(text) }
        self.init(checkedHost: host, port: port)
    }

    /// As nginx's `syslog:server=` takes it: `127.0.0.1:5514`, `[::1]:5514`.
    public var description: String {
        host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
    }

    private static func isLoopbackAddress(_ host: String) -> Bool {
        host.lowercased() != "localhost" && !host.hasPrefix("[") && LoopbackHost.contains(host)
    }
}
