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

/// Sends the requests of a `Delivery` or `CatalogClient`, each body streamed to disk piece by
/// piece, never whole in memory. On Apple platforms: URLSession with a data delegate, one session
/// for every transfer. On Linux: libcurl directly (`CurlTransfer`), where it loads.
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
    private let timeout: TimeInterval
    #if os(Linux) && (arch(x86_64) || arch(arm64))
    private let curl: CurlHandles?
    #endif

    init(configuration: URLSessionConfiguration = .ephemeral, engine: Engine = .automatic) {
        timeout = configuration.timeoutIntervalForRequest
        #if os(Linux) && (arch(x86_64) || arch(arm64))
        curl = engine == .automatic && LibCurl.shared != nil ? CurlHandles() : nil
        #endif
        super.init()
        #if os(Linux) && (arch(x86_64) || arch(arm64))
        if curl != nil { return }  // no URLSession (its thread, queue and multi handle) when unused
        #endif
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.httpShouldSetCookies = false
        let queue = OperationQueue()
        queue.maxConcurrentOperationCount = 1
        queue.name = "StockroomKit.HTTPTransport"
        session = URLSession(configuration: configuration, delegate: self, delegateQueue: queue)
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
        lock.withLock { session }?.invalidateAndCancel()
    }

    /// Sends `request`; `decide` picks what happens to the body once its head is known.
    func send(_ request: URLRequest, decide: @escaping @Sendable (HTTPURLResponse) -> BodyDisposition) async -> TransferResult {
        #if os(Linux) && (arch(x86_64) || arch(arm64))
        if let curl { return await curl.send(CurlTransfer(request, timeout: timeout, decide: decide)) }
        #endif
        guard let session = lock.withLock({ session }) else { return TransferResult(error: URLError(.cancelled)) }
        let task = session.dataTask(with: request)
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<TransferResult, Never>) in
                lock.withLock { transfers[task.taskIdentifier] = Transfer(decide: decide, continuation: continuation) }
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

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        guard let transfer = lock.withLock({ transfers[dataTask.taskIdentifier] }) else { return }
        if transfer.disposition == nil {
            guard let response = dataTask.response as? HTTPURLResponse else { return }
            transfer.disposition = transfer.decide(response)
        }
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
            if case .stop = transfer.disposition { transfer.stopped = true }
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

        init(decide: @escaping @Sendable (HTTPURLResponse) -> BodyDisposition, continuation: CheckedContinuation<TransferResult, Never>) {
            self.decide = decide
            self.continuation = continuation
        }
    }
}
