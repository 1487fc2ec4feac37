/// The revocation step: after the synchronous verification (chain, signature, dates, bundle),
/// the chain that signed the JWS is checked with OCSP (`OCSPRevocationChecker`), where the
/// verified value is used. A cached good answer adds one lookup and no request; a certificate
/// reported revoked also drops every cached chain holding it.
extension SignedTransactionVerifier {
    /// `verify(_:as:)`, then the revocation of the chain that signed it under `revocation`'s
    /// policy (no step without one).
    public func verifyOnline<Payload: SignedPayload>(_ jws: String, as type: Payload.Type) async -> Result<Verified<Payload>, JWSFailure> {
        let verified: Verified<Payload>
        switch verify(jws, as: type) {
        case .success(let value): verified = value
        case .failure(let failure): return .failure(failure)
        }
        if let failure = await revocationFailure(of: verified.chain) { return .failure(failure) }
        return .success(verified)
    }

    /// Why `chain` refuses what it signed, or nil: allowed, or nothing to check.
    func revocationFailure(of chain: VerifiedChainCache.Chain?) async -> JWSFailure? {
        guard let revocation, let chain else { return nil }
        let verdict = await revocation.check(chain)
        if case .revoked(let fingerprint, _) = verdict { jws.chains?.forget(certificate: fingerprint) }
        return verdict.failure
    }
}

extension VerifiedProof {
    /// `verifying(_:with:)` with the revocation step: what the entitlement code uses.
    public static func verifyingOnline(_ jws: String, with verifier: SignedTransactionVerifier) async -> Result<VerifiedProof, JWSFailure> {
        await verifier.verifyOnline(trimmed(jws), as: SignedTransaction.self).flatMap(verifying)
    }
}

extension AppStoreNotification {
    /// `verify(_:with:)` with the revocation step, for the outer payload's chain and the nested
    /// transaction's (or app transaction's).
    public static func verifyOnline(_ signedPayload: String, with transactions: SignedTransactionVerifier) async -> Result<
        AppStoreNotification, JWSFailure
    > {
        let notification: AppStoreNotification
        switch verify(signedPayload, with: transactions) {
        case .success(let value): notification = value
        case .failure(let failure): return .failure(failure)
        }
        if let failure = await transactions.revocationFailure(of: notification.payloadChain) { return .failure(failure) }
        if let failure = await transactions.revocationFailure(of: notification.verifiedTransaction?.chain) { return .failure(failure) }
        if let failure = await transactions.revocationFailure(of: notification.verifiedAppTransaction?.chain) { return .failure(failure) }
        return .success(notification)
    }
}
