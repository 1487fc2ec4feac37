/// Why an entitlement decision said no. Each case has a stable `code`; the HTTP edge gives
/// each its status.
public enum Refusal: Error, Sendable, Equatable, CustomStringConvertible {
    /// Apple, or a check on Apple's answer, refused the receipt (bundle, product, transaction, …).
    case rejected(RejectionReason)
    /// The StoreKit 2 JWS does not verify, or is for another bundle.
    case signedTransactionRejected(JWSFailure)
    /// Refunded or revoked, by Apple or an operator.
    case revoked(transactionID: String)
    /// The purchase is bound to another app account, or the claim left its account out.
    case claimed(transactionID: String)
    /// The subscription's entitlement has ended.
    case expired(transactionID: String)
    /// A sandbox purchase, on a server that no longer accepts them (`--sandbox deny`).
    case sandboxNotAllowed(transactionID: String)
    case unknownTransaction(String)
    /// Not (or no longer) entitled: rejected on re-verification.
    case notEntitled(transactionID: String, state: FulfilmentState)
    /// Acknowledged before the whole file went out.
    case notDelivered(FulfilmentState)
    case tokenMissing
    case tokenInvalid
    case tokenExpired

    public var code: String {
        switch self {
        case .rejected(let reason): reason.code
        case .signedTransactionRejected(let failure): failure.code
        case .revoked: "revoked"
        case .claimed: "transaction_claimed"
        case .expired: "subscription_expired"
        case .sandboxNotAllowed: "sandbox_not_allowed"
        case .unknownTransaction: "unknown_transaction"
        case .notEntitled: "transaction_not_verified"
        case .notDelivered: "not_delivered"
        case .tokenMissing: "token_missing"
        case .tokenInvalid: "token_invalid"
        case .tokenExpired: "token_expired"
        }
    }

    public var description: String {
        switch self {
        case .rejected(let reason): "The receipt was rejected: \(reason)."
        case .signedTransactionRejected(let failure): "The signed transaction was rejected: \(failure)."
        case .revoked(let id): "Transaction \(id) was refunded or revoked."
        case .claimed(let id): "Transaction \(id) belongs to another app account, or the request did not name its account."
        case .expired(let id): "The subscription of transaction \(id) has expired."
        case .sandboxNotAllowed(let id): "Transaction \(id) is a sandbox purchase, which this server no longer accepts."
        case .unknownTransaction(let id): "No transaction \(id) in the ledger."
        case .notEntitled(let id, let state): "Transaction \(id) is \(state.rawValue), not verified."
        case .notDelivered(let state): "The transaction is \(state.rawValue): the whole file has not been sent yet."
        case .tokenMissing: "Send the download token from X-Download-Token as \"Authorization: Bearer <token>\"."
        case .tokenInvalid: "The download token is not valid for this transaction."
        case .tokenExpired: "The download token has expired; POST /v1/downloads again with the receipt."
        }
    }
}
