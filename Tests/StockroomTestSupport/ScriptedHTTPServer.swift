import Foundation
#if canImport(Glibc)
    import Glibc
#endif

/// An HTTP server on loopback that answers each request with a script of raw writes and pauses,
/// for what a real server does not do on demand: never answer, stall mid-body, redirect.
public final class ScriptedHTTPServer: @unchecked Sendable {
    public enum Step: Sendable {
        case send(String)
        /// Bytes as they are (a body that is not UTF-8).
        case raw([UInt8])
        case bytes(Int)
        case pause(TimeInterval)
        case close
        /// Reads until the client closes, and records how long after the last byte sent it did.
        case awaitClose
    }

    /// One request as it arrived: its head's lines and its body.
    public struct Request: Sendable {
        public var head: [String]
        public var body: Data
        public var line: String { head.first ?? "" }
        public func header(_ name: String) -> String? {
            for field in head.dropFirst() {
                let parts = field.split(separator: ":", maxSplits: 1)
                if parts.count == 2, parts[0].lowercased() == name.lowercased() { return parts[1].trimmingCharacters(in: .whitespaces) }
            }
            return nil
        }
    }

    public let port: Int
    private let listener: Int32
    private let script: @Sendable (Request) -> [Step]
    private let lock = NSLock()
    private var seen: [Request] = []
    private var open: [Int32] = []
    private var stopped = false
    private var closeDelays: [TimeInterval] = []

    /// For each `awaitClose`, the seconds from the last byte sent (or the request, when nothing
    /// was sent) to the client's close, measured
    /// on this server's own threads (a busy test process's task threads do not skew them).
    public var clientCloseDelays: [TimeInterval] { lock.withLock { closeDelays } }

    /// On `port`, or one the kernel picks (0): a receiver brought back on the port it was down on.
    public init(port: Int = 0, script: @escaping @Sendable (Request) -> [Step]) throws {
        self.script = script
        (listener, self.port) = try LoopbackListener.open(backlog: 16, port: port)
        Thread { [self] in acceptLoop() }.start()
    }

    deinit { stop() }

    public var url: URL { URL(string: "http://127.0.0.1:\(port)")! }

    /// The requests so far.
    public var requests: [Request] { lock.withLock { seen } }

    /// Once only: a second `shutdown` on a descriptor closed since would hit whatever socket
    /// of another test took its number.
    /// The connections are shut down under the lock: one still listed is not closed yet.
    public func stop() {
        lock.withLock {
            if stopped { return }
            stopped = true
            shutdown(listener, Int32(SHUT_RDWR))
            for socket in open { shutdown(socket, Int32(SHUT_RDWR)) }
        }
    }

    private func acceptLoop() {
        while true {
            let client = accept(listener, nil, nil)
            if client < 0 {
                // Closed only once `stop` shut it down, so `stop` never meets a reused number.
                if lock.withLock({ stopped }) {
                    close(listener)
                    return
                }
                Thread.sleep(forTimeInterval: 0.01)
                continue
            }
            lock.withLock { open.append(client) }
            Thread { [self] in serve(client) }.start()
        }
    }

    private func serve(_ client: Int32) {
        defer {
            lock.withLock { open.removeAll { $0 == client } }
            close(client)
        }
        var received = Data()
        var lastSent = ProcessInfo.processInfo.systemUptime
        while let request = Self.request(in: &received) ?? readRequest(client, into: &received) {
            lastSent = ProcessInfo.processInfo.systemUptime  // an `awaitClose` before any answer counts from the request
            lock.withLock { seen.append(request) }
            for step in script(request) {
                switch step {
                case .send(let text):
                    guard write(client, Data(text.utf8)) else { return }
                    lastSent = ProcessInfo.processInfo.systemUptime
                case .raw(let bytes):
                    guard write(client, Data(bytes)) else { return }
                    lastSent = ProcessInfo.processInfo.systemUptime
                case .bytes(let count):
                    guard write(client, Data(repeating: 0x61, count: count)) else { return }
                    lastSent = ProcessInfo.processInfo.systemUptime
                case .pause(let seconds): Thread.sleep(forTimeInterval: seconds)
                case .close: return
                case .awaitClose:
                    var buffer = [UInt8](repeating: 0, count: 4096)
                    while recv(client, &buffer, buffer.count, 0) > 0 {}
                    let delay = ProcessInfo.processInfo.systemUptime - lastSent
                    lock.withLock { closeDelays.append(delay) }
                    return
                }
            }
        }
    }

    /// Reads until a whole request is buffered; nil once the client closed.
    private func readRequest(_ client: Int32, into received: inout Data) -> Request? {
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let count = recv(client, &buffer, buffer.count, 0)
            if count <= 0 { return nil }
            received.append(contentsOf: buffer[0..<count])
            if let request = Self.request(in: &received) { return request }
        }
    }

    private static func request(in received: inout Data) -> Request? {
        guard let end = received.range(of: Data("\r\n\r\n".utf8)) else { return nil }
        let head = String(decoding: received[received.startIndex..<end.lowerBound], as: UTF8.self).components(separatedBy: "\r\n")
        var request = Request(head: head, body: Data())
        let length = Int(request.header("Content-Length") ?? "0") ?? 0
        guard received.count - (end.upperBound - received.startIndex) >= length else { return nil }
        request.body = received[end.upperBound..<(end.upperBound + length)]
        received = Data(received[(end.upperBound + length)...])
        return request
    }

    private func write(_ client: Int32, _ data: Data) -> Bool {
        data.withUnsafeBytes { bytes in
            var offset = 0
            while offset < bytes.count {
                let sent = send(client, bytes.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL))
                if sent <= 0 { return false }
                offset += sent
            }
            return true
        }
    }
}
