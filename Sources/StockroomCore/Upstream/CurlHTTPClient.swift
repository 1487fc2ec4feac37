import CCurl
import Foundation
import NIOCore
import NIOPosix
import Synchronization

/// The production `UpstreamTransport`: libcurl easy handles, reused so connections stay alive,
/// driven on a thread pool of their own because `curl_easy_perform` blocks.
public final class CurlHTTPClient: UpstreamTransport {
    /// Limits applied to every request.
    public struct Configuration: Sendable {
        /// Time allowed to establish the TCP (and TLS) connection.
        public var connectTimeout: Duration
        /// Time allowed for the whole exchange, connection included.
        public var totalTimeout: Duration
        /// The largest response body accepted; more is an error, never a truncated answer, unless
        /// `bodyPastLimit` says the status is all the caller reads.
        public var maximumResponseBytes: Int
        /// What a body longer than `maximumResponseBytes` makes of the answer.
        public var bodyPastLimit: BodyPastLimit
        /// A transfer slower than this many bytes a second over `slowWindow` ends (timed out):
        /// long transfers (an object hashed, a part uploaded) need it beside the total timeout.
        public var minimumBytesPerSecond: Int?
        public var slowWindow: Duration

        public init(
            connectTimeout: Duration = .seconds(5), totalTimeout: Duration = .seconds(15), maximumResponseBytes: Int = 4 << 20,
            minimumBytesPerSecond: Int? = nil, slowWindow: Duration = .seconds(15), bodyPastLimit: BodyPastLimit = .refused
        ) {
            self.connectTimeout = connectTimeout
            self.totalTimeout = totalTimeout
            self.maximumResponseBytes = maximumResponseBytes
            self.bodyPastLimit = bodyPastLimit
            self.minimumBytesPerSecond = minimumBytesPerSecond
            self.slowWindow = slowWindow
        }

        /// A body past the limit: an error, or the answer as it stood with its body cut.
        public enum BodyPastLimit: Sendable, Equatable {
            /// `UpstreamError.responseTooLarge`: the answer is not read at all.
            case refused
            /// The status and headers stand, the body keeps its first `maximumResponseBytes`, and
            /// the transfer ends there: for a caller that reads only the status (a webhook
            /// receiver's 2xx is received whatever it writes after it).
            case cut
        }
    }

    public let configuration: Configuration
    private let threadPool: NIOThreadPool
    private let idleHandles = Mutex<[CurlEasyHandle]>([])

    /// A client running its transfers on `threadPool` (by default a process-wide pool of 64
    /// threads kept apart from file I/O, so slow upstreams cannot stall content streaming).
    public init(configuration: Configuration = .init(), threadPool: NIOThreadPool = CurlHTTPClient.sharedThreadPool) {
        self.configuration = configuration
        self.threadPool = threadPool
    }

    /// Upstream calls block a thread each for Apple's whole latency, so the pool bounds how many
    /// verifications run at once: 64 allow 1,280/s at 50 ms upstream latency. Idle threads cost
    /// little; a saturated pool queues calls rather than failing them.
    public static let sharedThreadPool: NIOThreadPool = {
        let pool = NIOThreadPool(numberOfThreads: 64)
        pool.start()
        return pool
    }()

    public func send(_ request: UpstreamRequest) async throws(UpstreamError) -> UpstreamResponse {
        let started = ContinuousClock.now
        // A stall-watched transfer has no total time (a slow reader may take hours); the other
        // ways a transfer ends stay (connect timeout, stall, the caller's stop).
        let total =
            request.stallTimeout != nil
            ? Duration.seconds(7 * 24 * 3600) : min(configuration.totalTimeout, request.timeout ?? configuration.totalTimeout)
        let deadline = started + total
        // The timeout holds from here, not from when a pool thread comes free: with every thread
        // busy (a slow upstream, a flood) a queued call ends at its deadline, and a transfer
        // that starts late gets only what is left. The timer fires a little after the deadline,
        // so that a transfer under way reports libcurl's own timeout.
        let answer = Answer()
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<UpstreamResponse, UpstreamError>, Never>) in
            answer.wait(continuation)
            if request.stallTimeout != nil {
                // A transfer that waits on a slow reader holds its thread for as long: a thread of
                // its own, so that it never holds one of the pool's (the number of them is bounded
                // by the caller, a download slot each).
                let thread = Thread { answer.give(self.perform(request, until: deadline)) }
                thread.stackSize = 512 << 10
                thread.start()
            } else {
                threadPool.submit { state in
                    guard state == .active else { return answer.give(.failure(.transport("the upstream thread pool is shut down"))) }
                    answer.give(self.perform(request, until: deadline))
                }
            }
            answer.arm(
                Task {
                    try? await Task.sleep(until: deadline + .milliseconds(200))
                    answer.give(.failure(Self.queuedPastDeadline))
                })
        }
        if let endpoint = request.endpoint {
            StockroomMetrics.upstreamCall(endpoint: endpoint, status: try? result.get().status, duration: ContinuousClock.now - started)
        }
        return try result.get()
    }

    /// The call's timeout passed before its transfer began (every pool thread busy), or before
    /// libcurl reported its own timeout.
    static let queuedPastDeadline = UpstreamError.timedOut(
        "no answer within the call's timeout (every upstream transfer thread busy, or the transfer stalled)")

    /// One call's answer, given once: by its transfer or by its deadline's timer, whichever
    /// comes first; the timer is cancelled then.
    private final class Answer: Sendable {
        typealias Continuation = CheckedContinuation<Result<UpstreamResponse, UpstreamError>, Never>
        private let state = Mutex<(continuation: Continuation?, timer: Task<Void, Never>?)>((nil, nil))

        func wait(_ continuation: Continuation) {
            state.withLock { $0.continuation = continuation }
        }

        /// Keeps the deadline's timer, or cancels it when the transfer answered already.
        func arm(_ timer: Task<Void, Never>) {
            let answered = state.withLock { state in
                if state.continuation == nil { return true }
                state.timer = timer
                return false
            }
            if answered { timer.cancel() }
        }

        func give(_ result: Result<UpstreamResponse, UpstreamError>) {
            let (continuation, timer) = state.withLock { state in
                defer { state = (nil, nil) }
                return (state.continuation, state.timer)
            }
            timer?.cancel()
            continuation?.resume(returning: result)
        }
    }

    /// Runs one transfer on the calling (pool) thread.
    private func perform(_ request: UpstreamRequest, until deadline: ContinuousClock.Instant) -> Result<UpstreamResponse, UpstreamError> {
        let timeout = deadline - ContinuousClock.now
        guard timeout > .milliseconds(1) else { return .failure(Self.queuedPastDeadline) }
        guard let handle = idleHandles.withLock({ $0.popLast() }) ?? CurlEasyHandle() else {
            return .failure(.transport("libcurl could not create a handle"))
        }
        defer {
            handle.reset()
            idleHandles.withLock { if $0.count < 32 { $0.append(handle) } }
        }
        let sink = ResponseSink(
            limit: configuration.maximumResponseBytes, forward: request.bodySink, handle: handle.raw, stallTimeout: request.stallTimeout)
        var headerList: UnsafeMutablePointer<curl_slist>?
        defer { curl_slist_free_all(headerList) }
        for (name, value) in request.headers {
            headerList = curl_slist_append(headerList, "\(name): \(value)")
        }
        if let signing = request.signing {
            // libcurl 7.88 signs a body's hash only when given it; without the header a store
            // refuses any request with a body (SignatureDoesNotMatch).
            let payload = request.method == .get || request.method == .head ? [] : request.body ?? []
            headerList = curl_slist_append(headerList, "x-amz-content-sha256: \(ByteEncoding.hex(SHA256.hash(payload)))")
            if let token = signing.credentials.sessionToken {
                headerList = curl_slist_append(headerList, "x-amz-security-token: \(token)")
            }
        }
        // curl sends "Expect: 100-continue" before larger bodies, costing a round trip. A signed
        // request keeps it: libcurl 7.88 signs the emptied header, which no store then matches.
        if request.signing == nil { headerList = curl_slist_append(headerList, "Expect:") }

        var errorBuffer = [CChar](repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
        let code: CURLcode = errorBuffer.withUnsafeMutableBytes { errorBytes in
            let sinkPointer = Unmanaged.passUnretained(sink).toOpaque()
            _ = handle.set(CURLOPT_URL, request.url)
            _ = handle.set(CURLOPT_NOSIGNAL, 1)
            _ = handle.set(CURLOPT_TIMEOUT_MS, Int(timeout.milliseconds))
            _ = handle.set(CURLOPT_CONNECTTIMEOUT_MS, Int(min(configuration.connectTimeout, timeout).milliseconds))
            _ = handle.set(CURLOPT_SSL_VERIFYPEER, 1)
            _ = handle.set(CURLOPT_SSL_VERIFYHOST, 2)
            _ = handle.set(CURLOPT_PROTOCOLS_STR, "http,https")
            _ = handle.set(CURLOPT_FOLLOWLOCATION, 0)
            _ = handle.set(CURLOPT_TCP_KEEPALIVE, 1)
            _ = handle.set(CURLOPT_USERAGENT, "Stockroom/1")
            if let local = request.localAddress { _ = handle.set(CURLOPT_INTERFACE, "host!\(local)") }
            _ = handle.set(CURLOPT_ERRORBUFFER, pointer: errorBytes.baseAddress)
            _ = handle.set(CURLOPT_HTTPHEADER, list: headerList)
            _ = stockroom_curl_setopt_write_function(handle.raw, ResponseSink.writeBody)
            _ = handle.set(CURLOPT_WRITEDATA, pointer: sinkPointer)
            _ = stockroom_curl_setopt_header_function(handle.raw, ResponseSink.writeHeader)
            _ = handle.set(CURLOPT_HEADERDATA, pointer: sinkPointer)
            if request.stallTimeout != nil {
                _ = handle.set(CURLOPT_NOPROGRESS, 0)
                _ = stockroom_curl_setopt_xferinfo_function(handle.raw, ResponseSink.watchStall)
                _ = handle.set(CURLOPT_XFERINFODATA, pointer: sinkPointer)
                _ = handle.set(CURLOPT_BUFFERSIZE, 1 << 20)
            } else if let minimum = configuration.minimumBytesPerSecond {
                _ = handle.set(CURLOPT_LOW_SPEED_LIMIT, minimum)
                _ = handle.set(CURLOPT_LOW_SPEED_TIME, max(1, Int(configuration.slowWindow.components.seconds)))
            }
            if let signing = request.signing {
                // libcurl signs the method, path, query, headers and payload hash, and adds
                // x-amz-date and x-amz-content-sha256; the secret never leaves this handle.
                _ = handle.set(CURLOPT_AWS_SIGV4, "aws:amz:\(signing.region):s3")
                _ = handle.set(CURLOPT_USERNAME, signing.credentials.accessKeyID)
                _ = handle.set(CURLOPT_PASSWORD, signing.credentials.secretAccessKey)
            }
            if request.method == .head {
                _ = handle.set(CURLOPT_NOBODY, 1)
                return withExtendedLifetime(sink) { handle.perform() }
            }
            if request.method == .get {
                _ = handle.set(CURLOPT_HTTPGET, 1)
                return withExtendedLifetime(sink) { handle.perform() }
            }
            if request.method != .post { _ = handle.set(CURLOPT_CUSTOMREQUEST, request.method.rawValue) }
            // Every other method sends its body, possibly empty, with a Content-Length. A NULL
            // POSTFIELDS would make libcurl read the body from a read callback instead.
            // POSTFIELDS is not copied: the bytes must outlive the (synchronous) perform.
            let body = request.body ?? []
            return (body.isEmpty ? [0] : body).withUnsafeBytes { bytes in
                _ = handle.set(CURLOPT_POSTFIELDSIZE, body.count)
                _ = handle.set(CURLOPT_POSTFIELDS, pointer: UnsafeMutableRawPointer(mutating: bytes.baseAddress))
                return withExtendedLifetime(sink) { handle.perform() }
            }
        }
        if code == CURLE_WRITE_ERROR, sink.exceeded, configuration.bodyPastLimit == .cut {
            return .success(
                UpstreamResponse(
                    status: handle.info(CURLINFO_RESPONSE_CODE), headers: sink.headers, body: sink.body,
                    newConnections: handle.info(CURLINFO_NUM_CONNECTS)))
        }
        guard code == CURLE_OK else {
            let message = String(decoding: errorBuffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            let detail = message.isEmpty ? String(validatingCString: curl_easy_strerror(code)) ?? "libcurl error \(code.rawValue)" : message
            return .failure(Self.error(for: code, detail: detail, sink: sink))
        }
        return .success(
            UpstreamResponse(
                status: handle.info(CURLINFO_RESPONSE_CODE), headers: sink.headers, body: sink.body,
                newConnections: handle.info(CURLINFO_NUM_CONNECTS)))
    }

    private static func error(for code: CURLcode, detail: String, sink: ResponseSink) -> UpstreamError {
        switch code {
        case CURLE_WRITE_ERROR where sink.exceeded: .responseTooLarge(limit: sink.limit)
        case CURLE_OPERATION_TIMEDOUT: .timedOut(detail)
        case CURLE_ABORTED_BY_CALLBACK where sink.stalled:
            .timedOut("no byte arrived for \(sink.stallTimeout.map { "\($0)" } ?? "a while")")
        case CURLE_COULDNT_CONNECT, CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY: .connectionFailed(detail)
        case CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CACERT_BADFILE, CURLE_SSL_CERTPROBLEM:
            .tls(detail)
        case CURLE_URL_MALFORMAT, CURLE_UNSUPPORTED_PROTOCOL: .invalidRequest(detail)
        default: .transport(detail)
        }
    }
}

/// Collects one response's headers and body for the C callbacks, refusing more than `limit` bytes,
/// or hands a 2xx body on to `forward` as it arrives.
private final class ResponseSink {
    let limit: Int
    let forward: (@Sendable (ResponseStart, UnsafeRawBufferPointer) -> Bool)?
    let handle: UnsafeMutableRawPointer
    let stallTimeout: Duration?
    var body: [UInt8] = []
    var headers: [String: String] = [:]
    var exceeded = false
    /// The status and headers, read at the body's first byte; nil until then.
    var start: ResponseStart?
    /// When a byte last arrived, or the sink last stopped waiting.
    var lastProgress = ContinuousClock.now
    var stalled = false

    init(
        limit: Int, forward: (@Sendable (ResponseStart, UnsafeRawBufferPointer) -> Bool)? = nil, handle: UnsafeMutableRawPointer,
        stallTimeout: Duration?
    ) {
        self.limit = limit
        self.forward = forward
        self.handle = handle
        self.stallTimeout = stallTimeout
    }

    static let writeBody: curl_write_callback = { data, size, count, context in
        let sink = Unmanaged<ResponseSink>.fromOpaque(context!).takeUnretainedValue()
        let length = size * count
        if let forward = sink.forward {
            let start =
                sink.start
                ?? {
                    var status = 0
                    _ = stockroom_curl_getinfo_long(sink.handle, CURLINFO_RESPONSE_CODE, &status)
                    let start = ResponseStart(status: status, headers: sink.headers)
                    sink.start = start
                    return start
                }()
            if (200..<300).contains(start.status) {
                let accepted = forward(start, UnsafeRawBufferPointer(start: data, count: length))
                sink.lastProgress = .now  // the time the sink waited is not the store's stall
                return accepted ? length : 0
            }
        }
        guard sink.body.count + length <= sink.limit else {
            sink.exceeded = true
            return 0  // anything but `length` makes curl stop with CURLE_WRITE_ERROR
        }
        if let data, length > 0 {
            sink.body.append(contentsOf: UnsafeRawBufferPointer(start: data, count: length))
        }
        sink.lastProgress = .now
        return length
    }

    /// libcurl's progress callback: ends a stall-watched transfer when no byte came for its timeout.
    static let watchStall: curl_xferinfo_callback = { context, _, _, _, _ in
        let sink = Unmanaged<ResponseSink>.fromOpaque(context!).takeUnretainedValue()
        guard let timeout = sink.stallTimeout, ContinuousClock.now - sink.lastProgress > timeout else { return 0 }
        sink.stalled = true
        return 1
    }

    static let writeHeader: curl_write_callback = { data, size, count, context in
        let sink = Unmanaged<ResponseSink>.fromOpaque(context!).takeUnretainedValue()
        let length = size * count
        guard let data else { return length }
        // Read as bytes: a header line is ASCII up to its value, and this runs for every line
        // of every answer.
        let line = UnsafeRawBufferPointer(start: data, count: length)
        if line.starts(with: "HTTP/".utf8) {
            sink.headers = [:]  // a new status line (after a 100 Continue) starts over
        } else if let colon = line.firstIndex(of: UInt8(ascii: ":")) {
            let name = String(decoding: line[..<colon].map { $0 >= 65 && $0 <= 90 ? $0 + 32 : $0 }, as: UTF8.self)
            let isBlank = { (byte: UInt8) in byte == 0x20 || byte == 0x09 || byte == 0x0D || byte == 0x0A }
            let rest = line[(colon + 1)...]
            let start = rest.firstIndex { !isBlank($0) } ?? rest.endIndex
            let end = rest.lastIndex { !isBlank($0) }.map { $0 + 1 } ?? start
            sink.headers[name] = String(decoding: line[start..<max(start, end)], as: UTF8.self)
        }
        return length
    }
}

extension Duration {
    /// Whole milliseconds, at least 1 (libcurl reads 0 as "no timeout"), at most `Int64.max`.
    var milliseconds: Int64 {
        let (whole, overflow) = components.seconds.multipliedReportingOverflow(by: 1000)
        let (sum, overflow2) = whole.addingReportingOverflow(components.attoseconds / 1_000_000_000_000_000)
        return overflow || overflow2 ? (components.seconds < 0 ? 1 : Int64.max) : max(1, sum)
    }
}
