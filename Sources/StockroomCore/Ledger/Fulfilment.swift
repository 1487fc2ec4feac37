import Foundation

/// One App Store transaction the ledger holds an entitlement for, with the proof that verified it.
///
/// Every field that decides what may be downloaded (product, transaction, original transaction,
/// bundle, environment, expiry) comes from a verified proof, never from a request body.
public struct Fulfilment: Sendable, Equatable, Codable {
    public var transactionID: String
    public var originalTransactionID: String
    public var productID: String
    public var bundleID: String
    /// The App Store environment that vouched for it (nil only on rows older than schema v4).
    public var environment: StoreEnvironment?
    public var proofKind: ProofKind
    /// The normalised receipt or the StoreKit 2 JWS, kept for re-verification. Never logged.
    public var proof: String
    /// Hex SHA-256 of `proof`: during an outage only a request carrying this very proof is served.
    public var proofDigest: String?
    /// The app account (StoreKit 2 `appAccountToken`) the purchase is bound to; every later
    /// claim must carry the same one.
    public var appAccountToken: String?
    /// When a subscription's entitlement ends (auto-renewable and non-renewing products).
    public var expiresAt: Date?
    public var state: FulfilmentState
    public var verifiedAt: Date?
    /// Download requests made for it (POSTs and resumes).
    public var attempts: Int
    /// Bytes sent over all attempts (a byte sent twice counts twice).
    public var bytesDelivered: Int64
    public var lastError: String?
    public var createdAt: Date
    public var updatedAt: Date
    public var deliveredAt: Date?
    public var acknowledgedAt: Date?
    public var revokedAt: Date?
    /// Set while an operator's revocation stands; only `reinstate` clears it.
    public var revokedByOperatorAt: Date?
    /// Set while Apple's refund or revocation stands; only `REFUND_REVERSED` clears it.
    public var revokedByRefundAt: Date?
    /// When Stockroom finished the transaction with Apple (`POST …/finish`); nil until then.
    public var finishedAt: Date? = nil
    /// Whether the customer agreed that consumption data may go to Apple with a refund request,
    /// as the app last said on a verified download request; nil when it never said.
    public var customerConsented: Bool? = nil
    /// The sequence number of the latest event about this transaction (`LedgerEvent`); nil before the first.
    public var eventSequence: Int? = nil
    /// Which bytes of the content went out over every attempt, each once; nil on a row that
    /// downloaded before schema v12, when the ledger did not keep them. `delivered` means these
    /// cover the whole file.
    public var sentBytes: SentBytes? = nil
    /// The content version (its ETag) `sentBytes` are bytes of: a new version starts them afresh,
    /// so bytes of two versions never add up to a delivery.
    public var sentVersion: String? = nil
    /// How the latest download attempt ended; nil while one is under way (each attempt clears
    /// it when it starts), and before the first.
    public var lastDeliveryEnding: DeliveryEnding? = nil
    /// When a presigned URL last answered a download (`--content-delivery redirect`): the object
    /// store sends the bytes, and only the app's acknowledgement says they arrived.
    public var handedOffAt: Date? = nil

    public init(
        transactionID: String, originalTransactionID: String, productID: String, bundleID: String, environment: StoreEnvironment?,
        proofKind: ProofKind, proof: String, proofDigest: String?, appAccountToken: String?, expiresAt: Date?, state: FulfilmentState,
        verifiedAt: Date?, attempts: Int, bytesDelivered: Int64, lastError: String?, createdAt: Date, updatedAt: Date, deliveredAt: Date?,
        acknowledgedAt: Date?, revokedAt: Date?, revokedByOperatorAt: Date?, revokedByRefundAt: Date?, finishedAt: Date? = nil,
        customerConsented: Bool? = nil, eventSequence: Int? = nil, sentBytes: SentBytes? = nil, sentVersion: String? = nil,
        lastDeliveryEnding: DeliveryEnding? = nil, handedOffAt: Date? = nil
    ) {
        (self.transactionID, self.originalTransactionID, self.productID, self.bundleID) = (
            transactionID, originalTransactionID, productID, bundleID
        )
        (self.environment, self.proofKind, self.proof, self.proofDigest) = (environment, proofKind, proof, proofDigest)
        (self.appAccountToken, self.expiresAt, self.state, self.verifiedAt) = (appAccountToken, expiresAt, state, verifiedAt)
        (self.attempts, self.bytesDelivered, self.lastError) = (attempts, bytesDelivered, lastError)
        (self.createdAt, self.updatedAt, self.deliveredAt, self.acknowledgedAt) = (createdAt, updatedAt, deliveredAt, acknowledgedAt)
        (self.revokedAt, self.revokedByOperatorAt, self.revokedByRefundAt) = (revokedAt, revokedByOperatorAt, revokedByRefundAt)
        (self.finishedAt, self.customerConsented, self.eventSequence) = (finishedAt, customerConsented, eventSequence)
        (self.sentBytes, self.sentVersion, self.lastDeliveryEnding, self.handedOffAt) = (
            sentBytes, sentVersion, lastDeliveryEnding, handedOffAt
        )
    }

    /// What kind of proof of purchase is stored.
    public enum ProofKind: String, Sendable, Codable {
        /// An app receipt or an old-style transaction receipt, verified with verifyReceipt.
        case receipt
        /// A StoreKit 2 JWS, verified locally (and with the App Store Server API).
        case signedTransaction
    }

    /// Whether the entitlement has run out at `now`.
    public func isExpired(at now: Date) -> Bool {
        expiresAt.map { $0 <= now } ?? false
    }

    public enum CodingKeys: String, CodingKey, CaseIterable {
        case transactionID = "transaction_id", originalTransactionID = "original_transaction_id"
        case productID = "product_id", bundleID = "bundle_id", environment, proofKind = "proof_kind", proof
        case state, verifiedAt = "verified_at", attempts, bytesDelivered = "bytes_delivered", lastError = "last_error"
        case createdAt = "created_at", updatedAt = "updated_at", deliveredAt = "delivered_at"
        case acknowledgedAt = "acknowledged_at", revokedAt = "revoked_at"
        case proofDigest = "proof_digest", appAccountToken = "app_account_token", expiresAt = "expires_at"
        case revokedByOperatorAt = "revoked_by_operator_at", revokedByRefundAt = "revoked_by_refund_at"
        case finishedAt = "finished_at", customerConsented = "customer_consented", eventSequence = "event_sequence"
        case sentBytes = "sent_bytes", sentVersion = "sent_version", lastDeliveryEnding = "last_delivery_ending"
        case handedOffAt = "handed_off_at"
    }
}

/// One download attempt: what range was asked for, what went out, how it ended.
///
/// The log keeps the most recent `DownloadAttempt.keptPerTransaction` per transaction; the
/// fulfilment's counters keep the totals.
public struct DownloadAttempt: Sendable, Equatable, Codable {
    /// How many attempts the log keeps per transaction; older ones are dropped.
    public static let keptPerTransaction = 20

    public var id: Int64?
    public var transactionID: String
    public var rangeStart: Int64?
    public var rangeEnd: Int64?
    public var bytes: Int64
    public var outcome: Outcome
    public var at: Date

    public enum Outcome: String, Sendable, Codable {
        /// The whole planned body went out.
        case complete
        /// The client went away (or the stream failed) part way.
        case interrupted
    }

    public enum CodingKeys: String, CodingKey, CaseIterable {
        case id, transactionID = "transaction_id", rangeStart = "range_start", rangeEnd = "range_end", bytes, outcome, at
    }
}
