import Foundation

/// What a verified proof of purchase says: the only thing the ledger makes an entitlement from.
///
/// It cannot be built from a request: its initialisers take a `VerifiedReceipt` (which only
/// verification makes) or verify a JWS themselves.
public struct VerifiedProof: Sendable, Equatable {
    public let transactionID: String
    public let originalTransactionID: String
    public let productID: String
    public let bundleID: String
    public let environment: StoreEnvironment
    /// When the entitlement ends (subscriptions); nil for purchases that do not expire.
    public private(set) var expiresAt: Date?
    /// Set when Apple reports the purchase refunded or revoked.
    public private(set) var revokedAt: Date?
    /// Apple's `revocationType` with a revocation (StoreKit 2).
    public private(set) var revocationType: RevocationType?
    /// The app account the proof itself binds the purchase to (StoreKit 2).
    public let appAccountToken: String?
    public let kind: Fulfilment.ProofKind
    /// The normalised proof, as kept in the ledger.
    public let proof: String
    public let digest: String

    /// Apple's answer for a receipt: the transaction the verification matched.
    public init?(receipt: VerifiedReceipt, proof: ReceiptProof) {
        guard let transaction = receipt.transaction else { return nil }
        self.init(transaction: transaction, environment: receipt.environment, bundleID: receipt.bundleID, proof: proof)
    }

    /// One transaction of an answer Apple gave for `proof` (a refund found in it, say).
    init(transaction: ReceiptTransaction, environment: StoreEnvironment, bundleID: String, proof: ReceiptProof) {
        transactionID = transaction.transactionID
        originalTransactionID = transaction.originalTransactionID
        productID = transaction.productID
        self.bundleID = bundleID
        self.environment = environment
        expiresAt = transaction.expiresDate.map(Self.date)
        revokedAt = transaction.cancellationDate.map(Self.date)
        appAccountToken = nil
        kind = .receipt
        self.proof = proof.text
        digest = proof.digest
    }

    /// Every field given: for the ledger's own tests (through `@testable`), never for requests.
    init(
        transactionID: String, originalTransactionID: String, productID: String, bundleID: String, environment: StoreEnvironment,
        expiresAt: Date?, revokedAt: Date?, appAccountToken: String?, kind: Fulfilment.ProofKind, proof: String
    ) {
        self.transactionID = transactionID
        self.originalTransactionID = originalTransactionID
        self.productID = productID
        self.bundleID = bundleID
        self.environment = environment
        self.expiresAt = expiresAt
        self.revokedAt = revokedAt
        self.appAccountToken = appAccountToken?.lowercased()
        self.kind = kind
        self.proof = proof
        digest = Self.digest(of: proof)
    }

    /// Verifies a StoreKit 2 JWS with `verifier` (root, bundle); the proof is the JWS itself.
    public static func verifying(_ jws: String, with verifier: SignedTransactionVerifier) -> Result<VerifiedProof, JWSFailure> {
        verifier.verify(trimmed(jws), as: SignedTransaction.self).flatMap(verifying)
    }

    /// The JWS without the ASCII white space a client may wrap it in. A JWS is ASCII, so nothing
    /// else can be trimmed; the text is returned as it is when there is none. (Foundation's
    /// `trimmingCharacters` copies it through `NSString`: a tenth of a warm download's time.)
    static func trimmed(_ jws: String) -> String {
        let bytes = jws.utf8
        let isSpace = { (byte: UInt8) in byte == 0x20 || (0x09...0x0D).contains(byte) }
        guard let first = bytes.first, let last = bytes.last, isSpace(first) || isSpace(last) else { return jws }
        guard let start = bytes.firstIndex(where: { !isSpace($0) }), let end = bytes.lastIndex(where: { !isSpace($0) }) else { return "" }
        return String(jws[start...end])
    }

    /// The proof a transaction that verified makes (a notification's, say): no second verification.
    public static func verifying(_ verified: Verified<SignedTransaction>) -> Result<VerifiedProof, JWSFailure> {
        let transaction = verified.payload
        guard let environment = transaction.environment.storeEnvironment else {
            return .failure(.malformed("unknown environment \"\(transaction.environment)\""))
        }
        return .success(VerifiedProof(signed: transaction, environment: environment, jws: verified.jws))
    }

    private init(signed transaction: SignedTransaction, environment: StoreEnvironment, jws: String) {
        transactionID = transaction.transactionId
        originalTransactionID = transaction.originalTransactionId
        productID = transaction.productId
        bundleID = transaction.bundleId
        self.environment = environment
        expiresAt = transaction.expiresDate.map(Self.date)
        revokedAt = transaction.revocationDate.map(Self.date)
        revocationType = transaction.revocationDate == nil ? nil : transaction.revocationType
        appAccountToken = transaction.appAccountToken?.lowercased()
        kind = .signedTransaction
        proof = jws
        digest = Self.digest(of: jws)
    }

    /// This proof, with what a newer verified view of the same transaction says about refunds
    /// and expiry (the App Store Server API's current transaction). A revocation either view
    /// shows stands: a view cached from before a refund never hides it.
    public func updated(by current: VerifiedProof) -> VerifiedProof {
        guard current.transactionID == transactionID, current.originalTransactionID == originalTransactionID else { return self }
        var copy = self
        copy.revokedAt = revokedAt ?? current.revokedAt
        copy.revocationType = revokedAt == nil ? current.revocationType : revocationType
        copy.expiresAt = current.expiresAt ?? expiresAt
        return copy
    }

    /// Under `--prorated-refund keep`: a prorated refund's revocation does not end the
    /// entitlement. Any other revocation stands.
    public func keepingProratedRefund() -> VerifiedProof {
        guard revokedAt != nil, revocationType == .refundProrated else { return self }
        var copy = self
        copy.revokedAt = nil
        return copy
    }

    /// The digest the ledger keys proofs by: hex SHA-256 of the normalised text.
    public static func digest(of text: String) -> String {
        ByteEncoding.hex(SHA256.hash(Array(text.utf8)))
    }

    /// A time in milliseconds since 1970, as Apple sends them.
    private static func date(_ milliseconds: Int64) -> Date {
        Date(timeIntervalSince1970: Double(milliseconds) / 1000)
    }
}
