import Foundation
import StockroomCore

/// The operator's decisions: re-verify a stored proof or the kept pending proofs, revoke,
/// reinstate. A re-verification never lifts a revocation.
extension Entitlements {
    /// Re-verifies `transactionID`'s stored proof with the App Store now (never from a cache),
    /// then the pending proofs kept under it. A transaction with no row but pending proofs (what
    /// `fulfilments list --state pending` shows) is re-fulfilled from those proofs.
    public func refulfil(_ transactionID: String, dryRun: Bool = false) async throws -> Reverification {
        guard let row = try await ledger.fulfilment(transactionID) else {
            let outcomes = try await refulfilPending(of: transactionID, dryRun: dryRun)
            if let summary = Reverification.summary(of: outcomes) { return summary }
            guard try await ledger.pendingProofs(keptUnder: transactionID, limit: 1).contains(where: { $0.status == .pending })
            else { throw LedgerError.unknownTransaction(transactionID) }
            return Reverification(
                kind: .unchanged, transactionID: transactionID, before: "pending", after: "pending",
                detail: "its pending proofs are being verified by another run")
        }
        let outcome = try await refulfil(row, dryRun: dryRun)
        guard let pending = Reverification.summary(of: try await refulfilPending(of: transactionID, dryRun: dryRun)) else { return outcome }
        // Both said something: the more decisive verdict, the state the ledger ends in, both details.
        var combined = Reverification.summary(of: [outcome, pending]) ?? outcome
        combined.before = outcome.before
        combined.after = try await ledger.fulfilment(transactionID)?.state.rawValue ?? combined.after
        combined.detail =
            "stored proof: \(outcome.kind.rawValue), \(outcome.detail); kept proofs: \(pending.kind.rawValue), \(pending.detail)"
        return combined
    }

    private func refulfil(_ row: Fulfilment, dryRun: Bool) async throws -> Reverification {
        let transactionID = row.transactionID
        let before = row.state.rawValue
        func outcome(_ kind: Reverification.Kind, _ after: String, _ detail: String) -> Reverification {
            Reverification(kind: kind, transactionID: transactionID, before: before, after: after, detail: detail)
        }
        let verdict =
            await reverify(kind: row.proofKind, proof: row.proof, transactionIDs: [transactionID])[transactionID]
            ?? .unavailable("no verdict")
        switch verdict {
        case .verified(let proof):
            if dryRun { return outcome(row.state == .revoked ? .unchanged : .verified, before, "the App Store vouches for it (dry run)") }
            return try await record(proof, before: before, terms: .reverification)
        case .revoked(let purchase):
            if !dryRun { _ = try await ledger.revoke(purchase, cause: .refund, reason: "refunded (re-verification)", now: now()) }
            return outcome(.revoked, FulfilmentState.revoked.rawValue, "refunded or revoked")
        case .rejected(let reason):
            if dryRun { return outcome(.rejected, before, "\(reason) (dry run)") }
            guard let changed = try await ledger.rejectStoredProof(transactionID, digest: row.proofDigest, reason: reason, now: now())
            else {
                return outcome(.unchanged, before, "\(reason); left \(before), which cannot become rejected")
            }
            return outcome(.rejected, changed.state.rawValue, reason)
        case .unavailable(let reason):
            if !dryRun { try await ledger.noteReverificationError(transactionID, reason, now: now()) }
            return outcome(.unavailable, before, reason)
        }
    }

    /// Re-verifies every kept pending proof (only those kept under `transactionID`, when given);
    /// a valid one becomes an entitlement from Apple's answer. Each distinct proof (by digest)
    /// is verified once, whatever the number of rows kept under it; rejected proofs past their
    /// retention are purged first. Stops between proofs when its task is cancelled.
    public func refulfilPending(
        of transactionID: String? = nil, dryRun: Bool = false, progress: (Int, Int) -> Void = { _, _ in }
    ) async throws -> [Reverification] {
        // A dry run changes nothing, the lease included; a real run holds what it verifies, so a
        // second run at the same time (here or on another instance) takes only the rest.
        let proofs: [PendingProof]
        if dryRun {
            proofs = try await ledger.pendingProofs(status: .pending, limit: 100_000).filter {
                transactionID == nil || $0.transactionID == transactionID
            }
        } else {
            _ = try await ledger.purgeRejectedPendingProofs(before: policy.pendingProofs.purgeCutoff(now: now()), limit: 100_000)
            proofs = try await ledger.leasePendingProofs(
                of: transactionID, limit: 100_000, until: now().addingTimeInterval(Self.pendingLease), now: now())
        }
        var groups: [String: [PendingProof]] = [:]
        var order: [String] = []
        for proof in proofs {
            let key = "\(proof.proofKind.rawValue) \(proof.proofDigest)"
            if groups[key] == nil { order.append(key) }
            groups[key, default: []].append(proof)
        }
        var outcomes: [Reverification] = []
        progress(0, proofs.count)
        for key in order {
            try Task.checkCancellation()
            guard let group = groups[key], let first = group.first else { continue }
            var ids: [String] = []
            for proof in group where !ids.contains(proof.transactionID) { ids.append(proof.transactionID) }
            let verdicts = await reverify(kind: first.proofKind, proof: first.proof, transactionIDs: ids)
            for pending in group {
                outcomes.append(try await settle(pending, verdicts[pending.transactionID] ?? .unavailable("no verdict"), dryRun: dryRun))
                progress(outcomes.count, proofs.count)
            }
        }
        return outcomes
    }

    /// How long a run holds the pending proofs it took: far longer than verifying them takes,
    /// short enough that a run that died leaves them to the next.
    static let pendingLease: TimeInterval = 600

    /// What the App Store's verdict on a pending proof does to it and to the ledger.
    private func settle(_ pending: PendingProof, _ verdict: ReverifyVerdict, dryRun: Bool) async throws -> Reverification {
        func outcome(_ kind: Reverification.Kind, _ after: String, _ detail: String) -> Reverification {
            Reverification(kind: kind, transactionID: pending.transactionID, before: "pending", after: after, detail: detail)
        }
        guard let id = pending.id else { return outcome(.unchanged, "pending", "no ID") }
        switch verdict {
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
                transactionID: row.transactionID, originalTransactionID: row.originalTransactionID, productID: nil, bundleID: nil,
                environment: nil),
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

    /// The App Store's word now on a stored proof, for each transaction it is kept under: a
    /// receipt is sent once however many transactions it names.
    func reverify(kind: Fulfilment.ProofKind, proof text: String, transactionIDs: [String]) async -> [String: ReverifyVerdict] {
        switch kind {
        case .receipt:
            guard let proof = ReceiptProof.parse(text) else {
                return Dictionary(
                    transactionIDs.map { ($0, .rejected("the stored proof is not a receipt")) }, uniquingKeysWith: { first, _ in first })
            }
            let verdicts = await receipts.verify(proof, transactionIDs: transactionIDs, freshness: .upstreamOnly)
            return verdicts.mapValues { Self.reverifyVerdict($0, proof: proof) }
        case .signedTransaction:
            var verdicts: [String: ReverifyVerdict] = [:]
            for id in transactionIDs where verdicts[id] == nil { verdicts[id] = await reverify(signed: text, transactionID: id) }
            return verdicts
        }
    }

    /// verifyReceipt's verdict, as a re-verification reads it.
    private static func reverifyVerdict(_ verdict: ReceiptVerdict, proof: ReceiptProof) -> ReverifyVerdict {
        switch verdict {
        case .valid(let receipt):
            guard let verified = VerifiedProof(receipt: receipt, proof: proof) else {
                return .rejected("the App Store lists no such transaction")
            }
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
    }

    /// A stored JWS, confirmed with the App Store Server API.
    private func reverify(signed text: String, transactionID: String) async -> ReverifyVerdict {
        let stored: VerifiedProof
        switch await VerifiedProof.verifyingOnline(text, with: signedTransactions) {
        case .success(let proof): stored = proof
        // No answer, or "unknown", from the revocation check is no verdict on the purchase: it waits.
        case .failure(.revocationUnavailable(let detail)): return .unavailable(detail)
        case .failure(.revocationUnknown): return .unavailable("the certificate's revocation status is unknown to its responder")
        case .failure(let failure): return .rejected("the stored signed transaction does not verify: \(failure)")
        }
        guard let serverAPI else {
            return .unavailable("signed transactions are re-verified through the App Store Server API, which has no credentials here")
        }
        switch await serverAPI.transaction(transactionID, freshness: .upstreamOnly) {
        case .found(let info, _):
            guard case .success(let current) = await VerifiedProof.verifyingOnline(info, with: signedTransactions) else {
                return .unavailable("the API's signed transaction does not verify")
            }
            return .verified(stored.updated(by: current))
        case .notFound:
            return .rejected("unknown to the App Store Server API")
        case .unavailable(let reason, _):
            return .unavailable(reason)
        }
    }

    /// The ledger's decision on a re-verified proof, as an operator reads it.
    private func record(_ proof: VerifiedProof, before: String, terms: ProofTerms) async throws -> Reverification {
        func outcome(_ kind: Reverification.Kind, _ after: String, _ detail: String) -> Reverification {
            Reverification(kind: kind, transactionID: proof.transactionID, before: before, after: after, detail: detail)
        }
        let proof = policy.proratedRefund == .keep ? proof.keepingProratedRefund() : proof
        switch try await ledger.recordProof(proof, terms: terms, now: now()) {
        case .entitled(let row):
            return outcome(.verified, row.state.rawValue, "the App Store vouches for it (\(proof.environment.rawValue))")
        case .refused(.revoked):
            return outcome(
                proof.revokedAt == nil ? .unchanged : .revoked, "revoked", "revoked stays revoked until reinstated or refund reversed")
        case .refused(.expired):
            return outcome(.expired, before, "the subscription has expired")
        case .refused(let refusal):
            return outcome(.unchanged, before, refusal.description)
        }
    }
}
