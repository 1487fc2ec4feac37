#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Whether a listening address reaches only this machine: 127.0.0.0/8, `::1` or `localhost`.
///
/// The built-in App Store simulator mints purchases the server trusts, so it is mounted only on
/// such a host.
public enum LoopbackHost {
    /// True for `localhost`, an IPv4 address in 127.0.0.0/8, and `::1` (bracketed or not).
    public static func contains(_ host: String) -> Bool {
        guard host.utf8.count <= 64 else { return false }
        if host.lowercased() == "localhost" { return true }
        var ipv4 = in_addr()
        if inet_pton(AF_INET, host, &ipv4) == 1 {
            return UInt32(bigEndian: ipv4.s_addr) >> 24 == 127
        }
        let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        var ipv6 = in6_addr()
        guard inet_pton(AF_INET6, bare, &ipv6) == 1 else { return false }
        let bytes = withUnsafeBytes(of: ipv6) { Array($0) }
        return bytes == Array(repeating: 0, count: 15) + [1]
    }
}
