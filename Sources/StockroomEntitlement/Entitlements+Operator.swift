import Foundation
import StockroomCore

/// The operator's decisions: re-verify a stored proof or the kept pending proofs, revoke,
/// reinstate. A re-verification never lifts a revocation.
extension Entitlements {
    /// Re-verifies `transactionID`'s stored proof with the App Store now (never from a cache).
    public func refulfil(_ transactionID: String, dryRun: Bool = false) async throws -> Reverification {
        guard let row = try await ledger.fulfilment(transactionID) else { throw LedgerError.unknownTransaction(transactionID) }
        let before = row.state.rawValue
        func outcome(_ kind: Reverification.Kind, _ after: String, _ detail: String) -> Reverification {
            Reverification(kind: kind, transactionID: transactionID, before: before, after: after, detail: detail)
        }
        let verdict = await reverify(kind: row.proofKind, proof: row.proof, transactionID: transactionID)
        switch verdict {
        case .verified(let proof):
            if dryRun { return outcome(row.state == .revoked ? .unchanged : .verified, before, "the App Store vouches for it (dry run)") }
            return try await record(proof, before: before, terms: .reverification)
        case .revoked(let purchase):
            if !dryRun { _ = try await ledger.revoke(purchase, cause: .refund, reason: "refunded (re-verification)", now: now()) }
            return outcome(.revoked, FulfilmentState.revoked.rawValue, "refunded or revoked")
        case .rejected(let reason):
            if dryRun { return outcome(.rejected, before, "\(reason) (dry run)") }
            guard let changed = try await ledger.reject(transactionID, digest: row.proofDigest, reason: reason, now: now()) else {
                return outcome(.unchanged, before, "\(reason); left \(before), which cannot become rejected")
            }
            return outcome(.rejected, changed.state.rawValue, reason)
        case .unavailable(let reason):
            if !dryRun { try await ledger.noteError(transactionID, reason, now: now()) }
            return outcome(.unavailable, before, reason)
        }
    }

    /// Re-verifies every kept pending proof; a valid one becomes an entitlement from Apple's answer.
    public func refulfilPending(dryRun: Bool = false, progress: (Int, Int) -> Void = { _, _ in }) async throws -> [Reverification] {
        // A dry run changes nothing, the lease included; a real run holds what it verifies, so a
        // second run at the same time (here or on another instance) takes only the rest.
        let proofs =
            dryRun
            ? try await ledger.pendingProofs(status: .pending, limit: 100_000)
            : try await ledger.leasePendingProofs(limit: 100_000, until: now().addingTimeInterval(Self.pendingLease), now: now())
        var outcomes: [Reverification] = []
        for (index, pending) in proofs.enumerated() {
            outcomes.append(try await refulfil(pending, dryRun: dryRun))
            progress(index + 1, proofs.count)
        }
        return outcomes
    }

    /// How long a run holds the pending proofs it took: far longer than verifying them takes,
    /// short enough that a run that died leaves them to the next.
    static let pendingLease: TimeInterval = 600

    private func refulfil(_ pending: PendingProof, dryRun: Bool) async throws -> Reverification {
        func outcome(_ kind: Reverification.Kind, _ after: String, _ detail: String) -> Reverification {
            Reverification(kind: kind, transactionID: pending.transactionID, before: "pending", after: after, detail: detail)
        }
        guard let id = pending.id else { return outcome(.unchanged, "pending", "no ID") }
        switch await reverify(kind: pending.proofKind, proof: pending.proof, transactionID: pending.transactionID) {
        case .verified(let proof):
            if dryRun { return outcome(.verified, "pending", "the App Store vouches for it (dry run)") }
            let result = try await record(proof, before: "pending", terms: .reverification)
            if result.kind != .verified { try await ledger.rejectPendingProof(id: id, reason: result.detail, now: now()) }
            return result
        case .revoked(let purchase):
            if !dryRun {
                _ = try await ledger.revoke(purchase, cause: .refund, reason: "refunded (re-verification)", now: now())
                try await ledger.rejectPendingProof(id: id, reason: "refunded or revoked", now: now())
            }
            return outcome(.revoked, "revoked", "refunded or revoked")
        case .rejected(let reason):
            if !dryRun { try await ledger.rejectPendingProof(id: id, reason: reason, now: now()) }
            return outcome(.rejected, "rejected", reason)
        case .unavailable(let reason):
            if !dryRun { try await ledger.notePendingProof(id: id, error: reason, now: now()) }
            return outcome(.unavailable, "pending", reason)
        }
    }

    /// An operator's revocation of the purchase `transactionID` belongs to; only `reinstate` lifts it.
    public func revoke(_ transactionID: String, reason: String) async throws -> [Fulfilment] {
        guard let row = try await ledger.fulfilment(transactionID) else { throw LedgerError.unknownTransaction(transactionID) }
        return try await ledger.revoke(
            RevokedPurchase(
                transactionID: row.transactionID, originalTransactionID: row.originalTransactionID, productID: nil, bundleID: nil, environment: nil),
            cause: .operatorAction, reason: "revoked by operator: \(reason)", now: now())
    }

    /// Lifts an operator's revocation; a refund's stays until Apple reverses it.
    public func reinstate(_ transactionID: String, reason: String) async throws -> [Fulfilment] {
        try await ledger.reinstate(transactionID, reason: "reinstated by operator: \(reason)", now: now())
    }

    // MARK: Re-verification

    /// What the App Store says now about a stored proof.
    enum ReverifyVerdict {
        case verified(VerifiedProof)
        case revoked(RevokedPurchase)
        case rejected(String)
        case unavailable(String)
    }

    func reverify(kind: Fulfilment.ProofKind, proof text: String, transactionID: String) async -> ReverifyVerdict {
        switch kind {
        case .receipt:
            guard let proof = ReceiptProof.parse(text) else { return .rejected("the stored proof is not a receipt") }
            switch await receipts.verify(proof, productID: nil, transactionID: transactionID, freshness: .upstreamOnly) {
            case .valid(let receipt):
                guard let verified = VerifiedProof(receipt: receipt, proof: proof) else { return .rejected("the App Store lists no such transaction") }
                return .verified(verified)
            case .invalid(.revoked(let transaction)):
                return .revoked(
                    RevokedPurchase(
                        transactionID: transaction.transactionID, originalTransactionID: transaction.originalTransactionID,
                        productID: transaction.productID, bundleID: nil, environment: nil))
            case .invalid(let reason):
                return .rejected("\(reason.code): \(reason)")
            case .unavailable(let reason, _):
                return .unavailable(reason)
            }
        case .signedTransaction:
            let stored: VerifiedProof
            switch VerifiedProof.verifying(text, with: signedTransactions) {
            case .success(let proof): stored = proof
            case .failure(let failure): return .rejected("the stored signed transaction does not verify: \(failure)")
            }
            guard let serverAPI else {
                return .unavailable("signed transactions are re-verified through the App Store Server API, which has no credentials here")
            }
            switch await serverAPI.transaction(transactionID, freshness: .upstreamOnly) {
            case .found(let info, _):
                guard case .success(let current) = VerifiedProof.verifying(info, with: signedTransactions) else {
                    return .unavailable("the API's signed transaction does not verify")
                }
                return .verified(stored.updated(by: current))
            case .notFound:
                return .rejected("unknown to the App Store Server API")
            case .unavailable(let reason, _):
                return .unavailable(reason)
            }
        }
    }

    /// The ledger's decision on a re-verified proof, as an operator reads it.
    private func record(_ proof: VerifiedProof, before: String, terms: ClaimTerms) async throws -> Reverification {
        func outcome(_ kind: Reverification.Kind, _ after: String, _ detail: String) -> Reverification {
            Reverification(kind: kind, transactionID: proof.transactionID, before: before, after: after, detail: detail)
        }
        let proof = policy.proratedRefund == .keep ? proof.keepingProratedRefund() : proof
        switch try await ledger.claim(proof, terms: terms, now: now()) {
        case .entitled(let row):
            return outcome(.verified, row.state.rawValue, "the App Store vouches for it (\(proof.environment.rawValue))")
        case .refused(.revoked):
            return outcome(proof.revokedAt == nil ? .unchanged : .revoked, "revoked", "revoked stays revoked until reinstated or refund reversed")
        case .refused(.expired):
            return outcome(.expired, before, "the subscription has expired")
        case .refused(let refusal):
            return outcome(.unchanged, before, refusal.description)
        }
    }
}
