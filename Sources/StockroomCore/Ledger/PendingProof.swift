import Foundation

/// A proof of purchase kept while the App Store could not be asked: apart from entitlements.
///
/// A pending proof never authorises a download and never decides a product: the product a
/// request asked for is kept only so an operator can see it. `stockroom refulfil --pending`
/// verifies each one; a valid one becomes an entitlement from Apple's answer, an invalid one is
/// marked rejected. At most `PendingProof.perTransaction` proofs (of any status) are kept per
/// transaction ID, and `PendingProofBounds` caps them per client and in total.
public struct PendingProof: Sendable, Equatable, Codable {
    /// The bound on proofs kept under one transaction ID, whatever their status; past it, new ones are not kept.
    public static let perTransaction = 4

    public var id: Int64?
    /// The transaction ID the request named or the proof claims (unverified).
    public var transactionID: String
    public var proofDigest: String
    public var proofKind: Fulfilment.ProofKind
    public var proof: String
    /// What the request asked for; informational only.
    public var requestedProductID: String
    public var appAccountToken: String?
    /// The address of the client that sent it, for the per-client bound; nil on rows kept before schema v7.
    public var client: String?
    public var status: Status
    public var lastError: String?
    public var createdAt: Date
    public var updatedAt: Date

    /// Where a pending proof stands.
    public enum Status: String, Sendable, Codable, CaseIterable {
        /// Waiting for the App Store.
        case pending
        /// The App Store refused it.
        case rejected
    }

    public init(
        id: Int64?, transactionID: String, proofDigest: String, proofKind: Fulfilment.ProofKind, proof: String, requestedProductID: String,
        appAccountToken: String?, client: String?, status: Status, lastError: String?, createdAt: Date, updatedAt: Date
    ) {
        self.id = id
        self.transactionID = transactionID
        self.proofDigest = proofDigest
        self.proofKind = proofKind
        self.proof = proof
        self.requestedProductID = requestedProductID
        self.appAccountToken = appAccountToken
        self.client = client
        self.status = status
        self.lastError = lastError
        self.createdAt = createdAt
        self.updatedAt = updatedAt
    }

    /// A proof kept now, pending.
    public init(_ draft: PendingProofDraft, now: Date) {
        self.init(
            id: nil, transactionID: draft.transactionID, proofDigest: draft.digest, proofKind: draft.kind, proof: draft.proof,
            requestedProductID: draft.requestedProductID, appAccountToken: draft.appAccountToken, client: draft.client, status: .pending,
            lastError: draft.error, createdAt: now, updatedAt: now)
    }

    public enum CodingKeys: String, CodingKey, CaseIterable {
        case id, transactionID = "transaction_id", proofDigest = "proof_digest", proofKind = "proof_kind", proof
        case requestedProductID = "requested_product_id", appAccountToken = "app_account_token", status
        case lastError = "last_error", createdAt = "created_at", updatedAt = "updated_at", client
    }
}
