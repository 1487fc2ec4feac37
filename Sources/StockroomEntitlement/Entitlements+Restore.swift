import Foundation
import StockroomCore

/// Restores without a receipt: the App Store's transaction history for a customer becomes
/// entitlements, each from its own verified signed transaction, never from the page.
///
/// A signed transaction proves the customer and restores every purchase of theirs that no
/// other app account holds. A bare transaction ID is a stranger's claim (Apple's IDs can be
/// guessed), so it restores only what Apple or the ledger binds to the `appAccountToken` the
/// request names, and nothing unless the named transaction itself is bound to it. A restore
/// binds no purchase to an account; the operator's (`refulfil --history`) checks no account.
extension Entitlements {
    /// Restores a customer's purchases for a request; `inCatalogue` says which products are sold here.
    public func restore(_ request: RestoreRequest, inCatalogue: @Sendable (String) -> Bool) async throws -> Restore {
        let anchor: String
        let account: String?
        switch request.proof {
        case .signedTransaction(let jws):
            let verified: VerifiedProof
            switch await VerifiedProof.verifyingOnline(jws, with: signedTransactions) {
            case .success(let proof): verified = proof
            case .failure(.revocationUnavailable): return .unavailable(retryAfter: Self.revocationRetryAfter)
            case .failure(let failure): return .refused(.proof(.signedTransactionRejected(failure)))
            }
            if let named = request.appAccountToken, let signed = verified.appAccountToken, named != signed {
                return .refused(.proof(.claimed(transactionID: verified.transactionID)))
            }
            (anchor, account) = (verified.transactionID, request.appAccountToken ?? verified.appAccountToken)
        case .transactionID(let id):
            guard let named = request.appAccountToken else { return .refused(.accountRequired) }
            (anchor, account) = (id, named)
        }
        guard let serverAPI else { return .refused(.notConfigured) }
        if let gate, let wait = gate.admit(request.client) { return .limited(retryAfter: wait) }
        if case .transactionID = request.proof, let account {
            switch try await confirmBinding(anchor, to: account, serverAPI: serverAPI) {
            case .bound: break
            case .refused(let refusal): return .refused(refusal)
            case .unavailable(let retryAfter): return .unavailable(retryAfter: retryAfter)
            }
        }
        let history: [VerifiedProof]
        switch await verifiedHistory(anchor, serverAPI: serverAPI, maximumPages: request.maximumPages, progress: { _, _ in }) {
        case .success(let proofs): history = proofs
        case .failure(.notFound):
            // By bare ID, an unknown transaction is answered as an unbound one: the route tells no one which IDs exist.
            if case .transactionID = request.proof { return .refused(.accountNotBound(anchor)) }
            return .refused(.unknownTransaction(anchor))
        case .failure(.unavailable(_, let retryAfter)): return .unavailable(retryAfter: retryAfter)
        }
        if case .transactionID = request.proof {
            // The named purchase itself must be this account's: else nothing is said about the others.
            guard let named = history.first(where: { $0.transactionID == anchor }),
                try await boundAccount(of: named) == account
            else { return .refused(.accountNotBound(anchor)) }
        }
        var report = RestoreReport()
        for proof in history {
            let bound = try await boundAccount(of: proof)
            if case .transactionID = request.proof, bound != account {
                report.skip(proof, .otherAccount)
                continue
            }
            // Checked inside the ledger's write as well: a binding made meanwhile is seen there.
            let terms = ProofTerms(
                requestedProductID: proof.productID, appAccountToken: bound == nil ? nil : account, checksAccount: true,
                countsAttempt: false)
            try await restore(proof, terms: terms, inCatalogue: inCatalogue, into: &report)
        }
        return .restored(report)
    }

    /// The operator's restore (`refulfil --history`): every purchase in the history of
    /// `transactionID`, no account checked; `progress` hears each page and the count so far.
    public func restoreHistory(
        _ transactionID: String, inCatalogue: @Sendable (String) -> Bool, maximumPages: Int = AppStoreServerAPIClient.historyPageBound,
        progress: (Int, Int) -> Void = { _, _ in }
    ) async throws -> Restore {
        guard let serverAPI else { return .refused(.notConfigured) }
        let history: [VerifiedProof]
        switch await verifiedHistory(transactionID, serverAPI: serverAPI, maximumPages: maximumPages, progress: progress) {
        case .success(let proofs): history = proofs
        case .failure(.notFound): return .refused(.unknownTransaction(transactionID))
        case .failure(.unavailable(_, let retryAfter)): return .unavailable(retryAfter: retryAfter)
        }
        var report = RestoreReport()
        for proof in history {
            try await restore(proof, terms: .reverification, inCatalogue: inCatalogue, into: &report)
        }
        return .restored(report)
    }

    /// Whether a transaction named by bare ID is bound to `account`, checked before any history
    /// page is read: by the ledger (bound to another account is refused with no upstream call),
    /// else by one App Store Server API lookup. An unknown transaction and an unbound one get the
    /// same refusal; it runs after the per-client gate, so a held-back client learns nothing either.
    private func confirmBinding(_ transactionID: String, to account: String, serverAPI: AppStoreServerAPIClient) async throws
        -> BindingCheck
    {
        if let bound = try await ledger.fulfilment(transactionID)?.appAccountToken {
            return bound == account ? .bound : .refused(.accountNotBound(transactionID))
        }
        switch await serverAPI.transaction(transactionID) {
        case .found(let info, _):
            let verified = await VerifiedProof.verifyingOnline(info, with: signedTransactions)
            // A revocation check that got no answer (`--ocsp hard`) is an outage, not a refusal.
            if case .failure(.revocationUnavailable) = verified { return .unavailable(retryAfter: Self.revocationRetryAfter) }
            guard case .success(let proof) = verified, proof.transactionID == transactionID, try await boundAccount(of: proof) == account
            else { return .refused(.accountNotBound(transactionID)) }
            return .bound
        case .notFound:
            return .refused(.accountNotBound(transactionID))
        case .unavailable(_, let retryAfter):
            return .unavailable(retryAfter: retryAfter)
        }
    }

    /// What `confirmBinding` found.
    private enum BindingCheck {
        case bound
        case refused(RestoreRefusal)
        case unavailable(retryAfter: Duration)
    }

    /// The whole history, every transaction verified (root, bundle) and de-duplicated; those that
    /// do not verify are dropped. Nothing is written: a failure leaves the ledger as it was.
    private func verifiedHistory(
        _ transactionID: String, serverAPI: AppStoreServerAPIClient, maximumPages: Int, progress: (Int, Int) -> Void
    ) async -> Result<[VerifiedProof], TransactionHistoryFailure> {
        switch await serverAPI.fullTransactionHistory(transactionID, maximumPages: maximumPages, progress: progress) {
        case .failure(let failure):
            StockroomMetrics.verification(proof: "history", outcome: failure == .notFound ? "invalid" : "unavailable", environment: nil)
            return .failure(failure)
        case .success(let history):
            StockroomMetrics.verification(proof: "history", outcome: "valid", environment: history.environment)
            var seen = Set<String>()
            var proofs: [VerifiedProof] = []
            for jws in history.signedTransactions {
                let verified = await VerifiedProof.verifyingOnline(jws, with: signedTransactions)
                // No revocation answer (`--ocsp hard`): the whole history waits, rather than a restore of part of it.
                if case .failure(.revocationUnavailable(let detail)) = verified {
                    return .failure(.unavailable(reason: detail, retryAfter: Self.revocationRetryAfter))
                }
                guard case .success(let proof) = verified else {
                    logger.warning(
                        "a transaction in the App Store's history does not verify; skipped", metadata: ["history": .string(transactionID)])
                    continue
                }
                if seen.insert(proof.transactionID).inserted { proofs.append(proof) }
            }
            return .success(proofs)
        }
    }

    /// The account a purchase is bound to: by Apple's signed transaction, else by the ledger.
    private func boundAccount(of proof: VerifiedProof) async throws -> String? {
        if let signed = proof.appAccountToken { return signed }
        return try await ledger.fulfilment(proof.transactionID)?.appAccountToken
    }

    /// One verified purchase of the history: skipped, or claimed in one ledger write.
    private func restore(
        _ proof: VerifiedProof, terms: ProofTerms, inCatalogue: @Sendable (String) -> Bool, into report: inout RestoreReport
    ) async throws {
        guard inCatalogue(proof.productID) else { return report.skip(proof, .notInCatalogue) }
        if proof.environment == .sandbox, !policy.allowsSandbox, proof.revokedAt == nil { return report.skip(proof, .sandboxNotAllowed) }
        var terms = terms
        terms.restores = true
        switch try await ledger.recordProof(proof, terms: terms, now: now()) {
        case .entitled(let row):
            report.restored.append(
                RestoredFulfilment(
                    fulfilment: row, token: tokens.token(transactionID: row.transactionID, productID: row.productID, now: now())))
        case .refused(.revoked): report.skip(proof, .revoked)
        case .refused(.expired): report.skip(proof, .expired)
        case .refused(.claimed): report.skip(proof, .otherAccount)
        case .refused: report.skip(proof, .refused)
        }
    }
}
