/// What one App Store Server API call that changes Apple's state (Finish Transaction, Send
/// Consumption Information, Set App Account Token) came to. The caller, a durable queue, owns retries across
/// restarts; the client makes exactly one attempt.
///
/// See https://developer.apple.com/documentation/appstoreserverapi/finish-transaction and
/// https://developer.apple.com/documentation/appstoreserverapi/send-consumption-information
public enum ServerAPICallOutcome: Sendable, Equatable {
    /// Apple took it: HTTP 200 or 202.
    case accepted
    /// The environment does not know the transaction: 4040010 TransactionIdNotFoundError,
    /// 4040005 OriginalTransactionIdNotFoundError (or a bare 404). Retrying will not change that.
    case notFound
    /// Try again later: 429 (with its `Retry-After`, bounded to 0...3600 s, when given), 5xx,
    /// 401 (the credentials may be fixed), transport failures and timeouts.
    case retryLater(reason: String, after: Duration?)
    /// Any other 4xx: Apple refused this call as made; do not retry it unchanged.
    /// `errorCode` is Apple's numeric code when the body carried one.
    case refused(status: Int, errorCode: Int?, reason: String)
}

/// Why a read from the App Store Server API (Get Notification History) gave no answer.
public enum ServerAPIFailure: Error, Sendable, Equatable {
    /// Apple was unreachable, rate limited, failing or refused our token; the retries within
    /// the client's `RetryPolicy` are spent. `retryAfter` is Apple's `Retry-After` when it sent one.
    case unavailable(reason: String, retryAfter: Duration?)
    /// Apple refused the request itself (a 4xx other than 401/429), e.g. 4000012
    /// StartDateTooFarInPastError; asking again unchanged will not help.
    case refused(status: Int, errorCode: Int?, reason: String)
}
