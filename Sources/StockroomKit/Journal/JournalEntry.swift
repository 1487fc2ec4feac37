import Foundation

/// What survives a killed app for one transaction: enough to resume, re-prove, check and ack.
///
/// One small JSON file per transaction, replaced atomically on every change (`Journal`).
public struct JournalEntry: Sendable, Codable, Equatable {
    /// Where the delivery stands.
    public enum Stage: String, Sendable, Codable, Comparable {
        /// Bytes are arriving in the partial file (or none yet).
        case downloading
        /// The whole file matched `Repr-Digest` and was moved into place; not acknowledged yet.
        case placed
        /// The server took the acknowledgement: safe to finish, not yet reported to the app.
        case acknowledged
        /// Safe-to-finish was reported: it is never reported again.
        case reported

        private var order: Int {
            switch self {
            case .downloading: 0
            case .placed: 1
            case .acknowledged: 2
            case .reported: 3
            }
        }

        public static func < (lhs: Stage, rhs: Stage) -> Bool { lhs.order < rhs.order }
    }

    /// How a new download token is obtained once the one on record expires.
    public enum Renewal: Sendable, Codable, Equatable {
        /// `POST /v1/downloads` again with the purchase's own proof.
        case download(Proof)
        /// `POST /v1/restores` again with this signed transaction of the customer.
        case restore(signedTransaction: String)
    }

    public var transactionID: String
    public var originalTransactionID: String?
    public var productID: String
    public var renewal: Renewal
    public var appAccountToken: UUID?
    public var consent: Bool?
    /// Where the checked file goes.
    public var destination: String
    /// The transaction the server delivers, when it names another than `transactionID`
    /// (`X-Transaction-Id`): a restore that the receipt lists under its original transaction.
    public var serverTransactionID: String?
    /// The download token (`X-Download-Token`) and resumable URL path on the server (`Location`,
    /// or a redirect's `Content-Location`), once granted. Never an object store's presigned URL:
    /// that is a credential, asked for afresh each time.
    public var token: String?
    public var location: String?
    /// The strong ETag, size and `Repr-Digest` (base64 SHA-256) of the representation being downloaded.
    public var etag: String?
    public var expectedSize: Int64?
    public var digest: String?
    public var stage: Stage = .downloading
    /// Downloads that completed but failed the digest check, in a row.
    public var digestFailures = 0
    /// Retryable failures in a row, for the backoff.
    public var failures = 0
    /// No request before this date (`Retry-After`, or the backoff), also after a relaunch.
    public var notBefore: Date?
    /// The last retryable failure, to answer while waiting for `notBefore`.
    public var lastReasonCode: String?
    public var lastReasonMessage: String?
    /// The receipt was refreshed once for this transaction after a stale-receipt answer.
    public var receiptRefreshed = false

    /// The partial file's path: beside the destination, so the final move is a rename on one volume.
    public var partialPath: String {
        let url = URL(fileURLWithPath: destination)
        return url.deletingLastPathComponent().appendingPathComponent(".\(url.lastPathComponent).\(transactionID).partial").path
    }

    /// The entry with its counters within what the client ever writes: a journal from elsewhere
    /// (an older version, a restored backup) never makes a `+ 1` trap.
    func bounded() -> JournalEntry {
        var entry = self
        entry.failures = min(max(failures, 0), 1_000)
        entry.digestFailures = min(max(digestFailures, 0), 1_000)
        return entry
    }

    /// Forgets the representation being downloaded, so the next request starts from the first byte.
    mutating func forgetRepresentation() {
        etag = nil
        expectedSize = nil
        digest = nil
    }
}
