import Foundation

/// A fulfilment as operators see it (CLI and admin API): everything but the proof itself, which
/// is shown only by length and digest. Property names are the JSON keys.
public struct OperatorFulfilment: Encodable, Sendable, Equatable {
    public var transactionId: String
    public var originalTransactionId: String
    public var productId: String
    public var bundleId: String
    public var state: String
    public var attempts: Int
    public var bytesDelivered: Int64
    public var proofKind: String
    public var proofLength: Int
    public var proofSha256: String
    public var createdAt: String
    public var updatedAt: String
    public var safeToFinish: Bool
    public var environment: String?
    public var verifiedAt: String?
    public var deliveredAt: String?
    public var acknowledgedAt: String?
    public var revokedAt: String?
    public var lastError: String?
    public var expiresAt: String?
    public var appAccountBound: Bool
    public var revokedByOperatorAt: String?
    public var revokedByRefundAt: String?
    public var finishedAt: String?
    public var customerConsented: Bool?
    /// The app download the signed transaction names (Apple's `appTransactionId`), on the detail view.
    public var appTransactionId: String?
    /// When consent was rescinded for that download (RESCIND_CONSENT): no consumption data is
    /// sent for the purchase since, whatever `customerConsented` says. On the detail view.
    public var consentRescindedAt: String?
    /// The bytes of the content that went out, each once, as `first-last` ranges
    /// (`0-1023,4096-8191`, empty when none); absent on a row that downloaded before the ledger
    /// kept them (schema v12).
    public var sentBytes: String?
    /// How the latest download attempt ended: `complete`, `client` (it went away or read too
    /// slowly), `server` (Stockroom's side failed).
    public var lastDeliveryEnding: String?
    /// When a presigned URL last answered a download (`--content-delivery redirect`).
    public var handedOffAt: String?
    /// The download log, on the detail view only.
    public var downloadAttempts: [Attempt]?
    /// The calls owed to Apple for the transaction, on the detail view only: one skipped says why
    /// (a consumption answer the ledger cannot support is never sent).
    public var serverCalls: [Call]?

    /// One download, as the log keeps it.
    public struct Attempt: Encodable, Sendable, Equatable {
        public var bytes: Int64
        public var outcome: String
        public var at: String
        /// `first-last`, for a range request.
        public var range: String?
    }

    /// One call owed to Apple, as the queue keeps it.
    public struct Call: Encodable, Sendable, Equatable {
        public var kind: String
        public var status: String
        public var attempts: Int
        public var createdAt: String
        public var sentAt: String?
        /// Why it is waiting, was refused, or was not made.
        public var lastError: String?
        /// The notification that asked for it (a refund request's UUID).
        public var requestedBy: String?
    }

    /// The list view (`attempts` nil), or the detail view with the download log, the calls owed
    /// to Apple and any rescission of consent.
    public init(
        _ row: Fulfilment, attempts: [DownloadAttempt]? = nil, calls: [ServerCall]? = nil, rescission: ConsentRescission? = nil
    ) {
        let date = OperatorJSON.date
        transactionId = row.transactionID
        originalTransactionId = row.originalTransactionID
        productId = row.productID
        bundleId = row.bundleID
        state = row.state.rawValue
        self.attempts = row.attempts
        bytesDelivered = row.bytesDelivered
        proofKind = row.proofKind.rawValue
        proofLength = row.proof.utf8.count
        proofSha256 = ByteEncoding.hex(SHA256.hash(Array(row.proof.utf8)))
        createdAt = date(row.createdAt)
        updatedAt = date(row.updatedAt)
        safeToFinish = row.state.isSafeToFinish
        environment = row.environment?.rawValue
        verifiedAt = row.verifiedAt.map(date)
        deliveredAt = row.deliveredAt.map(date)
        acknowledgedAt = row.acknowledgedAt.map(date)
        revokedAt = row.revokedAt.map(date)
        lastError = row.lastError
        expiresAt = row.expiresAt.map(date)
        appAccountBound = row.appAccountToken != nil
        revokedByOperatorAt = row.revokedByOperatorAt.map(date)
        revokedByRefundAt = row.revokedByRefundAt.map(date)
        finishedAt = row.finishedAt.map(date)
        customerConsented = row.customerConsented
        sentBytes = row.sentBytes?.description
        lastDeliveryEnding = row.lastDeliveryEnding?.rawValue
        handedOffAt = row.handedOffAt.map(date)
        serverCalls = calls?.sorted { ($0.id ?? 0) < ($1.id ?? 0) }.map { call in
            Call(
                kind: call.kind.rawValue, status: call.status.rawValue, attempts: call.attempts, createdAt: date(call.createdAt),
                sentAt: call.sentAt.map(date), lastError: call.lastError, requestedBy: call.requestedBy)
        }
        if attempts != nil { appTransactionId = row.appTransactionID }
        consentRescindedAt = rescission.map { date($0.rescindedAt) }
        downloadAttempts = attempts?.map { attempt in
            let range = attempt.rangeStart.flatMap { start in attempt.rangeEnd.map { "\(start)-\($0)" } }
            return Attempt(bytes: attempt.bytes, outcome: attempt.outcome.rawValue, at: date(attempt.at), range: range)
        }
    }
}

/// A kept pending proof as operators see it, without the proof itself.
public struct PendingProofView: Encodable, Sendable, Equatable {
    public var transactionId: String
    public var status: String
    public var proofKind: String
    public var proofSha256: String
    public var requestedProductId: String
    public var createdAt: String
    public var updatedAt: String
    public var lastError: String?

    public init(_ pending: PendingProof) {
        transactionId = pending.transactionID
        status = pending.status.rawValue
        proofKind = pending.proofKind.rawValue
        proofSha256 = pending.proofDigest
        requestedProductId = pending.requestedProductID
        createdAt = OperatorJSON.date(pending.createdAt)
        updatedAt = OperatorJSON.date(pending.updatedAt)
        lastError = pending.lastError
    }
}
