import Foundation

/// A StoreKit 2 transaction, decoded from a verified JWS.
///
/// See https://developer.apple.com/documentation/appstoreserverapi/jwstransactiondecodedpayload
public struct SignedTransaction: SignedPayload, Equatable {
    public static let kind = "a transaction"

    public var transactionId: String
    public var originalTransactionId: String
    public var productId: String
    public var bundleId: String
    /// Milliseconds since 1970 (Apple may send fractions).
    public var purchaseDate: Int64
    public var type: String?
    public var environment: PayloadEnvironment
    public var revocationDate: Int64?
    /// 0: refunded for another reason, 1: for an issue in the app.
    public var revocationReason: Int?
    public var appAccountToken: String?
    public var signedDate: Int64
    /// When an auto-renewable or non-renewing subscription ends; milliseconds since 1970.
    public var expiresDate: Int64?
    /// Why it was revoked, on a revoked transaction.
    public var revocationType: RevocationType?
    /// The share refunded by a prorated refund, in thousandths of a percent (0…100000).
    /// See https://developer.apple.com/documentation/appstoreserverapi/revocationpercentage
    public var revocationPercentage: Int?
    /// The app download the purchase was made in (Apple's `appTransactionId`); nil when Apple
    /// did not sign one, or signed something that is not an ID.
    public var appTransactionId: String?

    enum CodingKeys: String, CodingKey {
        case transactionId, originalTransactionId, productId, bundleId, purchaseDate, type, environment
        case revocationDate, revocationReason, appAccountToken, signedDate, expiresDate, revocationType, revocationPercentage
        case appTransactionId
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
        environment = try container.decode(PayloadEnvironment.self, forKey: .environment)
        revocationDate = try container.decodeMilliseconds(.revocationDate)
        if let reason = try container.decodeIfPresent(Double.self, forKey: .revocationReason) {
            guard reason.isFinite, (0...1_000).contains(reason), let whole = Int(exactly: reason) else {
                throw DecodingError.dataCorruptedError(
                    forKey: .revocationReason, in: container, debugDescription: "revocationReason out of range")
            }
            revocationReason = whole
        }
        appAccountToken = try container.decodeIfPresent(String.self, forKey: .appAccountToken)
        signedDate = try milliseconds(.signedDate)
        expiresDate = try container.decodeMilliseconds(.expiresDate)
        revocationType = try? container.decodeIfPresent(RevocationType.self, forKey: .revocationType)
        if let percentage = try? container.decodeIfPresent(Double.self, forKey: .revocationPercentage), percentage.isFinite,
            (0...100_000).contains(percentage)
        {
            revocationPercentage = Int(exactly: percentage.rounded())
        }
        appTransactionId = try? container.appTransactionID(.appTransactionId)
    }

    /// Whether a subscription has ended at `now`; purchases without expiry never do.
    public func isExpired(at now: Date) -> Bool {
        guard let expiresDate else { return false }
        return expiresDate <= Milliseconds.of(now)
    }

    public var isRevoked: Bool { revocationDate != nil }

    public func mismatch(bundleID: String, environment: StoreEnvironment?) -> JWSFailure? {
        guard bundleId == bundleID else { return .wrongBundle(expected: bundleID, actual: bundleId) }
        if let environment, self.environment != PayloadEnvironment(environment) {
            return .wrongEnvironment(expected: environment, actual: self.environment.rawValue)
        }
        return nil
    }
}

/// Verifies StoreKit 2 signed transactions locally, then checks bundle and environment.
public struct SignedTransactionVerifier: Sendable {
    public let jws: JWSVerifier
    public let bundleID: String
    /// The environment transactions must come from; nil accepts Production and Sandbox.
    public let environment: StoreEnvironment?
    /// With `--accept-xcode`: verifies JWS of Xcode's shape (one self-signed certificate) locally.
    public var xcode: XcodeTransactionVerifier?
    /// Asks OCSP about the signing chain after verification (`verifyOnline`); nil never asks.
    public var revocation: OCSPRevocationChecker?

    /// `chains`: the verified chains kept for the next JWS (nil verifies every chain afresh).
    public init(
        root: Certificate, otherRoots: [Certificate] = [], bundleID: String, environment: StoreEnvironment?,
        chains: VerifiedChainCache? = VerifiedChainCache()
    ) {
        self.jws = JWSVerifier(root: root, otherRoots: otherRoots, chains: chains)
        self.bundleID = bundleID
        self.environment = environment
    }

    /// The one way in: `jws` verified (`JWSVerifier`: chain, signature, `signedDate`), decoded
    /// as `type`, and checked against this app's bundle and environment. With `xcode`, a
    /// transaction of Xcode's shape is verified locally instead. A payload whose numbers do not
    /// fit is `.malformed`, never a trap.
    public func verify<Payload: SignedPayload>(_ jws: String, as type: Payload.Type) -> Result<Verified<Payload>, JWSFailure> {
        if let xcode, let local = xcode.verify(jws, as: type, bundleID: bundleID) { return local }
        switch self.jws.verify(jws, as: type) {
        case .failure(let failure): return .failure(failure)
        case .success(let verified):
            if let mismatch = verified.payload.mismatch(bundleID: bundleID, environment: environment) { return .failure(mismatch) }
            return .success(verified)
        }
    }

    /// The transaction a JWS carries once its signature, chain, bundle and environment check out.
    public func verify(_ signedTransaction: String) -> Result<SignedTransaction, JWSFailure> {
        verify(signedTransaction, as: SignedTransaction.self).map(\.payload)
    }
}
