import Foundation

/// Get Notification History: how Stockroom recovers notifications it missed.
extension AppStoreServerAPIClient {
    /// One page of `POST /inApps/v1/notifications/history[?paginationToken=…]` in
    /// `environment`. Transient failures (429 with `Retry-After`, 5xx, 401, transport errors, a
    /// malformed page) are retried within the client's `RetryPolicy`; a refusal is returned at
    /// once. The caller pages on `hasMore`, and stops after
    /// `NotificationHistoryPage.maximumPagesPerSync` pages whatever Apple says.
    ///
    /// See https://developer.apple.com/documentation/appstoreserverapi/get-notification-history
    public func notificationHistory(
        _ query: NotificationHistoryQuery, paginationToken: String?, environment: StoreEnvironment
    ) async -> Result<NotificationHistoryPage, ServerAPIFailure> {
        guard let body = query.body() else {
            return .failure(.refused(status: 400, errorCode: nil, reason: "the query's dates cannot be sent; no call made"))
        }
        if let transactionID = query.transactionID, !Self.isTransactionID(transactionID) {
            return .failure(.refused(status: 400, errorCode: nil, reason: "transactionId is not a transaction ID; no call made"))
        }
        var path = "/inApps/v1/notifications/history"
        if let paginationToken {
            guard let encoded = Self.queryValue(paginationToken) else {
                return .failure(.refused(status: 400, errorCode: nil, reason: "the pagination token is empty or too long; no call made"))
            }
            path += "?paginationToken=" + encoded
        }
        var lastRetryAfter: Duration?
        return await policy.run { timeout in
            switch await exchange(
                .post, path: path, environment: environment, body: body, timeout: timeout, endpoint: "notificationHistory")
            {
            case .answered(_, let answer):
                switch Self.page(from: answer, sentToken: paginationToken) {
                case .success(let page): return .answered(.success(page))
                case .failure(let problem): return .retry(reason: problem.reason)
                }
            case .notFound(let errorCode):
                return .answered(.failure(.refused(status: 404, errorCode: errorCode, reason: "HTTP 404 from Get Notification History")))
            case .refused(let status, let errorCode, let reason):
                return .answered(.failure(.refused(status: status, errorCode: errorCode, reason: reason)))
            case .transient(let reason, let after):
                lastRetryAfter = after
                return .retry(reason: reason, after: after)
            case .credentialsRefused(let reason):
                return .answered(.failure(.unavailable(reason: reason, retryAfter: nil)))
            }
        } givingUp: { attempts, lastFailure in
            .failure(
                .unavailable(
                    reason: "Get Notification History did not answer usably after \(attempts) attempt(s): \(lastFailure)",
                    retryAfter: lastRetryAfter))
        }
    }

    /// A page from Apple's `NotificationHistoryResponse`, or why it is none: every count and
    /// length bounded, and a `hasMore` without a fresh token refused, so paging must end.
    static func page(from body: [UInt8], sentToken: String?) -> Result<NotificationHistoryPage, MalformedPage> {
        guard let answer = UpstreamJSON.decode(NotificationHistoryResponse.self, from: body) else {
            return .failure(MalformedPage(reason: "the page is not Apple's NotificationHistoryResponse"))
        }
        let entries = answer.notificationHistory ?? []
        guard entries.count <= NotificationHistoryPage.maximumEntries else {
            return .failure(MalformedPage(reason: "the page holds \(entries.count) entries"))
        }
        var payloads: [String] = []
        for entry in entries {
            guard let payload = entry.signedPayload, !payload.isEmpty, payload.utf8.count <= NotificationHistoryPage.maximumPayloadBytes
            else { return .failure(MalformedPage(reason: "an entry has no usable signedPayload")) }
            payloads.append(payload)
        }
        let hasMore = answer.hasMore ?? false
        guard hasMore else { return .success(NotificationHistoryPage(signedPayloads: payloads, hasMore: false, paginationToken: nil)) }
        guard let token = answer.paginationToken, queryValue(token) != nil else {
            return .failure(MalformedPage(reason: "hasMore without a usable paginationToken"))
        }
        guard token != sentToken else { return .failure(MalformedPage(reason: "the paginationToken did not advance")) }
        return .success(NotificationHistoryPage(signedPayloads: payloads, hasMore: true, paginationToken: token))
    }

    /// RFC 3986's unreserved characters, ASCII only.
    static let unreserved = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")

    /// `text` percent-encoded for a query string; nil when empty or longer than Apple's tokens get.
    static func queryValue(_ text: String) -> String? {
        guard !text.isEmpty, text.utf8.count <= NotificationHistoryPage.maximumTokenBytes else { return nil }
        return text.addingPercentEncoding(withAllowedCharacters: unreserved)
    }
}

/// Why a 200 from Get Notification History is no usable page.
struct MalformedPage: Error, Equatable {
    var reason: String
}
