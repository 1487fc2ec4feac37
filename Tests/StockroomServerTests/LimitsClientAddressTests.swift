import NIOCore
import Testing
@testable import StockroomServer

/// Which address a per-client limit counts: the peer, or what a trusted proxy saw; IPv6 per /64.
@Suite struct LimitsClientAddressTests {
    static let remote = try! SocketAddress(ipAddress: "203.0.113.7", port: 50_000)
    static let proxy = try! SocketAddress(ipAddress: "127.0.0.1", port: 50_000)
    static let loopback = try! TrustedProxies(parsing: ["127.0.0.1"])

    @Test func aDirectClientIsItsPeerAddressWhateverItsHeaderSays() {
        #expect(ClientAddress.of(peer: Self.remote, forwardedFor: nil, trusting: Self.loopback) == "203.0.113.7")
        #expect(ClientAddress.of(peer: Self.remote, forwardedFor: "198.51.100.1", trusting: Self.loopback) == "203.0.113.7")
    }

    @Test func behindATrustedProxyItIsTheLastHopThatProxyAdded() {
        #expect(ClientAddress.of(peer: Self.proxy, forwardedFor: "198.51.100.1", trusting: Self.loopback) == "198.51.100.1")
        #expect(
            ClientAddress.of(peer: Self.proxy, forwardedFor: "1.2.3.4, 198.51.100.1", trusting: Self.loopback) == "198.51.100.1",
            "the client's own entries come first")
        #expect(ClientAddress.of(peer: Self.proxy, forwardedFor: "2001:db8::5", trusting: Self.loopback) == "2001:db8:0:0::/64")
    }

    @Test func aLoopbackPeerThatIsNotNamedIsNotTrusted() {
        #expect(ClientAddress.of(peer: Self.proxy, forwardedFor: "198.51.100.1", trusting: .none) == "127.0.0.1")
        let other = try! TrustedProxies(parsing: ["10.0.0.0/8"])
        #expect(ClientAddress.of(peer: Self.proxy, forwardedFor: "198.51.100.1", trusting: other) == "127.0.0.1")
    }

    @Test func aChainOfTrustedProxiesIsWalkedFromTheRight() throws {
        let proxies = try TrustedProxies(parsing: ["127.0.0.1", "10.0.0.0/8"])
        #expect(ClientAddress.of(peer: Self.proxy, forwardedFor: "6.6.6.6, 198.51.100.1, 10.1.2.3", trusting: proxies) == "198.51.100.1")
    }

    @Test func ipv6ClientsCountPerSlash64() {
        let a = try! SocketAddress(ipAddress: "2001:db8:1:2::1", port: 1)
        let b = try! SocketAddress(ipAddress: "2001:db8:1:2:ffff:ffff:ffff:fffe", port: 1)
        let c = try! SocketAddress(ipAddress: "2001:db8:1:3::1", port: 1)
        let keyA = ClientAddress.of(peer: a, forwardedFor: nil, trusting: .none)
        #expect(keyA == "2001:db8:1:2::/64")
        #expect(ClientAddress.of(peer: b, forwardedFor: nil, trusting: .none) == keyA)
        #expect(ClientAddress.of(peer: c, forwardedFor: nil, trusting: .none) != keyA)
        #expect(ClientAddress.key("::ffff:198.51.100.9") == "198.51.100.9", "an IPv4-mapped address is its IPv4 client")
    }

    @Test func aMalformedForwardedHeaderFallsBackToThePeer() {
        for header in ["", " , ", "not-an-address", String(repeating: "1", count: 50), "1.2.3.4, evil<script>"] {
            #expect(ClientAddress.of(peer: Self.proxy, forwardedFor: header, trusting: Self.loopback) == "127.0.0.1", "\(header)")
        }
        #expect(ClientAddress.of(peer: nil, forwardedFor: "198.51.100.1", trusting: Self.loopback) == "unknown")
    }

    @Test func trustedProxiesParseAddressesAndBlocksAndRefuseTheRest() throws {
        let proxies = try TrustedProxies(parsing: ["127.0.0.1", "10.0.0.0/8", "::1", "fd00::/8"])
        #expect(proxies.contains("10.200.1.1"))
        #expect(!proxies.contains("11.0.0.1"))
        #expect(proxies.contains("::1"))
        #expect(proxies.contains("fd12::1"))
        #expect(!proxies.contains("fe80::1"))
        for bad in ["", "localhost", "10.0.0.0/33", "::/129", "1.2.3.4/x", "1.2.3"] {
            #expect(throws: TrustedProxyError.self, "\(bad)") { try TrustedProxies(parsing: [bad]) }
        }
    }
}
