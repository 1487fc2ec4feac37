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

    public init(pinned: Certificate?) {
        self.pinned = pinned
    }

    /// Whether `jws` has Xcode's shape (a header whose `x5c` holds one certificate): only such
    /// JWS are verified here; every other one goes through the App Store chain as before.
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

    /// The transaction, its environment recorded as `Sandbox`, or why not.
    func verify(_ jws: String, bundleID: String) -> Result<SignedTransaction, JWSFailure> {
        let parts = jws.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let header = JWSHeader.of(parts[0]) else { return .failure(.malformed("the header is not base64url JSON")) }
        guard header.alg == "ES256" else { return .failure(.malformed("alg must be ES256")) }
        guard let chain = header.x5c, chain.count == 1 else { return .failure(.malformed("an Xcode x5c holds one certificate")) }
        guard let payload = ByteEncoding.decodeBase64(parts[1]),
            var transaction = UpstreamJSON.decode(SignedTransaction.self, from: payload)
        else { return .failure(.malformed("the payload is not a transaction")) }
        guard Double(transaction.signedDate) <= JWSVerifier.signedDateRange.upperBound, transaction.signedDate >= 0 else {
            return .failure(.malformed("signedDate must be milliseconds between 1970 and 2100"))
        }
        guard transaction.environment == .xcode else {
            return .failure(.malformed("one self-signed certificate signs only environment Xcode, not \(transaction.environment)"))
        }
        guard let signature = ByteEncoding.decodeBase64(parts[2]), signature.count == 64 else {
            return .failure(.malformed("the signature is not 64 bytes of base64url"))
        }
        guard let der = ByteEncoding.decodeBase64(chain[0]), let certificate = try? Certificate(der: der) else {
            return .failure(.badCertificate("x5c[0] is not a DER certificate"))
        }
        if let pinned, pinned.der != certificate.der { return .failure(.badChain("not the pinned StoreKit Test certificate")) }
        let signedAt = Date(timeIntervalSince1970: Double(transaction.signedDate) / 1000)
        if let problem = CertificateChain.problem(leaf: certificate, intermediates: [], root: certificate, at: signedAt) {
            return .failure(.badChain("the certificate is not self-signed and valid: \(problem)"))
        }
        guard let key = certificate.publicKey, key.isValidSignature(signature, for: Array("\(parts[0]).\(parts[1])".utf8)) else {
            return .failure(.badSignature)
        }
        guard transaction.bundleId == bundleID else { return .failure(.wrongBundle(expected: bundleID, actual: transaction.bundleId)) }
        transaction.environment = .sandbox
        return .success(transaction)
    }
}
