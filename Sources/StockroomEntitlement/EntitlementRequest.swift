import StockroomCore

/// A download request, as the edge parsed it: every field is a claim until a proof says otherwise.
public struct EntitlementRequest: Sendable, Equatable {
    public var productID: String
    /// The transaction the request names; nil lets the proof say which.
    public var transactionID: String?
    /// The purchase's first transaction, as the app knows it: with a receipt that does not list
    /// `transactionID` (Apple: a restored transaction's ID "may not be the same" as the
    /// receipt's), the product's purchase in that chain is the one meant.
    public var originalTransactionID: String?
    public var proof: PresentedProof
    /// The app account the request names (StoreKit 2's `appAccountToken`).
    public var appAccountToken: String?
    /// The client's address, for the per-client limit on upstream calls.
    public var client: String
    /// The customer's consent to share consumption data with Apple (`consent`), when the app says.
    public var customerConsented: Bool?

    public init(
        productID: String, transactionID: String?, originalTransactionID: String? = nil, proof: PresentedProof, appAccountToken: String?,
        client: String,
        customerConsented: Bool? = nil
    ) {
        self.productID = productID
        self.transactionID = transactionID
        self.originalTransactionID = originalTransactionID
        self.proof = proof
        self.appAccountToken = appAccountToken?.lowercased()
        self.client = client
        self.customerConsented = customerConsented
    }
}

/// The proof of purchase a request carries, as sent.
public enum PresentedProof: Sendable, Equatable {
    /// Base64 of an app receipt or of an old-style transaction receipt.
    case receipt(String)
    /// A StoreKit 2 JWS.
    case signedTransaction(String)
}

/// What the entitlement component decided about a download request.
public enum EntitlementVerdict: Sendable, Equatable {
    /// Stream the product; the token authorises resumes.
    case entitled(Fulfilment, token: String)
    /// A stable refusal.
    case refused(Refusal)
    /// The App Store could not be asked and no verified record covers this proof; it is kept apart.
    case unavailable(retryAfter: Duration)
    /// This client asked the App Store too often; try again after the duration.
    case limited(retryAfter: Duration)
}

/// Admits or holds back requests that would reach the App Store, per client.
public protocol UpstreamGate: Sendable {
    /// nil admits the call; otherwise how long the client should wait.
    func admit(_ client: String) -> Duration?
}

/// The operator's settings the decisions follow.
public struct EntitlementPolicy: Sendable, Equatable {
    /// A proof on record verified more recently than this is served again without asking Apple.
    public var reverifyAfter: Duration
    /// Whether sandbox purchases are entitled (App Review buys in the sandbox).
    public var allowsSandbox: Bool
    /// What a prorated refund (`REFUND` with `revocationType` `REFUND_PRORATED`) does (`--prorated-refund`).
    public var proratedRefund: ProratedRefundPolicy
    /// How many unverified proofs an outage may leave in the ledger, and for how long rejected ones stay.
    public var pendingProofs: PendingProofBounds

    public init(
        reverifyAfter: Duration = .seconds(24 * 3600), allowsSandbox: Bool = true, proratedRefund: ProratedRefundPolicy = .revoke,
        pendingProofs: PendingProofBounds = PendingProofBounds()
    ) {
        self.reverifyAfter = reverifyAfter
        self.allowsSandbox = allowsSandbox
        self.proratedRefund = proratedRefund
        self.pendingProofs = pendingProofs
    }
}

/// What a prorated refund does to the content: Apple refunded part of the price.
public enum ProratedRefundPolicy: String, Sendable, Equatable, CaseIterable {
    /// Revoke it, as a full refund does (the default: the customer asked for money back).
    case revoke
    /// Keep it entitled; the notification is recorded.
    case keep
}
