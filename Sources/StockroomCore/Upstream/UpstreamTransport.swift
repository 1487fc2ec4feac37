/// Sends one HTTP request upstream (to Apple, or the simulator) and returns the whole answer.
///
/// A protocol so verification can be tested against any transport; production uses libcurl.
public protocol UpstreamTransport: Sendable {
    func send(_ request: UpstreamRequest) async throws(UpstreamError) -> UpstreamResponse
}

/// An upstream request: small bodies only (receipts, JSON, object-store parts), sent whole. A GET
/// or HEAD sends no body; every other method sends `body` (empty when nil) with its `Content-Length`.
public struct UpstreamRequest: Sendable {
    public enum Method: String, Sendable { case get = "GET", head = "HEAD", post = "POST", put = "PUT", delete = "DELETE" }

    /// Signs the request with AWS Signature Version 4 for S3 (libcurl's `CURLOPT_AWS_SIGV4`), the
    /// session token sent as `x-amz-security-token`.
    public struct AWSSigning: Sendable {
        public var credentials: SigV4.Credentials
        public var region: String

        public init(credentials: SigV4.Credentials, region: String) {
            self.credentials = credentials
            self.region = region
        }
    }

    public var method: Method
    public var url: String
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]?
    /// A total time limit for this call, shorter than the transport's own; nil uses the transport's.
    public var timeout: Duration?
    /// The App Store endpoint it calls, for metrics (`verifyReceipt`, `transactions`, …); nil
    /// for calls that are not the App Store's (the simulator's control API, benchmarks).
    public var endpoint: String?
    /// How the request is signed, if it is (object storage).
    public var signing: AWSSigning?
    /// Where a 2xx body goes as it arrives, instead of into the answer, with the status and
    /// headers it came with: false stops the transfer. It may block (a bounded buffer full): the
    /// transfer waits, and the time it waits counts as neither stall nor slowness. Another
    /// status's body is kept in the answer, as without a sink.
    public var bodySink: (@Sendable (ResponseStart, UnsafeRawBufferPointer) -> Bool)?
    /// For a long transfer into a sink that may wait on a slow reader: no total timeout and no
    /// minimum rate; the transfer ends when no byte arrives for this long while the sink is not
    /// waiting. It runs on a thread of its own, not the pool's.
    public var stallTimeout: Duration?
    /// The address to connect from, nil for the system's choice: a load generator that stands
    /// for many clients spreads them over loopback addresses (127.0.0.2, 127.0.0.3, …), which the
    /// server's per-client limits count apart, without a weaker server configuration.
    public var localAddress: String?

    public init(
        method: Method, url: String, headers: [(name: String, value: String)] = [], body: [UInt8]? = nil,
        timeout: Duration? = nil, endpoint: String? = nil, signing: AWSSigning? = nil,
        bodySink: (@Sendable (ResponseStart, UnsafeRawBufferPointer) -> Bool)? = nil, stallTimeout: Duration? = nil,
        localAddress: String? = nil
    ) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.timeout = timeout
        self.endpoint = endpoint
        self.signing = signing
        self.bodySink = bodySink
        self.stallTimeout = stallTimeout
        self.localAddress = localAddress
    }
}

/// The status and headers a streamed body came with (header names lower-cased).
public struct ResponseStart: Sendable {
    public var status: Int
    public var headers: [String: String]
}

/// An upstream answer, whatever its status.
public struct UpstreamResponse: Sendable {
    public var status: Int
    /// Header names lower-cased; the last value wins.
    public var headers: [String: String]
    public var body: [UInt8]
    /// Connections opened for this exchange: 0 when a kept-alive one was reused.
    public var newConnections: Int

    public init(status: Int, headers: [String: String] = [:], body: [UInt8], newConnections: Int = 0) {
        self.status = status
        self.headers = headers
        self.body = body
        self.newConnections = newConnections
    }
}

/// Why no upstream answer came back. All of these are transient from the caller's view
/// except `invalidRequest`.
public enum UpstreamError: Error, Equatable, CustomStringConvertible {
    /// No connection could be made (refused, unreachable, name not resolved).
    case connectionFailed(String)
    /// The connect or total timeout ran out.
    case timedOut(String)
    /// The peer's certificate or the TLS handshake failed.
    case tls(String)
    /// The body grew past the configured cap.
    case responseTooLarge(limit: Int)
    /// The connection broke, or another transport failure.
    case transport(String)
    /// The request itself is unusable (a bad URL).
    case invalidRequest(String)

    public var description: String {
        switch self {
        case .connectionFailed(let detail): "could not connect upstream: \(detail)"
        case .timedOut(let detail): "upstream timed out: \(detail)"
        case .tls(let detail): "TLS failure upstream: \(detail)"
        case .responseTooLarge(let limit): "upstream response exceeded \(limit) bytes"
        case .transport(let detail): "upstream transport failure: \(detail)"
        case .invalidRequest(let detail): "invalid upstream request: \(detail)"
        }
    }
}
