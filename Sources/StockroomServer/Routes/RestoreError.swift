import Hummingbird
import StockroomCore
import StockroomEntitlement
import StockroomHTTP

/// Errors of `POST /v1/restores`, each with its status and stable code.
enum RestoreError: APIError {
    case badRequest(String)
    case refused(RestoreRefusal)
    case upstreamUnavailable(retryAfter: Duration)
    case rateLimited(retryAfter: Duration)

    var status: HTTPResponse.Status {
        switch self {
        case .badRequest: .badRequest
        case .refused(.proof(let refusal)): DownloadError.status(of: refusal)
        case .refused(.accountRequired), .refused(.accountNotBound): .forbidden
        case .refused(.unknownTransaction): .notFound
        case .refused(.notConfigured): .notImplemented
        case .upstreamUnavailable: .serviceUnavailable
        case .rateLimited: .tooManyRequests
        }
    }

    var code: String {
        switch self {
        case .badRequest: "bad_request"
        case .refused(.proof(let refusal)): refusal.code
        case .refused(.accountRequired): "account_required"
        case .refused(.accountNotBound): "account_not_bound"
        case .refused(.unknownTransaction): "unknown_transaction"
        case .refused(.notConfigured): "restores_not_configured"
        case .upstreamUnavailable: "upstream_unavailable"
        case .rateLimited: "rate_limited"
        }
    }

    var message: String {
        switch self {
        case .badRequest(let detail): detail
        case .refused(.proof(let refusal)): refusal.description
        case .refused(.accountRequired):
            "A transaction ID alone restores nothing: send the appAccountToken it was bought with, or a signedTransaction."
        case .refused(.accountNotBound(let id)): "Transaction \(id) is not bound to this appAccountToken; send a signedTransaction instead."
        case .refused(.unknownTransaction(let id)): "The App Store knows no transaction \(id)."
        case .refused(.notConfigured): "Restores need App Store Server API credentials, which this server has not been given."
        case .upstreamUnavailable: "The App Store could not be reached; nothing was restored. Retry later."
        case .rateLimited: "Too many requests that reach the App Store from this address. Retry later."
        }
    }

    var details: [String: String] {
        switch self {
        case .refused(.proof(.signedTransactionRejected)): ["kind": "receipt_rejected"]
        case .upstreamUnavailable(let retryAfter), .rateLimited(let retryAfter): ["retryAfter": String(Self.seconds(retryAfter))]
        default: [:]
        }
    }

    var headers: HTTPFields {
        switch self {
        case .upstreamUnavailable(let retryAfter), .rateLimited(let retryAfter): [.retryAfter: String(Self.seconds(retryAfter))]
        default: [:]
        }
    }

    /// Whole seconds, at least one.
    private static func seconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return max(1, seconds + (attoseconds > 0 ? 1 : 0))
    }
}
