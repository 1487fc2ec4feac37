import Foundation

/// A StoreKit 2 transaction, decoded from a verified JWS.
///
/// See https://developer.apple.com/documentation/appstoreserverapi/jwstransactiondecodedpayload
public struct SignedTransaction: Sendable, Equatable, Decodable {
    public var transactionId: String
    public var originalTransactionId: String
    public var productId: String
    public var bundleId: String
    /// Milliseconds since 1970 (Apple may send fractions).
    public var purchaseDate: Int64
    public var type: String?
    public var environment: String
    public var revocationDate: Int64?
    /// 0: refunded for another reason, 1: for an issue in the app.
    public var revocationReason: Int?
    public var appAccountToken: String?
    public var signedDate: Int64
    /// When an auto-renewable or non-renewing subscription ends; milliseconds since 1970.
    public var expiresDate: Int64?
    /// `REFUND_FULL`, `REFUND_PRORATED` or `FAMILY_REVOKE`, on a revoked transaction.
    /// See https://developer.apple.com/documentation/appstoreserverapi/revocationtype
    public var revocationType: String?
    /// The share refunded by a prorated refund, in thousandths of a percent (0…100000).
    /// See https://developer.apple.com/documentation/appstoreserverapi/revocationpercentage
    public var revocationPercentage: Int?

    enum CodingKeys: String, CodingKey {
        case transactionId, originalTransactionId, productId, bundleId, purchaseDate, type, environment
        case revocationDate, revocationReason, appAccountToken, signedDate, expiresDate, revocationType, revocationPercentage
    }

    /// Every millisecond field is converted with checks: a non-finite, fractional-overflowing or
    /// out-of-range number (`1e30`) is a decoding error, never a trap.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        func milliseconds(_ key: CodingKeys) throws -> Int64 {
            guard let value = try container.decodeMilliseconds(key) else {
                throw DecodingError.valueNotFound(Int64.self, .init(codingPath: [key], debugDescription: "\(key.stringValue) is required"))
            }
            return value
        }
        transactionId = try container.decodeLenientString(.transactionId)
        originalTransactionId = (try? container.decodeLenientString(.originalTransactionId)) ?? transactionId
        productId = try container.decode(String.self, forKey: .productId)
        bundleId = try container.decode(String.self, forKey: .bundleId)
        purchaseDate = try milliseconds(.purchaseDate)
        type = try container.decodeIfPresent(String.self, forKey: .type)
        environment = try container.decode(String.self, forKey: .environment)
        revocationDate = try container.decodeMilliseconds(.revocationDate)
        if let reason = try container.decodeIfPresent(Double.self, forKey: .revocationReason) {
            guard reason.isFinite, (0...1_000).contains(reason), let whole = Int(exactly: reason) else {
                throw DecodingError.dataCorruptedError(forKey: .revocationReason, in: container, debugDescription: "revocationReason out of range")
            }
            revocationReason = whole
        }
        appAccountToken = try container.decodeIfPresent(String.self, forKey: .appAccountToken)
        signedDate = try milliseconds(.signedDate)
        expiresDate = try container.decodeMilliseconds(.expiresDate)
        revocationType = try? container.decodeIfPresent(String.self, forKey: .revocationType)
        if let percentage = try? container.decodeIfPresent(Double.self, forKey: .revocationPercentage), percentage.isFinite,
            (0...100_000).contains(percentage)
        {
            revocationPercentage = Int(exactly: percentage.rounded())
        }
    }

    /// Whether a subscription has ended at `now`; purchases without expiry never do.
    public func isExpired(at now: Date) -> Bool {
        guard let expiresDate else { return false }
        return expiresDate <= Milliseconds.of(now)
    }

    public var isRevoked: Bool { revocationDate != nil }
}

/// Verifies StoreKit 2 signed transactions locally, then checks bundle and environment.
public struct SignedTransactionVerifier: Sendable {
    public let jws: JWSVerifier
    public let bundleID: String
    /// The environment transactions must come from; nil accepts Production and Sandbox.
    public let environment: StoreEnvironment?
    /// With `--accept-xcode`: verifies JWS of Xcode's shape (one self-signed certificate) locally.
    public var xcode: XcodeTransactionVerifier?

    /// `chains`: the verified chains kept for the next JWS (nil verifies every chain afresh).
    public init(
        root: Certificate, otherRoots: [Certificate] = [], bundleID: String, environment: StoreEnvironment?,
        chains: VerifiedChainCache? = VerifiedChainCache()
    ) {
        self.jws = JWSVerifier(root: root, otherRoots: otherRoots, chains: chains)
        self.bundleID = bundleID
        self.environment = environment
    }

    /// The transaction a JWS carries once its signature, chain, bundle and environment check
    /// out; a payload whose numbers do not fit is `.malformed`, never a trap.
    public func verify(_ signedTransaction: String) -> Result<SignedTransaction, JWSFailure> {
        if let xcode, XcodeTransactionVerifier.isXcodeShaped(signedTransaction) { return xcode.verify(signedTransaction, bundleID: bundleID) }
        let payload: [UInt8]
        switch jws.verify(signedTransaction) {
        case .success(let bytes): payload = bytes
        case .failure(let failure): return .failure(failure)
        }
        guard JSONNesting.isShallow(payload), let transaction = try? JSONDecoder().decode(SignedTransaction.self, from: Data(payload)) else {
            return .failure(.malformed("the payload is not a transaction"))
        }
        guard transaction.bundleId == bundleID else { return .failure(.wrongBundle(expected: bundleID, actual: transaction.bundleId)) }
        if let environment, transaction.environment != environment.rawValue {
            return .failure(.wrongEnvironment(expected: environment, actual: transaction.environment))
        }
        return .success(transaction)
    }
}
