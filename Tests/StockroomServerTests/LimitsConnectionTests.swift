import Foundation
import Hummingbird
import HummingbirdTesting
import Testing
@testable import StockroomServer

#if canImport(Glibc)
    import Glibc
#endif

/// Idle and header timeouts, seen from a raw socket on loopback: no connection is held open
/// by a client that says nothing, or says its request head too slowly.
@Suite struct LimitsConnectionTests {
    /// A TCP connection to 127.0.0.1, read without blocking: the test's threads are the
    /// server's too, so a blocked `recv` could starve the very handler it waits for.
    final class RawConnection: Sendable {
        let descriptor: Int32

        /// `receiveBuffer` fixes the socket's receive buffer before connecting (no autotuning), so
        /// a client that stops reading really holds the server's stream back.
        init(port: Int, receiveBuffer: Int32? = nil) throws {
            descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            if var size = receiveBuffer {
                _ = setsockopt(descriptor, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
            }
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = in_port_t(UInt16(port).bigEndian)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard connected == 0 else { throw POSIXError(.ECONNREFUSED) }
        }

        deinit { close(descriptor) }

        func send(_ text: String) {
            _ = Array(text.utf8).withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        }

        /// Bytes that arrived, or nil once the server closed the connection, or after 20 s of
        /// silence (longer than any bound the tests assert, so silence never passes for a close).
        func receive() async -> [UInt8]? {
            let deadline = ContinuousClock.now + .seconds(20)
            var buffer = [UInt8](repeating: 0, count: 64 * 1024)
            while ContinuousClock.now < deadline {
                let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
                if count > 0 { return Array(buffer.prefix(count)) }
                if count == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) { return nil }
                try? await Task.sleep(for: .milliseconds(5))
            }
            return nil
        }

        /// How long until the server closes, reading (and dropping) whatever it sends first.
        func timeUntilClosed() async -> Duration {
            let start = ContinuousClock.now
            while await receive() != nil {}
            return ContinuousClock.now - start
        }

        /// Whether the connection still answers a request, reading the whole response.
        func answers() async -> Bool {
            send("GET /healthz HTTP/1.1\r\nHost: stockroom\r\n\r\n")
            var text = ""
            while true {
                guard let bytes = await receive() else { return false }
                text += String(decoding: bytes, as: UTF8.self)
                guard let headEnd = text.range(of: "\r\n\r\n") else { continue }
                let head = text[..<headEnd.lowerBound].lowercased()
                let body = text[headEnd.upperBound...]
                if head.contains("transfer-encoding: chunked") {
                    guard body.hasSuffix("0\r\n\r\n") else { continue }
                } else if let line = head.split(separator: "\r\n").first(where: { $0.hasPrefix("content-length:") }),
                    let length = Int(line.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)), body.utf8.count < length
                {
                    continue
                }
                return text.hasPrefix("HTTP/1.1 200")
            }
        }
    }

    static func withServer(idle: Duration, header: Duration, _ body: @Sendable @escaping (Int) async throws -> Void) async throws {
        var fixture = try ServerFixture()
        fixture.configuration.idleTimeout = idle
        fixture.configuration.headerTimeout = header
        let root = fixture.root
        try await fixture.application().test(.live) { client in
            try await body(try #require(client.port))
            withExtendedLifetime(root) {}
        }
    }

    // Timings leave seconds of slack: the whole suite shares two busy cores.

    @Test func anIdleKeepAliveConnectionIsClosedAfterTheIdleTimeout() async throws {
        // A header timeout long enough that a starved server still reads a head that was sent whole.
        // The idle timeout leaves 10 s for a first minute that stalls this test's tasks (the
        // server's timers run on their own threads, and a 6 s timeout once closed the connection
        // before the 2 s sleep below was over).
        try await Self.withServer(idle: .seconds(12), header: .milliseconds(1500)) { port in
            let connection = try RawConnection(port: port)
            #expect(await connection.answers())
            try await Task.sleep(for: .seconds(2))
            // The server cannot have read the second request before it was sent, so the idle
            // timeout counts from after `sent`, however late a busy machine delivers the answer.
            let sent = ContinuousClock.now
            #expect(await connection.answers(), "idle for longer than the header timeout, shorter than the idle timeout: still open")
            let silence = await connection.timeUntilClosed()
            let waited = ContinuousClock.now - sent
            #expect(waited >= .milliseconds(11_900), "closed \(waited) after the second request was sent")
            #expect(silence < .seconds(20), "closed, not merely silent for the 20 s `receive` waits")
        }
    }

    @Test func aRequestHeadTrickledTooSlowlyIsCutOff() async throws {
        try await Self.withServer(idle: .seconds(60), header: .milliseconds(500)) { port in
            let connection = try RawConnection(port: port)
            let start = ContinuousClock.now
            connection.send("GET /healthz HTTP/1.1\r\n")
            for header in ["Host: stockroom\r\n", "X-A: 1\r\n", "X-B: 2\r\n", "X-C: 3\r\n", "X-D: 4\r\n"] {
                try await Task.sleep(for: .milliseconds(150))
                connection.send(header)
            }
            let waited = ContinuousClock.now - start + (await connection.timeUntilClosed())
            #expect(waited < .seconds(15), "closed after \(waited), long before the idle timeout")
        }
    }

    @Test func aConnectionThatNeverSpeaksIsClosedAfterTheHeaderTimeout() async throws {
        try await Self.withServer(idle: .seconds(60), header: .milliseconds(400)) { port in
            let connection = try RawConnection(port: port)
            let waited = await connection.timeUntilClosed()
            #expect(waited >= .milliseconds(300) && waited < .seconds(15), "closed after \(waited)")
        }
    }

    /// Driven from a thread of its own with blocking calls: the 400 ms header timeout runs from the
    /// connection's first byte, and the suite's tasks can stall longer than that between connecting
    /// and sending in a full run.
    @Test func aLaterRequestOnTheSameConnectionGetsTheHeaderTimeoutFromItsFirstByte() async throws {
        try await Self.withServer(idle: .seconds(60), header: .milliseconds(400)) { port in
            let (first, second, waited) = await CatalogFastPathTests.onThread { () -> (Bool, Bool, Duration) in
                guard let connection = try? RawConnection(port: port) else { return (false, false, .zero) }
                let request = "GET /healthz HTTP/1.1\r\nHost: stockroom\r\n\r\n"
                connection.send(request)
                let first = CatalogFastPathTests.answerNow(connection) != nil
                Thread.sleep(forTimeInterval: 0.7)
                connection.send(request)
                let second = CatalogFastPathTests.answerNow(connection) != nil
                connection.send("GET /healthz HTTP/1.1\r\nHost: st")
                let start = ContinuousClock.now
                var buffer = [UInt8](repeating: 0, count: 4096)
                while ContinuousClock.now - start < .seconds(20) {
                    var descriptor = pollfd(fd: connection.descriptor, events: Int16(POLLIN), revents: 0)
                    guard poll(&descriptor, 1, 1_000) >= 0 else { break }
                    if descriptor.revents != 0,
                        buffer.withUnsafeMutableBytes({ recv(connection.descriptor, $0.baseAddress, $0.count, 0) }) <= 0
                    {
                        break
                    }
                }
                return (first, second, ContinuousClock.now - start)
            }
            #expect(first)
            #expect(second, "the wait between requests is not the header's")
            #expect(waited >= .milliseconds(300) && waited < .seconds(15), "closed after \(waited)")
        }
    }

    @Test func aPromptClientIsServedWithTheTimeoutsOn() async throws {
        try await Self.withServer(idle: .seconds(5), header: .seconds(2)) { port in
            let connection = try RawConnection(port: port)
            for _ in 0..<5 { #expect(await connection.answers()) }
        }
    }
}
