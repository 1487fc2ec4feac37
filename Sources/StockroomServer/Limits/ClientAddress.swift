public import NIOCore

/// The client address that per-address limits count: the connection's peer IP, or, when the
/// peer is a proxy on this machine (the nginx of `deploy/`), the address that proxy appended
/// last to `X-Forwarded-For`. A client cannot pick its own key: entries it wrote itself come
/// before the proxy's, and a direct connection's header is ignored.
public enum ClientAddress {
    /// The key for `peer`, reading `forwardedFor` only when `peer` is loopback.
    public static func of(peer: SocketAddress?, forwardedFor: String?) -> String {
        let direct = peer?.ipAddress ?? "unknown"
        guard LoopbackHost.contains(direct), let forwardedFor, forwardedFor.utf8.count <= 8192,
            let last = forwardedFor.split(separator: ",").last?.trimmingCharacters(in: .whitespaces),
            !last.isEmpty, last.utf8.count <= 45, last.allSatisfy({ $0.isHexDigit || $0 == "." || $0 == ":" })
        else { return direct }
        return last
    }
}
