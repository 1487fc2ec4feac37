import Foundation
import Logging
import StockroomCore

/// The one place that decides whether a request may have a product's bytes.
///
/// It asks Apple first, with no lock held, then lets the ledger decide in one write
/// transaction from the verified answer: a refund or revocation that landed meanwhile is seen
/// there. Routes, the admin API, the CLI and the notification endpoint only translate to and
/// from it. It knows nothing of HTTP.
public struct Entitlements: Sendable {
    public let ledger: any Ledger
    let receipts: any ReceiptVerifier
    let signedTransactions: SignedTransactionVerifier
    /// When credentials exist, StoreKit 2 transactions are confirmed (refunds, expiry) with it.
    public let serverAPI: AppStoreServerAPIClient?
    let tokens: DownloadTokenSigner
    let policy: EntitlementPolicy
    let gate: (any UpstreamGate)?
    /// The clock every decision is taken at (tests pass their own).
    public let now: @Sendable () -> Date
    let logger: Logger
    /// Told when a call to the App Store Server API was queued (the sender wakes up).
    public var serverCallQueued: @Sendable () -> Void = {}

    public init(
        ledger: any Ledger, receipts: any ReceiptVerifier, signedTransactions: SignedTransactionVerifier,
        serverAPI: AppStoreServerAPIClient?, tokens: DownloadTokenSigner, policy: EntitlementPolicy = .init(),
        gate: (any UpstreamGate)? = nil, now: @escaping @Sendable () -> Date = { Date() },
        logger: Logger = Logger(label: "stockroom.entitlements")
    ) {
        self.ledger = ledger
        self.receipts = receipts
        self.signedTransactions = signedTransactions
        self.serverAPI = serverAPI
        self.tokens = tokens
        self.policy = policy
        self.gate = gate
        self.now = now
        self.logger = logger
    }

    /// Decides a download request; an entitled one keeps the consent the app sent with it.
    public func judge(_ request: EntitlementRequest) async throws -> EntitlementVerdict {
        let verdict = try await judgeProof(request)
        if case .entitled(let row, _) = verdict, let consented = request.customerConsented, row.customerConsented != consented {
            try await ledger.recordConsent(row.transactionID, consented: consented, now: now())
        }
        return verdict
    }

    private func judgeProof(_ request: EntitlementRequest) async throws -> EntitlementVerdict {
        switch request.proof {
        case .receipt(let text):
            guard let proof = ReceiptProof.parse(text) else {
                StockroomMetrics.verification(proof: "receipt", outcome: "malformed", environment: nil)
                return .refused(.rejected(.malformedReceipt))
            }
            return try await judge(receipt: proof, request)
        case .signedTransaction(let jws):
            return try await judge(signed: jws, request)
        }
    }

    // MARK: Receipts

    private func judge(receipt proof: ReceiptProof, _ request: EntitlementRequest) async throws -> EntitlementVerdict {
        let candidates = Self.candidates(request, proof)
        if let served = try await recentlyVerified(candidates, digest: proof.digest, request) { return served }
        if let gate, let wait = gate.admit(request.client) { return .limited(retryAfter: wait) }
        var verdict = await receipts.verify(
            proof, productID: request.productID, transactionID: request.transactionID, freshness: .cachedAllowed)
        if case .invalid(.transactionNotInReceipt) = verdict, let original = request.originalTransactionID {
            // The same answer of Apple's (cached), read for the product instead of the ID.
            let byProduct = await receipts.verify(proof, productID: request.productID, transactionID: nil, freshness: .cachedAllowed)
            verdict = Self.inChain(byProduct, original: original) ?? verdict
        }
        StockroomMetrics.verification(
            proof: "receipt", outcome: verdict.metricsOutcome, environment: verdict.environment ?? proof.claimedEnvironment)
        switch verdict {
        case .valid(let receipt):
            guard let verified = VerifiedProof(receipt: receipt, proof: proof) else {
                return .refused(.rejected(.productNotInReceipt(request.productID)))
            }
            return try await decide(verified, request)
        case .invalid(.revoked(let transaction)):
            _ = try await ledger.revoke(
                RevokedPurchase(
                    transactionID: transaction.transactionID, originalTransactionID: transaction.originalTransactionID,
                    productID: transaction.productID, bundleID: nil, environment: nil),
                cause: .refund, reason: "refunded or revoked (verifyReceipt)", now: now())
            return .refused(.revoked(transactionID: transaction.transactionID))
        case .invalid(let reason):
            return .refused(.rejected(reason))
        case .unavailable(let reason, let retryAfter):
            return try await outage(
                candidates, keptUnder: Self.keptUnder(request, proof),
                draft: { id in
                    PendingProofDraft(
                        transactionID: id, digest: proof.digest, kind: .receipt, proof: proof.text, requestedProductID: request.productID,
                        appAccountToken: request.appAccountToken, error: reason, client: request.client)
                }, request, retryAfter: retryAfter)
        }
    }

    /// The verdict on the product's purchase when it belongs to the chain that began with
    /// `original`; nil otherwise (the request's own verdict stands). Apple documents that a
    /// receipt's `transaction_id` has the format of `SKPaymentTransaction`'s but "the values may
    /// not be the same": a restore's transaction can be missing under the app's ID, never under
    /// its original transaction and product. Only the receipt's own purchases are chosen from,
    /// so nothing is granted that naming no transaction would not grant.
    static func inChain(_ verdict: ReceiptVerdict, original: String) -> ReceiptVerdict? {
        switch verdict {
        case .valid(let receipt): receipt.transaction?.originalTransactionID == original ? verdict : nil
        case .invalid(.revoked(let transaction)), .invalid(.expired(let transaction)):
            transaction.originalTransactionID == original ? verdict : nil
        case .invalid, .unavailable: nil
        }
    }

    /// The transactions a receipt request may be about: the one it names, else those the receipt
    /// claims for the product, newest first. Unverified: they only select rows to compare with.
    static func candidates(_ request: EntitlementRequest, _ proof: ReceiptProof) -> [String] {
        if let named = request.transactionID { return [named] }
        let claimed = proof.claims.filter { $0.productID == request.productID }
            .sorted { ($0.purchaseDate ?? .distantPast) > ($1.purchaseDate ?? .distantPast) }
            .map(\.transactionID).filter(TransactionID.isValid)
        return Array(claimed.prefix(PendingProof.perTransaction))
    }

    /// The transaction an unverifiable receipt is kept under: one the receipt itself claims,
    /// never the request's word alone. A named transaction the receipt does not claim keeps
    /// nothing (one genuine receipt must not fill the ledger under made-up IDs).
    static func keptUnder(_ request: EntitlementRequest, _ proof: ReceiptProof) -> String? {
        let claimed = proof.claims.map(\.transactionID).filter(TransactionID.isValid)
        if let named = request.transactionID { return claimed.contains(named) ? named : nil }
        return candidates(request, proof).first
    }

    // MARK: StoreKit 2

    private func judge(signed jws: String, _ request: EntitlementRequest) async throws -> EntitlementVerdict {
        let verified: VerifiedProof
        switch await VerifiedProof.verifyingOnline(jws, with: signedTransactions) {
        case .success(let proof): verified = proof
        case .failure(.revocationUnavailable):
            // --ocsp hard, and no OCSP answer: the client tries again later.
            StockroomMetrics.verification(proof: "signedTransaction", outcome: "unavailable", environment: nil)
            return .unavailable(retryAfter: Self.revocationRetryAfter)
        case .failure(let failure):
            StockroomMetrics.verification(proof: "signedTransaction", outcome: "invalid", environment: nil)
            return .refused(.signedTransactionRejected(failure))
        }
        if let named = request.transactionID, named != verified.transactionID {
            return .refused(.rejected(.transactionNotInReceipt(named)))
        }
        // The account Apple signed into the presented proof binds it, whatever the row on record
        // says (a notification may have recorded it first): checked before any path serves it.
        if let signed = verified.appAccountToken, request.appAccountToken != signed {
            StockroomMetrics.verification(proof: "signedTransaction", outcome: "invalid", environment: verified.environment)
            return .refused(.claimed(transactionID: verified.transactionID))
        }
        // Xcode's transactions (accepted only with --accept-xcode) are unknown upstream: decided locally.
        guard let serverAPI, !XcodeTransactionVerifier.isXcodeShaped(verified.proof) else {
            StockroomMetrics.verification(proof: "signedTransaction", outcome: "valid", environment: verified.environment)
            return try await decide(verified, request)
        }
        if let served = try await recentlyVerified([verified.transactionID], digest: verified.digest, request) { return served }
        if verified.revokedAt == nil, let served = try await recentlyVouched(verified, request) { return served }
        if let gate, let wait = gate.admit(request.client) { return .limited(retryAfter: wait) }
        let lookup = await serverAPI.transaction(verified.transactionID)
        StockroomMetrics.verification(proof: "signedTransaction", outcome: lookup.metricsOutcome, environment: verified.environment)
        switch lookup {
        case .found(let info, _):
            guard case .success(let current) = await VerifiedProof.verifyingOnline(info, with: signedTransactions) else {
                return try await outage(
                    [verified.transactionID], keptUnder: verified.transactionID,
                    draft: pendingDraft(verified, request, "the API's transaction does not verify"),
                    request, retryAfter: .seconds(60))
            }
            return try await decide(verified.updated(by: current), request)
        case .notFound:
            return .refused(.rejected(.transactionNotInReceipt(verified.transactionID)))
        case .unavailable(let reason, let retryAfter):
            // The refund check cannot be had: only the proof on record is served.
            return try await outage(
                [verified.transactionID], keptUnder: verified.transactionID, draft: pendingDraft(verified, request, reason), request,
                retryAfter: retryAfter)
        }
    }

    /// How long a client waits when `--ocsp hard` had no answer: a little over the time a failed
    /// OCSP attempt is remembered.
    static let revocationRetryAfter: Duration = .seconds(60)

    private func pendingDraft(_ proof: VerifiedProof, _ request: EntitlementRequest, _ error: String)
        -> @Sendable (String) -> PendingProofDraft
    {
        { id in
            PendingProofDraft(
                transactionID: id, digest: proof.digest, kind: .signedTransaction, proof: proof.proof,
                requestedProductID: request.productID, appAccountToken: request.appAccountToken, error: error, client: request.client)
        }
    }

    // MARK: Shared steps

    /// The ledger decides on a verified proof.
    private func decide(_ proof: VerifiedProof, _ request: EntitlementRequest) async throws -> EntitlementVerdict {
        let proof = policy.proratedRefund == .keep ? proof.keepingProratedRefund() : proof
        if proof.environment == .sandbox, !policy.allowsSandbox, proof.revokedAt == nil {
            return .refused(.sandboxNotAllowed(transactionID: proof.transactionID))
        }
        let terms = ProofTerms(
            requestedProductID: request.productID, appAccountToken: request.appAccountToken, checksAccount: true, countsAttempt: true,
            customerConsented: request.customerConsented)
        switch try await ledger.recordProof(proof, terms: terms, now: now()) {
        case .entitled(let row):
            // Binding an account Apple's transaction lacks may have queued Set App Account Token in the same write.
            if proof.appAccountToken == nil, row.appAccountToken != nil { serverCallQueued() }
            return entitled(row)
        case .refused(let refusal): return .refused(refusal)
        }
    }

    /// A proof on record, verified within the re-verify interval, needs no new upstream call.
    private func recentlyVerified(_ candidates: [String], digest: String, _ request: EntitlementRequest) async throws -> EntitlementVerdict?
    {
        let now = now()
        let interval = Double(policy.reverifyAfter.components.seconds)
        for id in candidates {
            guard let row = try await ledger.fulfilment(id), row.proofDigest == digest, let verifiedAt = row.verifiedAt,
                now.timeIntervalSince(verifiedAt) < interval
            else { continue }
            if let served = try await ledger.serveRecordedProof(
                RecordedProofRequest(
                    transactionID: id, digest: digest, productID: request.productID, appAccountToken: request.appAccountToken),
                now: now)
            {
                StockroomMetrics.verification(proof: served.proofKind.rawValue, outcome: "recorded", environment: served.environment)
                return entitled(served)
            }
        }
        return nil
    }

    /// An Apple-signed JWS of a transaction whose record Apple vouched for within the re-verify
    /// interval (a ONE_TIME_CHARGE notification, or the API), through another signed copy:
    /// the proof on record is served, with its product, account and revocation checks, and no
    /// upstream call. The request's own JWS was verified against the root just before.
    private func recentlyVouched(_ verified: VerifiedProof, _ request: EntitlementRequest) async throws -> EntitlementVerdict? {
        guard let row = try await ledger.fulfilment(verified.transactionID), row.proofKind == .signedTransaction,
            let recorded = row.proofDigest, recorded != verified.digest, row.originalTransactionID == verified.originalTransactionID
        else { return nil }
        return try await recentlyVerified([verified.transactionID], digest: recorded, request)
    }

    /// The App Store cannot be asked: only the very proof on record of an entitled transaction
    /// is served; any other proof is kept apart under `keptUnder` (a transaction it claims),
    /// within the policy's bounds, and the client retries later.
    private func outage(
        _ candidates: [String], keptUnder: String?, draft: @Sendable (String) -> PendingProofDraft, _ request: EntitlementRequest,
        retryAfter: Duration
    ) async throws -> EntitlementVerdict {
        let now = now()
        for id in candidates {
            let probe = draft(id)
            if let served = try await ledger.serveRecordedProof(
                RecordedProofRequest(
                    transactionID: id, digest: probe.digest, productID: request.productID, appAccountToken: request.appAccountToken),
                now: now)
            {
                logger.warning("serving the proof on record while the App Store is unavailable", metadata: ["transaction": .string(id)])
                return entitled(served)
            }
        }
        if let keptUnder, TransactionID.isValid(keptUnder) {
            let keeping = try await ledger.keepPendingProof(draft(keptUnder), bounds: policy.pendingProofs, now: now)
            if !keeping.isKept {
                logger.notice(
                    "pending proof not kept: a bound is reached",
                    metadata: ["transaction": .string(keptUnder), "bound": .string(keeping.rawValue), "client": .string(request.client)])
            }
        }
        return .unavailable(retryAfter: retryAfter)
    }

    func entitled(_ row: Fulfilment) -> EntitlementVerdict {
        .entitled(row, token: tokens.token(transactionID: row.transactionID, productID: row.productID, now: now()))
    }
}

extension ReceiptVerdict {
    /// The `outcome` label of `stockroom_verifications_total`.
    var metricsOutcome: String {
        switch self {
        case .valid: "valid"
        case .invalid(.revoked): "revoked"
        case .invalid(.expired): "expired"
        case .invalid: "invalid"
        case .unavailable: "unavailable"
        }
    }

    /// The environment Apple answered for, when it did.
    var environment: StoreEnvironment? {
        if case .valid(let receipt) = self { return receipt.environment }
        return nil
    }
}

extension AppStoreServerAPIClient.Lookup {
    /// The `outcome` label of `stockroom_verifications_total`.
    var metricsOutcome: String {
        switch self {
        case .found: "valid"
        case .notFound: "invalid"
        case .unavailable: "unavailable"
        }
    }
}
