import Foundation
#if canImport(Glibc)
    import Glibc
#endif

/// A TCP proxy on loopback in front of a server, to break what travels between a client and
/// it: it cuts a connection after some bytes of the answer, flips one byte of an answer, holds a
/// request back, refuses connections (a server out of reach), or stalls every connection (a
/// server or a network that stopped answering while the connections stay open). It records every
/// HTTP request that passes (`requests`), to show what reached the server.
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
        /// Hold the connection's first request this many seconds before passing it on.
        case holdRequest(TimeInterval)
        /// Replace the first occurrence of a text in the answer's first bytes with another of the
        /// same length (a header's value: lengths stay right).
        case replaceInHead(String, with: String)
    }

    public let port: Int
    private let upstreamPort: Int
    private let listener: Int32
    private let lock = NSLock()
    private var faults: [Fault] = []
    /// When set, a fault goes only to a connection whose first request this accepts.
    private var faultFilter: (@Sendable (ProxiedRequest) -> Bool)?
    private var recorded: [ProxiedRequest] = []
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
    public func inject(_ faults: [Fault]) {
        lock.withLock {
            self.faults = faults
            faultFilter = nil
        }
    }

    /// The faults of the next connections whose first request `filter` accepts, one each, in the
    /// order those requests arrive; other connections pass untouched.
    public func inject(_ faults: [Fault], whereFirstRequest filter: @escaping @Sendable (ProxiedRequest) -> Bool) {
        lock.withLock {
            self.faults = faults
            faultFilter = filter
        }
    }

    /// The HTTP requests that passed so far, in the order their last byte arrived.
    public var requests: [ProxiedRequest] { lock.withLock { recorded } }

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
            let (fault, refuse, deferred) = lock.withLock { () -> (Fault?, Bool, Bool) in
                accepted += 1
                if refusing { return (nil, true, false) }
                if faultFilter != nil { return (nil, false, true) }
                return (faults.isEmpty ? nil : faults.removeFirst(), false, false)
            }
            if refuse {
                close(client)
                continue
            }
            let server = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = LoopbackListener.loopback(port: upstreamPort)
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(server, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            if connected != 0 {
                close(client)
                close(server)
                continue
            }
            let pair = SocketPair(client: client, server: server, fault: fault)
            lock.withLock {
                live.removeAll { $0.isClosed }
                live.append(pair)
            }
            Thread { [self] in pumpRequests(from: client, to: server, deciding: deferred, pair: pair) }.start()
            Thread { [self] in pump(from: server, to: client, pair: pair) { self.refuse(true) } }.start()
        }
    }

    /// Copies the client's bytes to the server until either side closes, recording each request.
    /// `deciding`: the connection's fault is chosen by its first request, which waits for it.
    private func pumpRequests(from source: Int32, to sink: Int32, deciding: Bool, pair: SocketPair) {
        var reader = RequestReader()
        var deciding = deciding
        var pending = Data()
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(source, $0.baseAddress, $0.count) }
            if count <= 0 { break }
            waitWhileStalled()
            let bytes = Data(buffer[0..<count])
            let requests = reader.read(bytes)
            lock.withLock { recorded += requests }
            pending.append(bytes)
            if deciding {
                guard let first = requests.first else { continue }
                deciding = false
                let fault = lock.withLock { () -> Fault? in
                    guard let faultFilter, faultFilter(first), !faults.isEmpty else { return nil }
                    return faults.removeFirst()
                }
                pair.fault = fault
                if case .holdRequest(let seconds)? = fault { Thread.sleep(forTimeInterval: seconds) }
            }
            guard Self.forward(pending, to: sink) else { break }
            pending = Data()
        }
        pair.closeBoth()
    }

    private static func forward(_ data: Data, to sink: Int32) -> Bool {
        data.withUnsafeBytes { bytes in
            var written = 0
            while written < bytes.count {
                let sent = send(sink, bytes.baseAddress! + written, bytes.count - written, Int32(MSG_NOSIGNAL))
                if sent <= 0 { return false }
                written += sent
            }
            return true
        }
    }

    /// Holds the calling pump while the proxy is stalled (or until it stops).
    private func waitWhileStalled() {
        while lock.withLock({ stalled && !closed }) { Thread.sleep(forTimeInterval: 0.01) }
    }

    /// Copies the server's bytes to the client until either side closes, applying the
    /// connection's fault to them (read once they begin: by then the first request chose it).
    private func pump(from source: Int32, to sink: Int32, pair: SocketPair, goDown: @escaping () -> Void = {}) {
        var fault: Fault?
        var refuseAfterCut = false
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        var offset = 0
        loop: while true {
            let count = buffer.withUnsafeMutableBytes { read(source, $0.baseAddress, $0.count) }
            if count <= 0 { break }
            waitWhileStalled()
            if offset == 0 {
                fault = pair.fault
                if case .cutAfterThenRefuse(let limit)? = fault {
                    fault = .cutAfter(limit)
                    refuseAfterCut = true
                }
            }
            var length = count
            switch fault {
            case .cutAfter(let limit)?:
                length = min(count, limit - offset)
            case .flip(let at)?:
                if at >= offset, at < offset + count { buffer[at - offset] ^= 0xFF }
            case .replaceInHead(let old, let new)? where offset == 0:
                let old = Array(old.utf8), new = Array(new.utf8)
                precondition(old.count == new.count, "a replacement keeps the answer's length")
                if let start = (0...max(0, count - old.count)).first(where: { buffer[$0..<($0 + old.count)].elementsEqual(old) }) {
                    buffer.replaceSubrange(start..<(start + old.count), with: new)
                }
            case nil, .cutAfterThenRefuse?, .holdRequest?, .replaceInHead?:
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

/// Both sockets of a proxied connection, and its fault: the first direction to end shuts both
/// down (so the other's read returns), the second closes them.
private final class SocketPair: @unchecked Sendable {
    let client: Int32
    let server: Int32
    private let lock = NSLock()
    private var ended = 0
    private var _fault: TCPProxy.Fault?

    init(client: Int32, server: Int32, fault: TCPProxy.Fault?) {
        self.client = client
        self.server = server
        _fault = fault
    }

    var fault: TCPProxy.Fault? {
        get { lock.withLock { _fault } }
        set { lock.withLock { _fault = newValue } }
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
