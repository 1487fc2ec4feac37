import Hummingbird
import StockroomCore

/// Errors of the download routes, each with its status and stable code (DESIGN.md).
enum DownloadError: APIError {
    case badRequest(String)
    case signedTransactionRejected(JWSFailure)
    case transactionClaimed(String)
    case unknownProduct(String)
    case unknownTransaction(String)
    case receiptRejected(RejectionReason)
    case revoked(String)
    case upstreamUnavailable(retryAfter: Duration)
    case tokenMissing
    case tokenInvalid
    case tokenExpired
    case notVerified(FulfilmentState)
    case notDelivered(FulfilmentState)

    var status: HTTPResponse.Status {
        switch self {
        case .badRequest: .badRequest
        case .signedTransactionRejected: .forbidden
        case .transactionClaimed: .conflict
        case .unknownProduct, .unknownTransaction: .notFound
        case .receiptRejected, .revoked, .tokenInvalid, .notVerified: .forbidden
        case .upstreamUnavailable: .serviceUnavailable
        case .tokenMissing, .tokenExpired: .unauthorized
        case .notDelivered: .conflict
        }
    }

    var code: String {
        switch self {
        case .badRequest: "bad_request"
        case .signedTransactionRejected(let failure): failure.code
        case .transactionClaimed: "transaction_claimed"
        case .unknownProduct: "unknown_product"
        case .unknownTransaction: "unknown_transaction"
        case .receiptRejected(let reason): reason.code
        case .revoked: "revoked"
        case .upstreamUnavailable: "upstream_unavailable"
        case .tokenMissing: "token_missing"
        case .tokenInvalid: "token_invalid"
        case .tokenExpired: "token_expired"
        case .notVerified: "transaction_not_verified"
        case .notDelivered: "not_delivered"
        }
    }

    var message: String {
        switch self {
        case .badRequest(let detail): detail
        case .signedTransactionRejected(let failure): "The signed transaction was rejected: \(failure)."
        case .transactionClaimed(let id): "Transaction \(id) belongs to another app account."
        case .unknownProduct(let id): "No product \"\(id)\" in the catalogue."
        case .unknownTransaction(let id): "No transaction \(id) in the ledger."
        case .receiptRejected(let reason): "The receipt was rejected: \(reason)."
        case .revoked(let id): "Transaction \(id) was refunded or revoked."
        case .upstreamUnavailable: "The App Store could not be reached; the receipt is kept. Retry later."
        case .tokenMissing: "Send the download token from X-Download-Token as \"Authorization: Bearer <token>\"."
        case .tokenInvalid: "The download token is not valid for this transaction."
        case .tokenExpired: "The download token has expired; POST /v1/downloads again with the receipt."
        case .notVerified(let state): "The transaction is \(state.rawValue), not verified."
        case .notDelivered(let state): "The transaction is \(state.rawValue): the whole file has not been sent yet."
        }
    }

    var details: [String: String] {
        switch self {
        case .receiptRejected, .signedTransactionRejected: ["kind": "receipt_rejected"]
        case .upstreamUnavailable(let retryAfter): ["retryAfter": String(retryAfter.components.seconds)]
        default: [:]
        }
    }

    var headers: HTTPFields {
        switch self {
        case .upstreamUnavailable(let retryAfter): [.retryAfter: String(retryAfter.components.seconds)]
        case .tokenMissing, .tokenExpired: [.wwwAuthenticate: "Bearer"]
        default: [:]
        }
    }
}
