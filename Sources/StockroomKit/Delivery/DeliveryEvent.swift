import Foundation

/// What a delivery did, step by step: for an app's log, and for tests to see the order of requests.
public enum DeliveryEvent: Sendable, Equatable {
    /// A request went out and its head came back: `POST /v1/downloads` → 200, `GET …/content` from byte 4096 → 206.
    /// A request to an object store (after Stockroom's 303 or 307) has its URL as `path`, without
    /// the query, which holds the presigned signature.
    case response(transactionID: String, method: String, path: String, rangeStart: Int64?, status: Int)
    /// A request got no answer (a refused or dropped connection).
    case transportFailure(transactionID: String, path: String, message: String)
    /// A body stopped before its end, after `bytes` bytes of the file were on disk.
    case interrupted(transactionID: String, bytes: Int64)
    /// The whole file did not match `Repr-Digest`: it was deleted, and is downloaded again.
    case digestMismatch(transactionID: String)
    /// The checked file was moved into place.
    case placed(transactionID: String, file: URL)
    /// `POST …/ack` succeeded.
    case acknowledged(transactionID: String)
    /// The journal entry could not be read (damaged, a link, too large): it was renamed out of
    /// the way, and the purchase starts over from the proof the app supplies.
    case journalEntrySetAside(transactionID: String, reason: String)
    /// An answer broke the rules the client holds the server to (a foreign `Location`, a body
    /// with no length, a name that is no product ID, …): it was not acted on.
    case answerRefused(transactionID: String, reason: String)
}
