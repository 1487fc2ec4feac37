public import NIOCore

/// The client address that per-client limits count.
///
/// It is the connection's peer, unless that peer is a proxy the operator named
/// (`--trusted-proxy`): then it is the last `X-Forwarded-For` entry that is not itself a trusted
/// proxy, the address the outermost trusted proxy saw. Entries a client wrote itself come before
/// those, so a client cannot pick its own key, and a direct connection's header is ignored.
///
/// An IPv6 client counts per /64 (one customer's network is usually one /64), an IPv4 client per
/// address; an IPv4-mapped IPv6 address counts as its IPv4 address.
public enum ClientAddress {
    /// The key for `peer`, reading `forwardedFor` only when `peer` is a trusted proxy.
    public static func of(peer: SocketAddress?, forwardedFor: String?, trusting proxies: TrustedProxies) -> String {
        guard let direct = peer?.ipAddress else { return "unknown" }
        guard proxies.contains(direct), let forwardedFor, forwardedFor.utf8.count <= 8192 else { return key(direct) }
        for entry in forwardedFor.split(separator: ",").reversed() {
            let hop = entry.trimmingCharacters(in: .whitespaces)
            guard IPAddressBytes.parse(hop) != nil else { return key(direct) }
            if !proxies.contains(hop) { return key(hop) }
        }
        return key(direct)
    }

    /// `address` as a limit counts it: IPv4 whole, IPv6 as its /64 (`2001:db8:1:2::/64`).
    public static func key(_ address: String) -> String {
        guard let bytes = IPAddressBytes.parse(address) else { return address }
        if bytes.count == 4 { return bytes.map(String.init).joined(separator: ".") }
        let groups = stride(from: 0, to: 8, by: 2).map { String(UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]), radix: 16) }
        return groups.joined(separator: ":") + "::/64"
    }
}
