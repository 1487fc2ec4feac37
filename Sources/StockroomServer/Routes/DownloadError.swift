import Hummingbird
import StockroomCore
import StockroomHTTP

/// Errors of the download routes, each with its status and stable code (docs/contract.md).
enum DownloadError: APIError {
    case badRequest(String)
    case unknownProduct(String)
    /// The entitlement component said no.
    case refused(Refusal)
    case upstreamUnavailable(retryAfter: Duration)
    /// This client reached the App Store too often.
    case rateLimited(retryAfter: Duration)
    /// Too many downloads at once, in all or for this transaction.
    case busy(retryAfter: Duration)

    var status: HTTPResponse.Status {
        switch self {
        case .badRequest: .badRequest
        case .unknownProduct: .notFound
        case .refused(let refusal): Self.status(of: refusal)
        case .upstreamUnavailable: .serviceUnavailable
        case .rateLimited, .busy: .tooManyRequests
        }
    }

    static func status(of refusal: Refusal) -> HTTPResponse.Status {
        switch refusal {
        case .rejected, .signedTransactionRejected, .revoked, .expired, .sandboxNotAllowed, .notEntitled, .tokenInvalid: .forbidden
        case .claimed, .notDelivered: .conflict
        case .unknownTransaction: .notFound
        case .tokenMissing, .tokenExpired: .unauthorized
        }
    }

    var code: String {
        switch self {
        case .badRequest: "bad_request"
        case .unknownProduct: "unknown_product"
        case .refused(let refusal): refusal.code
        case .upstreamUnavailable: "upstream_unavailable"
        case .rateLimited: "rate_limited"
        case .busy: "too_many_downloads"
        }
    }

    var message: String {
        switch self {
        case .badRequest(let detail): detail
        case .unknownProduct(let id): "No product \"\(id)\" in the catalogue."
        case .refused(let refusal): refusal.description
        case .upstreamUnavailable:
            "The App Store (or, under --ocsp hard, its certificates' OCSP responder) could not be reached. Retry later."
        case .rateLimited: "Too many requests that reach the App Store from this address. Retry later."
        case .busy: "Too many downloads at once. Retry later."
        }
    }

    var details: [String: String] {
        switch self {
        case .refused(.rejected), .refused(.signedTransactionRejected): ["kind": "receipt_rejected"]
        case .upstreamUnavailable(let retryAfter), .rateLimited(let retryAfter), .busy(let retryAfter):
            ["retryAfter": String(Self.seconds(retryAfter))]
        default: [:]
        }
    }

    var headers: HTTPFields {
        switch self {
        case .upstreamUnavailable(let retryAfter), .rateLimited(let retryAfter), .busy(let retryAfter):
            [.retryAfter: String(Self.seconds(retryAfter))]
        case .refused(.tokenMissing), .refused(.tokenExpired): [.wwwAuthenticate: "Bearer"]
        default: [:]
        }
    }

    /// Whole seconds, at least one: `Retry-After: 0` would invite a retry storm.
    private static func seconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return max(1, seconds + (attoseconds > 0 ? 1 : 0))
    }
}

extension Result where Failure == Refusal {
    /// The value, or the refusal as the download routes' error.
    func orRefuse() throws(DownloadError) -> Success {
        switch self {
        case .success(let value): value
        case .failure(let refusal): throw .refused(refusal)
        }
    }
}
