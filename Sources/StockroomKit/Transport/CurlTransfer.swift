#if os(Linux) && (arch(x86_64) || arch(arm64))
    import Foundation
    #if canImport(FoundationNetworking)
        import FoundationNetworking
    #endif

    /// One transfer on libcurl, on a thread of its own: what `HTTPTransport` uses on Linux.
    ///
    /// URLSession on Linux hands its delegate the body in 16 KiB `Data` pieces through an operation
    /// queue, and it cannot pause a receive: a disk slower than the network piles the body up in
    /// memory. Here libcurl's write callback writes each piece (up to 512 KiB) straight from its own
    /// buffer, and libcurl reads no more from the socket until the callback returned, so memory
    /// stays at one buffer whatever the file's size.
    final class CurlTransfer: @unchecked Sendable {
        private let request: URLRequest
        private let settings: TransportSettings
        private let decide: @Sendable (HTTPURLResponse) -> BodyDisposition
        private let lock = NSLock()
        private var cancelled = false  // guarded by `lock`; the rest is touched by the transfer's thread only
        private var head = ResponseHead()
        private var response: HTTPURLResponse?
        private var disposition: BodyDisposition?
        /// Bytes read and dropped (`.discard`).
        private var discarded: Int64 = 0
        private var body = Data()
        private var failure: (any Error)?
        private var stopped = false
        private var timedOut = false
        private var pace: TransferPace

        init(_ request: URLRequest, settings: TransportSettings, decide: @escaping @Sendable (HTTPURLResponse) -> BodyDisposition) {
            self.request = request
            self.settings = settings
            self.decide = decide
            pace = TransferPace(
                timeout: settings.timeout, minimumBytesPerSecond: settings.minimumBytesPerSecond, now: ProcessInfo.processInfo.systemUptime)
        }

        /// Stops the transfer at libcurl's next callback (at least once a second).
        func cancel() { lock.withLock { cancelled = true } }

        private var isCancelled: Bool { lock.withLock { cancelled } }

        /// Runs the transfer on `easy` (blocking this thread) and tells how it ended.
        func run(on easy: FoundationCurlHandle) -> TransferResult {
            if isCancelled { return TransferResult(error: URLError(.cancelled)) }
            guard let url = request.url?.absoluteString, configure(easy, url: url) else {
                return TransferResult(error: URLError(.unsupportedURL))
            }
            let context = Unmanaged.passUnretained(self).toOpaque()
            easy.set(.writeData, pointer: context)
            easy.set(.headerData, pointer: context)
            easy.set(.progressData, pointer: context)
            let code = withExtendedLifetime(self) { easy.perform() }
            if head.isOversized { failure = failure ?? URLError(.badServerResponse) }
            if disposition == nil, let response = currentResponse() {
                // No body at all (a 304, an empty 200): decide anyway, so an empty file is created.
                disposition = decide(response)
                switch disposition {
                case .stop: stopped = true
                case .fail(let error): failure = failure ?? error  // refused by its head alone
                default: break
                }
            }
            var result = TransferResult(response: response, body: body)
            if stopped {
                result.stopped = true
            } else if let failure {
                result.error = failure
            } else if timedOut {
                result.error = URLError(.timedOut)
            } else if code != LibCurl.Result.ok.rawValue {
                result.error = Self.error(code, cancelled: isCancelled)
            }
            if case .file(let file) = disposition {
                do { try file.end() } catch { result.error = result.error ?? error }
            }
            return result
        }

        private func configure(_ easy: FoundationCurlHandle, url: String) -> Bool {
            guard url.hasPrefix("http://") || url.hasPrefix("https://"), easy.set(.url, url) else { return false }
            easy.set(.noSignal, 1)
            easy.set(.bufferSize, 512 << 10)
            easy.set(.userAgent, "StockroomKit")
            easy.set(.followLocation, 0)  // a redirect is the answer, never followed
            easy.set(.protocols, 3)  // CURLPROTO_HTTP | CURLPROTO_HTTPS
            if let authorities = settings.trust.certificateAuthorities {
                // Instead of the system's: the built-in folder (Debian's /etc/ssl/certs) goes too,
                // else any CA in it still passes (curl --cacert alone keeps it as well).
                guard easy.set(.caInfo, authorities.path), easy.set(.caPath, pointer: nil) else { return false }
            }
            if let pins = settings.trust.curlPins {
                guard easy.set(.pinnedPublicKey, pins) else { return false }  // fails closed where libcurl cannot pin
            }
            // The longest wait for a byte: for connecting here, and after that `TransferPace` in
            // `onProgress` (libcurl's low-speed limit averages over several seconds).
            easy.set(.connectTimeoutMilliseconds, max(1, Int((settings.timeout * 1000).rounded(.up))))
            easy.set(.writeFunction, pointer: unsafeBitCast(Self.onBody, to: UnsafeRawPointer.self))
            easy.set(.headerFunction, pointer: unsafeBitCast(Self.onHeader, to: UnsafeRawPointer.self))
            easy.set(.progressFunction, pointer: unsafeBitCast(Self.onProgress, to: UnsafeRawPointer.self))
            easy.set(.noProgress, 0)
            let method = request.httpMethod ?? "GET"
            let payload = request.httpBody ?? Data()
            switch method {
            case "GET": easy.set(.httpGet, 1)
            case "POST": easy.set(.post, 1)
            default: easy.set(.customRequest, method)
            }
            if method != "GET" {
                easy.set(.postFieldSize, payload.count)
                // Copied by libcurl; an empty body is sent as such.
                payload.withUnsafeBytes { bytes in
                    let empty: StaticString = ""
                    easy.set(.copyPostFields, pointer: bytes.baseAddress ?? UnsafeRawPointer(empty.utf8Start))
                }
            }
            // No `Expect: 100-continue` round trip before a large receipt.
            let fields = (request.allHTTPHeaderFields ?? [:]).map { "\($0.key): \($0.value)" }
            easy.setHeaders(fields + ["Expect:"])
            return true
        }

        // MARK: libcurl's callbacks (on the transfer's thread)

        private static let onHeader: LibCurl.WriteCallback = { buffer, size, count, context in
            guard let buffer, let context else { return 0 }
            let transfer = Unmanaged<CurlTransfer>.fromOpaque(context).takeUnretainedValue()
            let length = size * count
            let line = String(decoding: UnsafeRawBufferPointer(start: buffer, count: length), as: UTF8.self)
            transfer.header(line.trimmingCharacters(in: .whitespacesAndNewlines))
            return length
        }

        private func header(_ line: String) {
            let now = ProcessInfo.processInfo.systemUptime
            switch head.read(line) {
            case .began: pace.headBegan(now: now)
            case .ended: pace.headEnded(received: 0, now: now)
            case .none: break
            }
        }

        private func currentResponse() -> HTTPURLResponse? {
            if let response { return response }
            guard head.isComplete, !head.isOversized, let url = request.url else { return nil }
            response = HTTPURLResponse(url: url, statusCode: head.status, httpVersion: "HTTP/1.1", headerFields: head.mergedFields)
            return response
        }

        private static let onBody: LibCurl.WriteCallback = { buffer, size, count, context in
            guard let buffer, let context else { return 0 }
            let transfer = Unmanaged<CurlTransfer>.fromOpaque(context).takeUnretainedValue()
            let length = size * count
            return transfer.received(UnsafeRawBufferPointer(start: buffer, count: length)) ? length : 0
        }

        /// A piece of the body; false stops the transfer.
        private func received(_ bytes: UnsafeRawBufferPointer) -> Bool {
            if isCancelled { return false }
            if disposition == nil {
                guard let response = currentResponse() else {
                    failure = URLError(.badServerResponse)  // no complete head, or one of too many fields
                    return false
                }
                disposition = decide(response)
            }
            switch disposition {
            case .file(let file):
                do {
                    try file.append(bytes)
                } catch {
                    failure = error
                    return false
                }
            case .memory(let limit):
                guard body.count + bytes.count <= limit else {
                    failure = URLError(.dataLengthExceedsMaximum)
                    return false
                }
                body.append(contentsOf: bytes)
            case .discard(let limit):
                discarded += Int64(bytes.count)
                guard discarded <= limit else {
                    failure = URLError(.dataLengthExceedsMaximum)
                    return false
                }
            case .stop:
                stopped = true
                return false
            case .fail(let error):
                failure = error
                return false
            case nil:
                return false
            }
            return true
        }

        /// Called at least once a second: false stops the transfer.
        private static let onProgress: LibCurl.ProgressCallback = { context, _, received, _, sent in
            guard let context else { return 1 }
            return Unmanaged<CurlTransfer>.fromOpaque(context).takeUnretainedValue().proceeds(sent: sent, received: received) ? 0 : 1
        }

        /// Whether to go on: not cancelled, and within `TransferPace`'s deadlines.
        private func proceeds(sent: Int64, received: Int64) -> Bool {
            if isCancelled { return false }
            guard pace.check(sent: sent, received: received, now: ProcessInfo.processInfo.systemUptime) == .proceed else {
                timedOut = true
                return false
            }
            return true
        }

        /// libcurl's result as the `URLError` URLSession would have given.
        static func error(_ code: Int32, cancelled: Bool) -> URLError {
            if cancelled { return URLError(.cancelled) }
            switch LibCurl.Result(rawValue: code) {
            case .couldNotResolveHost: return URLError(.cannotFindHost)
            case .couldNotConnect: return URLError(.cannotConnectToHost)
            case .timedOut: return URLError(.timedOut)
            case .peerCertificate, .pinnedPublicKeyMismatch: return URLError(.serverCertificateUntrusted)
            case .sslConnect, .certificateAuthorityFile: return URLError(.secureConnectionFailed)
            case .partialFile, .gotNothing, .sendError, .receiveError: return URLError(.networkConnectionLost)
            case .abortedByCallback: return URLError(.cancelled)
            default: return URLError(.unknown)
            }
        }
    }
#endif

#if os(Linux) && (arch(x86_64) || arch(arm64))
    /// libcurl handles kept between transfers, so their connections stay alive; each transfer runs on
    /// a thread of its own, since `curl_easy_perform` blocks until the transfer ends.
    final class CurlHandles: @unchecked Sendable {
        private let lock = NSLock()
        private var idle: [FoundationCurlHandle] = []
        private var active: [ObjectIdentifier: CurlTransfer] = [:]
        private var invalidated = false
        private let keep = 4

        func send(_ transfer: CurlTransfer) async -> TransferResult {
            await withTaskCancellationHandler {
                await withCheckedContinuation { (continuation: CheckedContinuation<TransferResult, Never>) in
                    let thread = Thread { [self] in
                        let key = ObjectIdentifier(transfer)
                        let ended = lock.withLock {
                            active[key] = transfer
                            return invalidated
                        }
                        if ended { transfer.cancel() }
                        let easy = take()
                        let result = easy.map { transfer.run(on: $0) } ?? TransferResult(error: URLError(.unknown))
                        lock.withLock { active[key] = nil }
                        if let easy { give(easy) }
                        continuation.resume(returning: result)
                    }
                    thread.name = "StockroomKit.CurlTransfer"
                    thread.start()
                }
            } onCancel: {
                transfer.cancel()
            }
        }

        /// Cancels every transfer under way, and any sent later.
        func cancelAll() {
            let running = lock.withLock {
                invalidated = true
                return Array(active.values)
            }
            for transfer in running { transfer.cancel() }
        }

        private func take() -> FoundationCurlHandle? {
            if let easy = lock.withLock({ idle.popLast() }) {
                easy.reset()
                return easy
            }
            return FoundationCurlHandle()
        }

        private func give(_ easy: FoundationCurlHandle) {
            lock.withLock {
                if idle.count < keep { idle.append(easy) }
            }
        }
    }
#endif
