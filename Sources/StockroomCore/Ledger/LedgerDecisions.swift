import Foundation

/// The ledger's decisions, each written once: a pure function of `EntitlementRules` over the
/// purchase's rows (`PurchaseWork`), which an engine reads under the purchase's lock and whose
/// writes it applies, in one database transaction.
///
/// An engine provides only `decide`; the decisions below are the only way in. None records an
/// entitlement without a `VerifiedProof`, lets a pending proof authorise bytes, or lifts a
/// revocation except `reinstate` (an operator's) and `reverseRefund` (Apple's).
public protocol LedgerDecisions: Sendable {
    /// When set, a transaction reaching this point is queued for Finish Transaction in the same write.
    var finishOn: FinishTrigger? { get }

    /// Whether binding a purchase that Apple holds without an account queues Set App Account
    /// Token in the same write (only with App Store Server API credentials).
    var tellsAppleOfAccounts: Bool { get }

    /// Reads the rows `scope` names under the purchase's lock, runs `decision` on them and applies
    /// the writes it made, in one database transaction; a decision that throws writes nothing.
    func decide<Value: Sendable>(_ scope: PurchaseScope, _ decision: @escaping @Sendable (inout PurchaseWork) throws -> Value) async throws
        -> Value
}

extension LedgerDecisions {
    /// Records what `proof` says and decides whether it entitles the claim: refunds revoke the
    /// whole purchase, a revoked purchase stays revoked, the product must be the one asked for,
    /// a bound account must match, an expired subscription is refused. The customer's consent
    /// (`terms`) is kept in the same write, and so is the call that tells Apple an account this
    /// write bound (`tellsAppleOfAccounts`).
    public func recordProof(_ proof: VerifiedProof, terms: ProofTerms, now: Date) async throws -> LedgerDecision {
        let tellsApple = tellsAppleOfAccounts
        return try await decide(.purchase(transactionID: proof.transactionID, originalTransactionID: proof.originalTransactionID)) { work in
            let before = work[proof.transactionID]
            let decision = try EntitlementRules.recordProof(proof, terms: terms, purchase: &work, now: now)
            if case .entitled(let after) = decision {
                work.settlePendingProof(transactionID: proof.transactionID, digest: proof.digest)
                if tellsApple { work.queueAppAccountToken(proof, before: before, after: after, now: now) }
            }
            return decision
        }
    }

    /// During an outage: serves only an entitled, unexpired, unrevoked transaction whose proof on
    /// record has this digest; nil when it does not qualify (nothing changes then).
    public func serveRecordedProof(_ request: RecordedProofRequest, now: Date) async throws -> Fulfilment? {
        try await decide(.purchaseOf(transactionID: request.transactionID)) { work in
            EntitlementRules.serveRecordedProof(request, purchase: &work, now: now)
        }
    }

    /// A resume authorised by a download token for `productID`: counts the attempt when entitled.
    public func resume(_ transactionID: String, productID: String, now: Date) async throws -> LedgerDecision {
        try await decide(.purchaseOf(transactionID: transactionID)) { work in
            guard work[transactionID]?.productID == productID else { return .refused(.unknownTransaction(transactionID)) }
            return EntitlementRules.resume(transactionID, purchase: &work, now: now)
        }
    }

    /// The client has the whole file: delivered → acknowledged; with `handedOff` (an object store
    /// sent the bytes by presigned redirect), verified → delivered → acknowledged.
    public func acknowledge(_ transactionID: String, productID: String, handedOff: Bool = false, now: Date) async throws -> LedgerDecision {
        let finishOn = finishOn
        return try await decide(.purchaseOf(transactionID: transactionID)) { work in
            guard let before = work[transactionID], before.productID == productID else {
                return .refused(.unknownTransaction(transactionID))
            }
            let decision = try EntitlementRules.acknowledge(transactionID, purchase: &work, handedOff: handedOff, now: now)
            if case .entitled(let after) = decision { work.queueFinish(finishOn, before: before.state, after: after, now: now) }
            return decision
        }
    }

    /// A re-verification of the stored proof said no: entitled → rejected, only while the
    /// stored proof is still the one with `digest`; nil when nothing changed.
    public func rejectStoredProof(_ transactionID: String, digest: String?, reason: String, now: Date) async throws -> Fulfilment? {
        try await decide(.transaction(transactionID)) { work in
            guard var row = work[transactionID] else { throw LedgerError.unknownTransaction(transactionID) }
            guard EntitlementRules.reject(&row, digest: digest, reason: reason, now: now) else { return nil }
            return work.update(row)
        }
    }

    /// Notes why a re-verification of the stored proof could not be had.
    public func noteReverificationError(_ transactionID: String, _ error: String, now: Date) async throws {
        try await decide(.transaction(transactionID)) { work in
            guard var row = work[transactionID] else { throw LedgerError.unknownTransaction(transactionID) }
            row.lastError = error
            row.updatedAt = now
            work.update(row)
        }
    }

    /// Revokes every transaction of a purchase for `cause`; a transaction never seen is
    /// recorded revoked so that its proof cannot download later. Returns those that changed.
    public func revoke(_ purchase: RevokedPurchase, cause: RevocationCause, reason: String, now: Date) async throws -> [Fulfilment] {
        try await decide(.purchase(transactionID: purchase.transactionID, originalTransactionID: purchase.originalTransactionID)) { work in
            try EntitlementRules.revoke(purchase, cause: cause, reason: reason, purchase: &work, now: now)
        }
    }

    /// Lifts an operator's revocation of the purchase `transactionID` belongs to; a refund's
    /// stays. Returns the transactions that became entitled again.
    public func reinstate(_ transactionID: String, reason: String, now: Date) async throws -> [Fulfilment] {
        try await decide(.purchaseOf(transactionID: transactionID)) { work in
            guard work[transactionID] != nil else { throw LedgerError.unknownTransaction(transactionID) }
            return try EntitlementRules.lift(.operatorAction, reason: reason, purchase: &work, now: now)
        }
    }

    /// Apple reversed a refund (`REFUND_REVERSED`): lifts the refund's revocation; an
    /// operator's stays. Returns the transactions that became entitled again.
    public func reverseRefund(originalTransactionID: String, now: Date) async throws -> [Fulfilment] {
        try await decide(.purchase(transactionID: originalTransactionID, originalTransactionID: originalTransactionID)) { work in
            try EntitlementRules.lift(.refund, reason: "refund reversed", purchase: &work, now: now)
        }
    }

    /// Logs a download attempt and its bytes; a complete body reaching the file's end makes a
    /// verified transaction `delivered`. The attempts log stays bounded per transaction.
    public func recordDelivery(_ transactionID: String, report: DeliveryReport, fileSize: Int64, now: Date) async throws {
        let finishOn = finishOn
        try await decide(.transaction(transactionID)) { work in
            guard var row = work[transactionID] else { throw LedgerError.unknownTransaction(transactionID) }
            let before = row.state
            work.log(
                DownloadAttempt(
                    id: nil, transactionID: transactionID, rangeStart: report.range?.lowerBound, rangeEnd: report.range?.upperBound,
                    bytes: report.bytesSent, outcome: report.complete ? .complete : .interrupted, at: now))
            EntitlementRules.recordDelivery(&row, report: report, fileSize: fileSize, now: now)
            work.update(row)
            work.queueFinish(finishOn, before: before, after: row, now: now)
        }
    }

    /// Keeps that a presigned URL answered a download of `transactionID`
    /// (`--content-delivery redirect`): the object store sends the bytes, so until the app
    /// acknowledges, the ledger cannot tell whether they arrived.
    public func recordHandOff(_ transactionID: String, now: Date) async throws {
        try await decide(.transaction(transactionID)) { work in
            guard var row = work[transactionID] else { throw LedgerError.unknownTransaction(transactionID) }
            EntitlementRules.recordHandOff(&row, now: now)
            work.update(row)
        }
    }

    /// Keeps the customer's consent to share consumption data on an entitled transaction.
    public func recordConsent(_ transactionID: String, consented: Bool, now: Date) async throws {
        try await decide(.transaction(transactionID)) { work in
            guard var row = work[transactionID], row.state.isEntitled else { return }
            row.customerConsented = consented
            row.updatedAt = now
            work.update(row)
        }
    }
}

extension PurchaseWork {
    /// Queues Set App Account Token when this write bound the purchase to an account that
    /// Apple's signed transaction did not carry: once per purchase, under its original
    /// transaction ID. A receipt says nothing of Apple's token, so it never queues one (the call
    /// could overwrite a token Apple holds).
    mutating func queueAppAccountToken(_ proof: VerifiedProof, before: Fulfilment?, after: Fulfilment, now: Date) {
        guard proof.kind == .signedTransaction, proof.appAccountToken == nil, before?.appAccountToken == nil,
            let token = after.appAccountToken
        else { return }
        queue(.appAccountToken(token, originalTransactionID: proof.originalTransactionID, environment: proof.environment, now: now))
    }

    /// Queues Finish Transaction when `after` just became due under `trigger` (once per transaction).
    mutating func queueFinish(_ trigger: FinishTrigger?, before: FulfilmentState?, after: Fulfilment, now: Date) {
        guard let trigger, trigger.isDue(before: before, after: after), let environment = after.environment else { return }
        queue(.queued(.finish, after.transactionID, environment: environment, now: now))
    }
}
