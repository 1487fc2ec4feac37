import NIOCore
import Testing
@testable import StockroomServer

/// Which address a per-client limit counts: the peer, or the local proxy's last hop.
@Suite struct LimitsClientAddressTests {
    static let remote = try! SocketAddress(ipAddress: "203.0.113.7", port: 50_000)
    static let proxy = try! SocketAddress(ipAddress: "127.0.0.1", port: 50_000)

    @Test func aDirectClientIsItsPeerAddressWhateverItsHeaderSays() {
        #expect(ClientAddress.of(peer: Self.remote, forwardedFor: nil) == "203.0.113.7")
        #expect(ClientAddress.of(peer: Self.remote, forwardedFor: "198.51.100.1") == "203.0.113.7")
    }

    @Test func behindALocalProxyItIsTheLastHopThatProxyAdded() {
        #expect(ClientAddress.of(peer: Self.proxy, forwardedFor: "198.51.100.1") == "198.51.100.1")
        #expect(ClientAddress.of(peer: Self.proxy, forwardedFor: "1.2.3.4, 198.51.100.1") == "198.51.100.1", "the client's own entries come first")
        #expect(ClientAddress.of(peer: Self.proxy, forwardedFor: "2001:db8::5") == "2001:db8::5")
    }

    @Test func aMalformedForwardedHeaderFallsBackToThePeer() {
        for header in ["", " , ", "not-an-address", String(repeating: "1", count: 50), "1.2.3.4, evil<script>"] {
            #expect(ClientAddress.of(peer: Self.proxy, forwardedFor: header) == "127.0.0.1", "\(header)")
        }
        #expect(ClientAddress.of(peer: nil, forwardedFor: "198.51.100.1") == "unknown")
    }
}
