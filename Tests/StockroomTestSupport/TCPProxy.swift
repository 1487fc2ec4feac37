import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A TCP proxy on loopback in front of a server, to break what travels between a client and
/// it: it cuts a connection after some bytes of the answer, flips one byte of an answer, refuses
/// connections (a server out of reach), or stalls every connection (a server or a network that
/// stopped answering while the connections stay open).
public final class TCPProxy: @unchecked Sendable {
    /// What happens to one connection's answer bytes.
    public enum Fault: Sendable {
        /// Forward this many bytes of the answer (head included), then close both sides.
        case cutAfter(Int)
        /// Flip every bit of the answer's byte at this offset (head included).
        case flip(at: Int)
        /// Cut as `cutAfter`, then refuse every new connection until `refuse(false)`: the server
        /// went out of reach mid-download.
        case cutAfterThenRefuse(Int)
    }

    public let port: Int
    private let upstreamPort: Int
    private let listener: Int32
    private let lock = NSLock()
    private var faults: [Fault] = []
    private var refusing = false
    private var stalled = false
    private var closed = false
    private var accepted = 0
    private var live: [SocketPair] = []

    public init(upstreamPort: Int) throws {
        self.upstreamPort = upstreamPort
        (listener, port) = try LoopbackListener.open(backlog: 64)
        let thread = Thread { [self] in acceptLoop() }
        thread.start()
    }

    deinit { stop() }

    /// The faults of the next connections, one each, in the order they are accepted.
    public func inject(_ faults: [Fault]) { lock.withLock { self.faults = faults } }

    /// While true, every new connection is closed at once, unanswered.
    public func refuse(_ refusing: Bool) { lock.withLock { self.refusing = refusing } }

    /// While true, no byte moves either way on any connection, old or new; they stay open, and
    /// what was read meanwhile is passed on once the stall ends.
    public func stall(_ stalled: Bool) { lock.withLock { self.stalled = stalled } }

    /// Cuts every open connection at once, as a server that restarts does; new ones are accepted.
    public func cutAll() {
        let pairs = lock.withLock { () -> [SocketPair] in
            defer { live = [] }
            return live
        }
        for pair in pairs { pair.cut() }
    }

    /// Connections accepted so far.
    public var connections: Int { lock.withLock { accepted } }

    public var url: URL { URL(string: "http://127.0.0.1:\(port)")! }

    public func stop() {
        let wasClosed = lock.withLock { () -> Bool in
            defer { closed = true }
            return closed
        }
        if !wasClosed {
            shutdown(listener, Int32(SHUT_RDWR))
            close(listener)
        }
    }

    private func acceptLoop() {
        while true {
            let client = accept(listener, nil, nil)
            if client < 0 { return }
            let (fault, refuse) = lock.withLock { () -> (Fault?, Bool) in
                accepted += 1
                if refusing { return (nil, true) }
                return (faults.isEmpty ? nil : faults.removeFirst(), false)
            }
            if refuse {
                close(client)
                continue
            }
            let server = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = LoopbackListener.loopback(port: upstreamPort)
            let connected = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(server, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
            if connected != 0 {
                close(client)
                close(server)
                continue
            }
            let pair = SocketPair(client: client, server: server)
            lock.withLock {
                live.removeAll { $0.isClosed }
                live.append(pair)
            }
            Thread { [self] in pump(from: client, to: server, fault: nil, pair: pair) }.start()
            Thread { [self] in pump(from: server, to: client, fault: fault, pair: pair) { self.refuse(true) } }.start()
        }
    }

    /// Holds the calling pump while the proxy is stalled (or until it stops).
    private func waitWhileStalled() {
        while lock.withLock({ stalled && !closed }) { Thread.sleep(forTimeInterval: 0.01) }
    }

    /// Copies bytes one way until either side closes, applying the fault to them.
    private func pump(from source: Int32, to sink: Int32, fault: Fault?, pair: SocketPair, goDown: @escaping () -> Void = {}) {
        var fault = fault
        var refuseAfterCut = false
        if case .cutAfterThenRefuse(let limit)? = fault {
            fault = .cutAfter(limit)
            refuseAfterCut = true
        }
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        var offset = 0
        loop: while true {
            let count = buffer.withUnsafeMutableBytes { read(source, $0.baseAddress, $0.count) }
            if count <= 0 { break }
            waitWhileStalled()
            var length = count
            switch fault {
            case .cutAfter(let limit)?:
                length = min(count, limit - offset)
            case .flip(let at)?:
                if at >= offset, at < offset + count { buffer[at - offset] ^= 0xFF }
            case nil, .cutAfterThenRefuse?:
                break
            }
            var written = 0
            while written < length {
                let sent = buffer.withUnsafeBytes { send(sink, $0.baseAddress! + written, length - written, Int32(MSG_NOSIGNAL)) }
                if sent <= 0 { break loop }
                written += sent
            }
            offset += count
            if case .cutAfter(let limit)? = fault, offset >= limit {
                if refuseAfterCut { goDown() }
                break
            }
        }
        pair.closeBoth()
    }
}

/// Both sockets of a proxied connection: the first direction to end shuts both down (so the
/// other's read returns), the second closes them.
private final class SocketPair: @unchecked Sendable {
    let client: Int32
    let server: Int32
    private let lock = NSLock()
    private var ended = 0

    init(client: Int32, server: Int32) {
        self.client = client
        self.server = server
    }

    var isClosed: Bool { lock.withLock { ended == 2 } }

    /// Shuts both sockets down unless both pumps ended (the descriptors may be closed and reused).
    func cut() {
        lock.withLock {
            guard ended < 2 else { return }
            shutdown(client, Int32(SHUT_RDWR))
            shutdown(server, Int32(SHUT_RDWR))
        }
    }

    func closeBoth() {
        let count = lock.withLock { () -> Int in
            ended += 1
            return ended
        }
        shutdown(client, Int32(SHUT_RDWR))
        shutdown(server, Int32(SHUT_RDWR))
        if count == 2 {
            close(client)
            close(server)
        }
    }
}
