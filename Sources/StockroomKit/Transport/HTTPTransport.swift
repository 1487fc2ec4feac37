import Foundation
#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// What happens to a response's body, decided from its head when the first bytes arrive.
enum BodyDisposition: Sendable {
    /// Append the body to the file, hashing it as it goes.
    case file(BodyFile)
    /// Keep up to `limit` bytes in memory (JSON answers, error bodies).
    case memory(limit: Int)
    /// Read the body to its end and keep none of it, at most `limit` bytes (more fails the
    /// transfer): bytes the app holds already, sent again so that the server records them.
    case discard(limit: Int64)
    /// Stop the transfer: the head said all that was needed.
    case stop
    /// Stop the transfer: the body has nowhere to go.
    case fail(any Error)
}

/// How a transfer ended.
struct TransferResult: Sendable {
    var response: HTTPURLResponse?
    /// The body kept in memory (`.memory`); empty otherwise.
    var body = Data()
    /// A transport failure (a dropped connection, a timeout), or the file could not be written.
    var error: (any Error)?
    /// The client stopped the transfer on purpose after the head (`.stop`).
    var stopped = false
    /// Whether the body arrived whole.
    var complete: Bool { error == nil && !stopped && response != nil }
}

/// How long a transfer may take, and whom it trusts.
struct TransportSettings: Sendable {
    /// The longest wait for a byte, and for a whole head once it began; the window the minimum
    /// rate is measured over.
    var timeout: TimeInterval = 60
    /// The slowest body accepted, on average over each `timeout` window.
    var minimumBytesPerSecond: Int64 = 1024
    var trust = TLSTrust.system
    var maximumConnectionsPerHost = 6
}

/// Sends the requests of a `Delivery` or `CatalogClient`, each body streamed to disk piece by
/// piece, never whole in memory. On Apple platforms: URLSession with a data delegate, one session
/// for every transfer. On Linux: libcurl directly (`CurlTransfer`), where it loads.
///
/// It follows no redirect: a 3xx is the answer (`ServerOrigin` says where requests may go), so
/// a proof or a token never travels to a host it was not meant for, nor from `https` to `http`.
/// The one redirect the client follows, to an object store's content, `Delivery` follows itself
/// with a request of its own that carries no credential.
/// Every transfer keeps to `TransferPace`'s deadlines.
final class HTTPTransport: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    /// What carries the transfers.
    enum Engine: Sendable {
        /// libcurl on Linux where it loads, URLSession everywhere else.
        case automatic
        /// URLSession, also on Linux (the tests run the Apple platforms' path with it).
        case urlSession
    }

    private let lock = NSLock()
    private var transfers: [Int: Transfer] = [:]
    private var session: URLSession?
    private var paceTimer: (any DispatchSourceTimer)?
    let settings: TransportSettings
    #if os(Linux) && (arch(x86_64) || arch(arm64))
        private let curl: CurlHandles?
    #endif

    init(settings: TransportSettings = TransportSettings(), engine: Engine = .automatic) {
        self.settings = settings
        #if os(Linux) && (arch(x86_64) || arch(arm64))
            curl = engine == .automatic && LibCurl.shared != nil ? CurlHandles() : nil
        #endif
        super.init()
        #if os(Linux) && (arch(x86_64) || arch(arm64))
            if curl != nil { return }  // no URLSession (its thread, queue and multi handle) when unused
        #endif
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = settings.timeout
        configuration.httpMaximumConnectionsPerHost = settings.maximumConnectionsPerHost
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.httpShouldSetCookies = false
        let queue = OperationQueue()
        queue.maxConcurrentOperationCount = 1
        queue.name = "StockroomKit.HTTPTransport"
        session = URLSession(configuration: configuration, delegate: self, delegateQueue: queue)
        watchPace(on: queue)
    }

    /// URLSession tells nothing while a head arrives, and a body only piece by piece: each
    /// second, on the session's queue, every transfer's pace is checked, and one past its
    /// deadlines is cancelled. A weak reference: the watch ends with the transport.
    private func watchPace(on queue: OperationQueue) {
        let timer = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "StockroomKit.HTTPTransport.pace"))
        timer.schedule(deadline: .now() + 1, repeating: 1)
        timer.setEventHandler { [weak self, weak queue] in
            guard let self, let queue else { return timer.cancel() }
            queue.addOperation { self.checkPace() }
        }
        timer.resume()
        lock.withLock { paceTimer = timer }
    }

    /// On the session's queue.
    private func checkPace() {
        let now = ProcessInfo.processInfo.systemUptime
        for (identifier, transfer) in lock.withLock({ transfers }) where transfer.failure == nil {
            guard transfer.pace.check(sent: transfer.sent, received: transfer.received, now: now) != .proceed else { continue }
            transfer.failure = URLError(.timedOut)
            session?.getAllTasks { tasks in tasks.first { $0.taskIdentifier == identifier }?.cancel() }
        }
    }

    /// Whether libcurl carries the transfers.
    var usesLibCurl: Bool {
        #if os(Linux) && (arch(x86_64) || arch(arm64))
            curl != nil
        #else
            false
        #endif
    }

    /// Ends the session (it holds its delegate, this object, until invalidated) and cancels what
    /// is under way.
    func invalidate() {
        #if os(Linux) && (arch(x86_64) || arch(arm64))
            curl?.cancelAll()
        #endif
        lock.withLock { paceTimer }?.cancel()
        lock.withLock { session }?.invalidateAndCancel()
    }

    /// Sends `request`; `decide` picks what happens to the body once its head is known.
    func send(_ request: URLRequest, decide: @escaping @Sendable (HTTPURLResponse) -> BodyDisposition) async -> TransferResult {
        #if os(Linux) && (arch(x86_64) || arch(arm64))
            if let curl { return await curl.send(CurlTransfer(request, settings: settings, decide: decide)) }
        #endif
        guard let session = lock.withLock({ session }) else { return TransferResult(error: URLError(.cancelled)) }
        #if !canImport(Security)
            // Pins and an own authority are checked through Security's trust objects; without them
            // (URLSession on Linux, in the tests) a transfer that asks for them fails closed.
            if settings.trust.isCustom { return TransferResult(error: URLError(.secureConnectionFailed)) }
        #endif
        let task = session.dataTask(with: request)
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<TransferResult, Never>) in
                let pace = TransferPace(
                    timeout: settings.timeout, minimumBytesPerSecond: settings.minimumBytesPerSecond,
                    now: ProcessInfo.processInfo.systemUptime)
                lock.withLock { transfers[task.taskIdentifier] = Transfer(decide: decide, continuation: continuation, pace: pace) }
                task.resume()
            }
        } onCancel: {
            task.cancel()
        }
    }

    /// Sends `request` and keeps up to `limit` bytes of any answer in memory.
    func collect(_ request: URLRequest, limit: Int = 1 << 20) async -> TransferResult {
        await send(request) { _ in .memory(limit: limit) }
    }

    // MARK: URLSessionDataDelegate (on the session's serial queue)

    func urlSession(
        _ session: URLSession, task: URLSessionTask, didSendBodyData bytesSent: Int64, totalBytesSent: Int64,
        totalBytesExpectedToSend: Int64
    ) {
        lock.withLock { transfers[task.taskIdentifier] }?.sent = totalBytesSent
    }

    /// No redirect is followed: the 3xx itself is the answer.
    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse, newRequest request: URLRequest,
        completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        completionHandler(nil)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        guard let transfer = lock.withLock({ transfers[dataTask.taskIdentifier] }) else { return }
        if transfer.disposition == nil {
            guard let response = dataTask.response as? HTTPURLResponse else { return }
            transfer.disposition = transfer.decide(response)
            transfer.pace.headEnded(received: 0, now: ProcessInfo.processInfo.systemUptime)
        }
        transfer.received += Int64(data.count)
        if transfer.failure != nil { return }  // the pace's watch cancelled it
        switch transfer.disposition {
        case .file(let file):
            do {
                try data.withUnsafeBytes { try file.append($0) }
            } catch {
                transfer.failure = error
                dataTask.cancel()
            }
        case .memory(let limit):
            if transfer.body.count + data.count <= limit {
                transfer.body.append(data)
            } else {
                transfer.failure = URLError(.dataLengthExceedsMaximum)
                dataTask.cancel()
            }
        case .discard(let limit):
            if transfer.received > limit {
                transfer.failure = URLError(.dataLengthExceedsMaximum)
                dataTask.cancel()
            }
        case .stop:
            transfer.stopped = true
            dataTask.cancel()
        case .fail(let error):
            transfer.failure = error
            dataTask.cancel()
        case nil:
            break
        }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        guard let transfer = lock.withLock({ transfers.removeValue(forKey: task.taskIdentifier) }) else { return }
        let response = task.response as? HTTPURLResponse
        if transfer.disposition == nil, let response {
            // No body at all (a 304, an empty 200): decide anyway, so an empty file is created.
            transfer.disposition = transfer.decide(response)
            switch transfer.disposition {
            case .stop: transfer.stopped = true
            case .fail(let error): transfer.failure = transfer.failure ?? error  // refused by its head alone
            default: break
            }
        }
        var result = TransferResult(response: response, body: transfer.body)
        if transfer.stopped {
            result.stopped = true
        } else if let failure = transfer.failure ?? error {
            result.error = failure
        }
        if case .file(let file) = transfer.disposition {
            do { try file.end() } catch { result.error = result.error ?? error }
        }
        transfer.continuation.resume(returning: result)
    }

    /// One transfer's state; touched only on the session's serial queue.
    private final class Transfer {
        let decide: @Sendable (HTTPURLResponse) -> BodyDisposition
        let continuation: CheckedContinuation<TransferResult, Never>
        var disposition: BodyDisposition?
        var body = Data()
        var failure: (any Error)?
        var stopped = false
        var pace: TransferPace
        var sent: Int64 = 0
        var received: Int64 = 0

        init(
            decide: @escaping @Sendable (HTTPURLResponse) -> BodyDisposition, continuation: CheckedContinuation<TransferResult, Never>,
            pace: TransferPace
        ) {
            self.decide = decide
            self.continuation = continuation
            self.pace = pace
        }
    }
}
