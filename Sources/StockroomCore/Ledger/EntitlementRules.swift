import Foundation

/// The rules every ledger applies inside its one write transaction: pure functions over the
/// purchase's rows, so SQLite, PostgreSQL and the property tests share them.
public enum EntitlementRules {
    /// A verified proof claims its transaction for `terms`.
    public static func recordProof(_ proof: VerifiedProof, terms: ProofTerms, purchase: inout PurchaseWork, now: Date) throws
        -> LedgerDecision
    {
        let id = proof.transactionID
        purchase.restoring = terms.restores
        if proof.revokedAt != nil {
            _ = try revoke(
                RevokedPurchase(proof), cause: .refund, reason: "refunded or revoked (the App Store says so)", purchase: &purchase, now: now
            )
            return .refused(.revoked(transactionID: id))
        }
        if purchase.isRevoked {
            // Sticky: a restore or an older proof of a revoked purchase is recorded revoked too.
            if purchase[id] == nil {
                insertRevoked(
                    RevokedPurchase(proof), causes: purchase.standingRevocation, reason: "its purchase is revoked", purchase: &purchase,
                    now: now)
            }
            return .refused(.revoked(transactionID: id))
        }
        if let requested = terms.requestedProductID, requested != proof.productID {
            return .refused(.rejected(.productMismatch(transactionID: id, productID: requested)))
        }
        let existing = purchase[id]
        if let recorded = existing?.appAccountToken, let signed = proof.appAccountToken, recorded != signed {
            return .refused(.claimed(transactionID: id))
        }
        let bound = existing?.appAccountToken ?? proof.appAccountToken
        if terms.checksAccount, let bound, terms.appAccountToken != bound {
            return .refused(.claimed(transactionID: id))
        }
        if let expiresAt = proof.expiresAt, expiresAt <= now {
            if var row = existing {
                row.expiresAt = expiresAt
                row.lastError = "subscription expired"
                row.updatedAt = now
                purchase.update(row)
            }
            return .refused(.expired(transactionID: id))
        }

        var row = existing ?? newRow(RevokedPurchase(proof), state: .verified, now: now)
        if existing != nil, !row.state.isEntitled { try move(&row, to: .verified, at: now) }
        row.originalTransactionID = proof.originalTransactionID
        row.productID = proof.productID
        row.bundleID = proof.bundleID
        row.environment = proof.environment
        row.expiresAt = proof.expiresAt
        row.proofKind = proof.kind
        row.proof = proof.proof
        row.proofDigest = proof.digest
        row.appAccountToken = bound ?? (terms.checksAccount ? terms.appAccountToken : nil)
        row.verifiedAt = now
        row.lastError = nil
        row.updatedAt = now
        if let consented = terms.customerConsented { row.customerConsented = consented }
        if terms.countsAttempt {
            row.attempts += 1
            row.lastDeliveryEnding = nil  // under way until its body ends
        }
        return .entitled(existing == nil ? purchase.insert(row) : purchase.update(row))
    }

    /// During an outage, or within the re-verify interval: the very proof on record, for the
    /// product on record, by the account on record, of an entitled, unexpired, unrevoked purchase.
    public static func serveRecordedProof(_ request: RecordedProofRequest, purchase: inout PurchaseWork, now: Date) -> Fulfilment? {
        guard var row = purchase[request.transactionID], row.state.isEntitled, !purchase.isRevoked, !row.isExpired(at: now),
            let digest = row.proofDigest, digest == request.digest, row.productID == request.productID
        else { return nil }
        if let bound = row.appAccountToken, request.appAccountToken != bound { return nil }
        row.attempts += 1
        row.lastDeliveryEnding = nil
        row.updatedAt = now
        purchase.update(row)
        return row
    }

    /// A resume authorised by a download token.
    public static func resume(_ transactionID: String, purchase: inout PurchaseWork, now: Date) -> LedgerDecision {
        guard var row = purchase[transactionID] else { return .refused(.unknownTransaction(transactionID)) }
        if purchase.isRevoked { return .refused(.revoked(transactionID: transactionID)) }
        if row.isExpired(at: now) { return .refused(.expired(transactionID: transactionID)) }
        guard row.state.isEntitled else { return .refused(.notEntitled(transactionID: transactionID, state: row.state)) }
        row.attempts += 1
        row.lastDeliveryEnding = nil
        row.updatedAt = now
        purchase.update(row)
        return .entitled(row)
    }

    /// The client confirms it has the whole file. With `handedOff` (the bytes came from an object
    /// store by presigned redirect, so Stockroom never saw the body end) a verified transaction is
    /// recorded delivered and acknowledged in the one change.
    public static func acknowledge(_ transactionID: String, purchase: inout PurchaseWork, handedOff: Bool = false, now: Date) throws
        -> LedgerDecision
    {
        guard var row = purchase[transactionID] else { return .refused(.unknownTransaction(transactionID)) }
        if purchase.isRevoked { return .refused(.revoked(transactionID: transactionID)) }
        switch row.state {
        case .acknowledged:
            return .entitled(row)
        case .verified where handedOff:
            try move(&row, to: .delivered, at: now)
            try move(&row, to: .acknowledged, at: now)
            row.updatedAt = now
            return .entitled(purchase.update(row))
        case .delivered:
            try move(&row, to: .acknowledged, at: now)
            row.updatedAt = now
            return .entitled(purchase.update(row))
        default:
            return .refused(.notDelivered(row.state))
        }
    }

    /// A re-verification refused the stored proof: rejected, if the proof is still that one.
    public static func reject(_ row: inout Fulfilment, digest: String?, reason: String, now: Date) -> Bool {
        guard row.state.allowedNext.contains(.rejected), digest == nil || row.proofDigest == digest else { return false }
        row.state = .rejected
        row.lastError = reason
        row.updatedAt = now
        return true
    }

    /// Revokes every transaction of the purchase for `cause`; returns those newly revoked.
    public static func revoke(
        _ revoked: RevokedPurchase, cause: RevocationCause, reason: String, purchase: inout PurchaseWork, now: Date
    ) throws -> [Fulfilment] {
        if purchase[revoked.transactionID] == nil, revoked.productID != nil {
            // The new row carries every cause standing on the purchase as well as this one: a
            // restore first seen revoked by a refund, on a purchase an operator revoked, must not
            // come back when the refund is reversed while the operator's revocation stands.
            var (byOperator, byRefund) = purchase.standingRevocation
            switch cause {
            case .operatorAction: byOperator = byOperator ?? now
            case .refund: byRefund = byRefund ?? now
            }
            insertRevoked(revoked, causes: (byOperator, byRefund), reason: reason, purchase: &purchase, now: now)
        }
        var changed: [Fulfilment] = []
        for var row in purchase.all {
            let wasRevoked = row.state == .revoked
            let newCause: Bool
            switch cause {
            case .operatorAction:
                newCause = row.revokedByOperatorAt == nil
                row.revokedByOperatorAt = row.revokedByOperatorAt ?? now
            case .refund:
                newCause = row.revokedByRefundAt == nil
                row.revokedByRefundAt = row.revokedByRefundAt ?? now
            }
            if !wasRevoked { try move(&row, to: .revoked, at: now) }
            // A cause newly set on a row already revoked for the other is a change too: its
            // reason is the row's latest, and its event (refunded, revoked) is written.
            if newCause || !wasRevoked { row.lastError = reason }
            row.updatedAt = now
            let stored = purchase.update(row)
            if !wasRevoked { changed.append(stored) }
        }
        return changed
    }

    /// Lifts one cause of revocation; a row whose other cause still stands stays revoked.
    public static func lift(_ cause: RevocationCause, reason: String, purchase: inout PurchaseWork, now: Date) throws -> [Fulfilment] {
        var lifted: [Fulfilment] = []
        for var row in purchase.all {
            switch cause {
            case .operatorAction:
                guard row.revokedByOperatorAt != nil else { continue }
                row.revokedByOperatorAt = nil
            case .refund:
                guard row.revokedByRefundAt != nil else { continue }
                row.revokedByRefundAt = nil
            }
            let lifts = row.state == .revoked && row.revokedByOperatorAt == nil && row.revokedByRefundAt == nil
            if lifts {
                try move(&row, to: .verified, at: now)
                row.verifiedAt = now
                row.lastError = reason
            }
            row.updatedAt = now
            let stored = purchase.update(row)
            if lifts { lifted.append(stored) }
        }
        return lifted
    }

    /// Counts a download attempt's bytes, adds those that went out to the row's `sentBytes`, and
    /// keeps how it ended. A verified transaction is delivered once every byte of the file went
    /// out, over however many attempts: never by one range that reaches the end.
    ///
    /// A row from before the ledger kept its bytes (`sentBytes` nil) starts from none: it may
    /// need a whole copy again, never a false `delivered`.
    public static func recordDelivery(_ row: inout Fulfilment, report: DeliveryReport, fileSize: Int64, now: Date) {
        let (sum, overflow) = row.bytesDelivered.addingReportingOverflow(report.bytesSent)
        row.bytesDelivered = overflow ? .max : sum
        var sent = row.sentBytes ?? SentBytes()
        if let version = report.version, version != row.sentVersion {
            // Bytes of another version of the content never add up with these.
            if row.sentVersion != nil { sent = SentBytes() }
            row.sentVersion = version
        }
        if let range = report.sent { sent.add(range) }
        row.sentBytes = sent
        row.lastDeliveryEnding = report.ending
        let whole = fileSize <= 0 ? report.complete : sent.covers(size: fileSize)
        if whole, row.state == .verified {
            row.state = .delivered
            row.deliveredAt = now
        }
        row.updatedAt = now
    }

    /// A presigned URL answered a download: the object store sends the bytes from here.
    public static func recordHandOff(_ row: inout Fulfilment, now: Date) {
        row.handedOffAt = now
        row.updatedAt = now
    }

    // MARK: Helpers

    private static func insertRevoked(
        _ revoked: RevokedPurchase, causes: (byOperator: Date?, byRefund: Date?), reason: String, purchase: inout PurchaseWork, now: Date
    ) {
        var row = newRow(revoked, state: .revoked, now: now)
        row.revokedAt = now
        row.revokedByOperatorAt = causes.byOperator
        row.revokedByRefundAt = causes.byRefund
        row.lastError = reason
        purchase.insert(row)
    }

    private static func newRow(_ revoked: RevokedPurchase, state: FulfilmentState, now: Date) -> Fulfilment {
        Fulfilment(
            transactionID: revoked.transactionID, originalTransactionID: revoked.originalTransactionID,
            productID: revoked.productID ?? "", bundleID: revoked.bundleID ?? "", environment: revoked.environment,
            proofKind: revoked.proofKind, proof: revoked.proof ?? "", proofDigest: revoked.proofDigest, appAccountToken: nil,
            expiresAt: nil, state: state, verifiedAt: nil, attempts: 0, bytesDelivered: 0, lastError: nil, createdAt: now,
            updatedAt: now, deliveredAt: nil, acknowledgedAt: nil, revokedAt: nil, revokedByOperatorAt: nil, revokedByRefundAt: nil,
            sentBytes: SentBytes())
    }

    /// The one place a state changes: checks the machine, stamps the matching time.
    static func move(_ row: inout Fulfilment, to state: FulfilmentState, at now: Date) throws {
        guard row.state.allowedNext.contains(state) else {
            throw LedgerError.illegalTransition(transactionID: row.transactionID, from: row.state, to: state)
        }
        row.state = state
        switch state {
        case .delivered: row.deliveredAt = now
        case .acknowledged: row.acknowledgedAt = now
        case .revoked: row.revokedAt = now
        case .verified, .pending, .rejected: break
        }
    }
}

extension RevokedPurchase {
    /// The purchase a verified proof is about, with the proof itself.
    init(_ proof: VerifiedProof) {
        self.init(
            transactionID: proof.transactionID, originalTransactionID: proof.originalTransactionID, productID: proof.productID,
            bundleID: proof.bundleID, environment: proof.environment)
        proofKind = proof.kind
        self.proof = proof.proof
        proofDigest = proof.digest
    }
}
