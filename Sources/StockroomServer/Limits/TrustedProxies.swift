#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The proxies whose `X-Forwarded-For` and `X-Forwarded-Proto` Stockroom believes
/// (`--trusted-proxy`, repeatable): addresses or CIDR blocks, IPv4 or IPv6. Empty by default, so
/// a client's own header never picks the address its limits count; `stockroom deploy nginx` says
/// which address to name.
public struct TrustedProxies: Sendable, Equatable {
    /// One address block: the network's bytes (4 or 16) and its prefix length.
    struct Block: Sendable, Equatable {
        let bytes: [UInt8]
        let prefix: Int

        func contains(_ address: [UInt8]) -> Bool {
            guard address.count == bytes.count else { return false }
            var remaining = prefix
            for index in bytes.indices where remaining > 0 {
                let bits = min(8, remaining)
                let mask = UInt8(truncatingIfNeeded: 0xFF << (8 - bits))
                if address[index] & mask != bytes[index] & mask { return false }
                remaining -= bits
            }
            return true
        }
    }

    let blocks: [Block]

    /// No proxy is trusted: every client is its connection's peer.
    public static let none = TrustedProxies(blocks: [])

    init(blocks: [Block]) {
        self.blocks = blocks
    }

    /// Parses `127.0.0.1`, `10.0.0.0/8`, `::1` or `fd00::/8` each; throws on anything else.
    public init(parsing entries: [String]) throws(TrustedProxyError) {
        var blocks: [Block] = []
        for entry in entries {
            let parts = entry.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
            guard let bytes = IPAddressBytes.parse(String(parts[0])) else { throw .malformed(entry) }
            let maximum = bytes.count * 8
            let prefix: Int
            if parts.count == 2 {
                guard let length = Int(parts[1]), (0...maximum).contains(length) else { throw .malformed(entry) }
                prefix = length
            } else {
                prefix = maximum
            }
            blocks.append(Block(bytes: bytes, prefix: prefix))
        }
        self.init(blocks: blocks)
    }

    /// Whether `address` (text, as a socket reports it) is one of the trusted proxies.
    public func contains(_ address: String) -> Bool {
        guard !blocks.isEmpty, let bytes = IPAddressBytes.parse(address) else { return false }
        return blocks.contains { $0.contains(bytes) }
    }

    public var isEmpty: Bool { blocks.isEmpty }
}

/// A `--trusted-proxy` value that is neither an address nor a CIDR block.
public enum TrustedProxyError: Error, CustomStringConvertible {
    case malformed(String)

    public var description: String {
        switch self {
        case .malformed(let entry): "--trusted-proxy takes an IP address or a CIDR block (127.0.0.1, 10.0.0.0/8, ::1), not \"\(entry)\""
        }
    }
}

/// The bytes of an IP address written as text: 4 for IPv4, 16 for IPv6 (an IPv4-mapped IPv6
/// address gives its IPv4 bytes, as the same client reached over either family).
enum IPAddressBytes {
    static func parse(_ text: String) -> [UInt8]? {
        guard !text.isEmpty, text.utf8.count <= 45 else { return nil }
        var ipv4 = in_addr()
        if inet_pton(AF_INET, text, &ipv4) == 1 { return withUnsafeBytes(of: ipv4) { Array($0) } }
        var ipv6 = in6_addr()
        guard inet_pton(AF_INET6, text, &ipv6) == 1 else { return nil }
        let bytes = withUnsafeBytes(of: ipv6) { Array($0) }
        if bytes.prefix(12) == [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF] { return Array(bytes.suffix(4)) }
        return bytes
    }
}
