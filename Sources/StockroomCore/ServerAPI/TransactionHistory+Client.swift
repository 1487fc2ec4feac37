import Foundation

/// Get Transaction History v2 on the App Store Server API client:
/// `GET /inApps/v2/history/{transactionId}?revision=…`, production first and the sandbox on
/// 4040010, 429 with `Retry-After` and 5xx retried within the client's `RetryPolicy`.
///
/// See https://developer.apple.com/documentation/appstoreserverapi/get-transaction-history
/// and https://developer.apple.com/documentation/appstoreserverapi/revision
extension AppStoreServerAPIClient {
    /// The most pages a caller follows by default: an answer that says `hasMore` forever ends here.
    public static let historyPageBound = 25

    /// One page of the customer's history. With `environment` nil, production is asked first and
    /// the sandbox on 4040010; later pages pass the first page's environment and `revision`.
    public func transactionHistory(
        _ transactionID: String, revision: String?, environment: StoreEnvironment? = nil
    ) async -> Result<TransactionHistoryPage, TransactionHistoryFailure> {
        guard Self.isTransactionID(transactionID) else { return .failure(.notFound) }
        var query = "?sort=ASCENDING"
        if let revision {
            guard (1...1024).contains(revision.utf8.count),
                let encoded = revision.addingPercentEncoding(withAllowedCharacters: Self.revisionCharacters)
            else { return .failure(.unavailable(reason: "the App Store sent an unusable revision", retryAfter: policy.retryAfter)) }
            query += "&revision=\(encoded)"
        }
        var current = environment ?? .production
        return await policy.run { timeout in
            switch await exchange(
                .get, path: "/inApps/v2/history/\(transactionID)\(query)", environment: current, timeout: timeout, endpoint: "history")
            {
            case .answered(_, let body):
                guard let page = Self.page(body, environment: current) else {
                    return .answered(
                        .failure(.unavailable(reason: "the transaction history is not in Apple's shape", retryAfter: policy.retryAfter)))
                }
                return .answered(.success(page))
            case .notFound(let errorCode):
                guard errorCode == 4_040_010, environment == nil, current == .production else { return .answered(.failure(.notFound)) }
                current = .sandbox
                return .redirected(reason: "production does not know it (4040010); the sandbox was not reached in time")
            case .transient(let reason, let after):
                return .retry(reason: reason, after: after)
            case .credentialsRefused(let reason):
                return .answered(.failure(.unavailable(reason: reason, retryAfter: policy.retryAfter)))
            case .refused(let status, _, let reason):
                return .answered(
                    .failure(.unavailable(reason: "HTTP \(status) from the App Store Server API: \(reason)", retryAfter: policy.retryAfter))
                )
            }
        } givingUp: { attempts, lastFailure in
            .failure(
                .unavailable(
                    reason: "the transaction history did not answer usably after \(attempts) attempt(s): \(lastFailure)",
                    retryAfter: policy.retryAfter))
        }
    }

    /// Every page of the customer's history, at most `maximumPages` of them: more is a failure,
    /// never a partial answer, so a caller decides only on a whole history. `progress` hears
    /// each page's number and the transactions read so far.
    public func fullTransactionHistory(
        _ transactionID: String, maximumPages: Int = historyPageBound, progress: (Int, Int) -> Void = { _, _ in }
    ) async -> Result<TransactionHistory, TransactionHistoryFailure> {
        var signed: [String] = []
        var revision: String?
        var environment: StoreEnvironment?
        for page in 1...max(1, maximumPages) {
            switch await transactionHistory(transactionID, revision: revision, environment: environment) {
            case .failure(let failure): return .failure(failure)
            case .success(let answer):
                signed += answer.signedTransactions
                environment = answer.environment
                progress(page, signed.count)
                guard answer.hasMore else {
                    return .success(TransactionHistory(signedTransactions: signed, environment: answer.environment, pages: page))
                }
                guard let next = answer.revision, next != revision else {
                    return .failure(
                        .unavailable(reason: "the history says it has more but gives no new revision", retryAfter: policy.retryAfter))
                }
                revision = next
            }
        }
        return .failure(
            .unavailable(reason: "the history has more than \(maximumPages) pages; not followed further", retryAfter: policy.retryAfter))
    }

    /// RFC 3986 unreserved characters: everything else in a revision is percent-encoded.
    private static let revisionCharacters = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")

    /// A `HistoryResponse` read within bounds; nil when it is not one.
    private static func page(_ body: [UInt8], environment: StoreEnvironment) -> TransactionHistoryPage? {
        guard let answer = UpstreamJSON.decode(HistoryResponse.self, from: body),
            answer.signedTransactions.count <= TransactionHistoryPage.largestPage
        else { return nil }
        return TransactionHistoryPage(
            signedTransactions: answer.signedTransactions, hasMore: answer.hasMore ?? false, revision: answer.revision,
            bundleID: answer.bundleId, environment: environment)
    }
}
