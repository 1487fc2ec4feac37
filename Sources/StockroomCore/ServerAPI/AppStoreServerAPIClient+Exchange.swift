import Foundation

/// One exchange with the App Store Server API, sorted by what the caller should do next: the
/// one place a status of Apple's is read, for every call (look-ups, histories, the calls owed).
enum ServerAPIExchange: Sendable, Equatable {
    /// A 2xx, with its body.
    case answered(status: Int, body: [UInt8])
    /// 4040010 TransactionIdNotFoundError, or another 404 Apple does not call retryable.
    case notFound(errorCode: Int?)
    /// 429, 5xx, a retryable 404, transport failures and timeouts: another try soon may answer.
    case transient(reason: String, after: Duration?)
    /// Apple refused our credentials (401), or no token could be signed: no try answers until the
    /// key is fixed. A request in flight gives up at once; a durable queue tries again later.
    case credentialsRefused(reason: String)
    /// Any other 4xx.
    case refused(status: Int, errorCode: Int?, reason: String)
}

/// Why a request to the App Store Server API got no HTTP answer.
enum ServerAPISendFailure: Error {
    /// The bearer token could not be signed: nothing was sent.
    case token(CryptoError)
    case transport(UpstreamError)
}

extension AppStoreServerAPIClient {
    /// The time limit of one call that changes Apple's state; the durable queue retries later.
    public static let callTimeout: Duration = .seconds(10)

    /// Apple's 404 codes that mean "not yet, try again": AccountNotFoundRetryableError,
    /// AppNotFoundRetryableError, OriginalTransactionIdNotFoundRetryableError.
    ///
    /// See https://developer.apple.com/documentation/appstoreserverapi/error-codes
    static let retryableNotFoundCodes: Set<Int> = [4_040_002, 4_040_004, 4_040_006]

    /// One request to `path` (which starts with `/inApps/`) in `environment`, with the bearer
    /// token; never retried here. `endpoint` names it in metrics.
    func send(
        _ method: UpstreamRequest.Method, path: String, environment: StoreEnvironment, body: [UInt8]? = nil,
        timeout: Duration, endpoint: String
    ) async -> Result<UpstreamResponse, ServerAPISendFailure> {
        let base = environment == .production ? endpoints.production : endpoints.sandbox
        let token: String
        do {
            token = try bearerToken()
        } catch {
            return .failure(.token(error))
        }
        var headers: [(name: String, value: String)] = [("Authorization", "Bearer \(token)")]
        if body != nil { headers.append(("Content-Type", "application/json")) }
        do {
            return .success(
                try await transport.send(
                    UpstreamRequest(method: method, url: base + path, headers: headers, body: body, timeout: timeout, endpoint: endpoint)))
        } catch {
            return .failure(.transport(error))
        }
    }

    /// One `send`, sorted by what the caller should do next.
    func exchange(
        _ method: UpstreamRequest.Method, path: String, environment: StoreEnvironment, body: [UInt8]? = nil,
        timeout: Duration, endpoint: String
    ) async -> ServerAPIExchange {
        let response: UpstreamResponse
        switch await send(method, path: path, environment: environment, body: body, timeout: timeout, endpoint: endpoint) {
        case .success(let answer): response = answer
        case .failure(.token(let error)): return .credentialsRefused(reason: "the API token could not be signed: \(error)")
        case .failure(.transport(let error)): return .transient(reason: "\(error)", after: nil)
        }
        let (errorCode, message) = Self.appleError(in: response.body)
        switch response.status {
        case 200...299:
            return .answered(status: response.status, body: response.body)
        case 401:
            logger.error(
                "the App Store Server API refused our token; check the key, key ID and issuer ID",
                metadata: ["endpoint": "\(endpoint)", "reason": .string(AppleErrorBody.printable(message))])
            return .credentialsRefused(reason: "the App Store Server API refused the credentials (401)")
        case 404 where errorCode.map { Self.retryableNotFoundCodes.contains($0) } == true:
            return .transient(reason: "HTTP 404 with retryable error \(errorCode ?? 0)", after: nil)
        case 404:
            return .notFound(errorCode: errorCode)
        case 429:
            return .transient(reason: "rate limited (429)", after: RetryPolicy.wait(retryAfter: response.headers["retry-after"]))
        case 400...499:
            return .refused(
                status: response.status, errorCode: errorCode, reason: message ?? "HTTP \(response.status) from the App Store Server API")
        default:
            return .transient(reason: "HTTP \(response.status) from the App Store Server API", after: nil)
        }
    }

    /// Apple's `errorCode` and `errorMessage` in an error body, when it is one; the message is
    /// cut short, and a code that is no integer (1e30, 4.5, "x") is no code.
    static func appleError(in body: [UInt8]) -> (code: Int?, message: String?) {
        guard body.count <= 64 * 1024, let error = AppleErrorBody.of(body) else { return (nil, nil) }
        return (error.errorCode, error.errorMessage)
    }
}
