import Foundation

/// Verifies signed transactions from StoreKit Testing in Xcode, locally: an `x5c` of exactly
/// one self-signed certificate (the `.storekit` file's), ES256 over the input as received, and
/// a payload whose `environment` is `Xcode` and whose bundle is the app's. Nothing upstream
/// knows these transactions, so nothing upstream is asked.
///
/// Only for development (`--accept-xcode`): anyone can make such a certificate, so without a
/// pinned certificate (`--xcode-certificate`) this proves only that the JWS is well formed.
/// Accepted transactions are recorded as `Sandbox`, the ledger's non-production environment.
///
/// See https://developer.apple.com/documentation/storekit/appstore/environment/xcode
/// and https://developer.apple.com/documentation/xcode/setting-up-storekit-testing-in-xcode
public struct XcodeTransactionVerifier: Sendable {
    /// The StoreKit Test certificate exported from Xcode (Editor ▸ Save Public Certificate); nil
    /// accepts any self-signed one.
    public let pinned: Certificate?
    /// The one verifier, under Xcode's chain policy.
    private let jws: JWSVerifier

    public init(pinned: Certificate?) {
        self.pinned = pinned
        self.jws = JWSVerifier(policy: .xcode(pinned: pinned))
    }

    /// Whether `jws` has Xcode's shape (a header whose `x5c` holds one certificate): only such
    /// JWS are verified here; every other one goes through the App Store chain.
    public static func isXcodeShaped(_ jws: String) -> Bool {
        guard let header = jws.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false).first,
            header.utf8.count <= 16 * 1024, let count = JWSHeader.of(header)?.x5cCount
        else { return false }
        return count == 1
    }

    /// `SignedTransactionVerifier`'s way here: a transaction of Xcode's shape, verified; nil for
    /// any other JWS or payload type, which the App Store chain verifies.
    func verify<Payload: SignedPayload>(_ jws: String, as type: Payload.Type, bundleID: String) -> Result<Verified<Payload>, JWSFailure>? {
        guard type == SignedTransaction.self, Self.isXcodeShaped(jws) else { return nil }
        return verify(jws, bundleID: bundleID).flatMap { transaction in
            guard let payload = transaction as? Payload else { return .failure(.malformed("the payload is not \(type.kind)")) }
            return .success(Verified(payload: payload, jws: jws))
        }
    }

    /// The transaction, its environment recorded as `Sandbox`, or why not: the chain, the date
    /// and the signature as `JWSVerifier` checks them under Xcode's policy, then an environment
    /// of `Xcode` (one self-signed certificate never vouches for another) and this app's bundle.
    func verify(_ jws: String, bundleID: String) -> Result<SignedTransaction, JWSFailure> {
        self.jws.verify(jws, as: SignedTransaction.self).flatMap { verified in
            var transaction = verified.payload
            guard transaction.environment == .xcode else {
                return .failure(.malformed("one self-signed certificate signs only environment Xcode, not \(transaction.environment)"))
            }
            guard transaction.bundleId == bundleID else { return .failure(.wrongBundle(expected: bundleID, actual: transaction.bundleId)) }
            transaction.environment = .sandbox
            return .success(transaction)
        }
    }
}
