import Foundation

/// Something that happened to a purchase, as the ledger records it: written in the same database
/// transaction as the change it reports, so that none is lost to a crash and none reports a change
/// that did not commit. The ledger's event log (`ledger_events`) is what webhooks send, each event
/// to each endpoint (`WebhookDelivery`), and what an operator reads of a transaction's history.
///
/// The body is built once, when the event is written, and kept verbatim: every delivery of an
/// event, to every endpoint, on every try, sends the same bytes under the same ID.
public struct LedgerEvent: Sendable, Equatable, Codable {
    public var id: Int64?
    /// The event's stable ID (a UUID), the same on every delivery: what a receiver de-duplicates on.
    public var eventID: String
    public var type: EventType
    public var transactionID: String
    /// The event's place among its transaction's events, from 1: what a receiver orders them by.
    public var sequence: Int
    /// The JSON body sent, verbatim (`LedgerEvent.Body`).
    public var body: String
    public var createdAt: Date
    /// Whether a delivery to each configured webhook endpoint was queued for it (`fanOut`).
    public var fannedOut: Bool

    public enum CodingKeys: String, CodingKey, CaseIterable {
        case id, eventID = "event_id", type, transactionID = "transaction_id", sequence, body, createdAt = "created_at"
        case fannedOut = "fanned_out"
    }

    /// What happened.
    public enum EventType: String, Sendable, Codable, CaseIterable {
        /// A verified proof made the transaction entitled (a download request, or an operator's re-verification).
        case verified = "purchase.verified"
        /// A restore (the App Store's transaction history) made the transaction entitled.
        case restored = "purchase.restored"
        /// A whole copy of the content went out (or an object store handed it over).
        case delivered = "purchase.delivered"
        /// The app confirmed it has the content.
        case acknowledged = "purchase.acknowledged"
        /// Stockroom finished the transaction with Apple (Finish Transaction accepted).
        case finished = "purchase.finished"
        /// Apple refunded or revoked the purchase: its content is no longer served.
        case refunded = "purchase.refunded"
        /// An operator revoked the purchase.
        case revoked = "purchase.revoked"
        /// The purchase is entitled again: its last standing revocation was lifted (an operator's
        /// reinstatement, or Apple's reversed refund).
        case reinstated = "purchase.reinstated"
        /// One cause of a revocation was lifted while the other stands: the purchase stays revoked.
        case revocationLifted = "purchase.revocation_lifted"
        /// A re-verification found the stored proof no longer valid.
        case rejected = "purchase.rejected"
        /// Stockroom answered Apple's refund request with consumption information.
        case consumptionAnswered = "consumption.answered"
    }

    /// The JSON an event is sent as. Property names are its keys.
    public struct Body: Codable, Sendable, Equatable {
        public var id: String
        public var type: String
        /// When it happened, RFC 3339 in UTC.
        public var createdAt: String
        public var sequence: Int
        public var transactionId: String
        public var originalTransactionId: String
        public var productId: String
        public var bundleId: String
        public var environment: String?
        public var appAccountToken: String?
        /// The transaction's state after the change.
        public var state: String
        /// Why, where there is more to say (a revocation's reason), cut to `LedgerEvent.detailLimit` characters.
        public var detail: String?
        /// Whose revocation a refunded, revoked, reinstated or revocation-lifted event is about:
        /// `refund` (Apple's refund or revocation) or `operator`.
        public var cause: String? = nil

        /// The JSON text, keys sorted, as `JSONEncoder` with `.sortedKeys` and
        /// `.withoutEscapingSlashes` writes it (a test holds the two equal), written directly into
        /// bytes: it is built with every change a download makes.
        public var json: String {
            var text = JSONText(capacity: 512)
            var first = true
            func key(_ name: StaticString) {
                if !first { text.raw(",") }
                first = false
                text.raw("\"")
                text.raw(name)
                text.raw("\":")
            }
            func field(_ name: StaticString, _ value: String?) {
                guard let value else { return }
                key(name)
                text.string(value)
            }
            text.raw("{")
            field("appAccountToken", appAccountToken)
            field("bundleId", bundleId)
            field("cause", cause)
            field("createdAt", createdAt)
            field("detail", detail)
            field("environment", environment)
            field("id", id)
            field("originalTransactionId", originalTransactionId)
            field("productId", productId)
            key("sequence")
            text.number(sequence)
            field("state", state)
            field("transactionId", transactionId)
            field("type", type)
            text.raw("}")
            return text.text
        }
    }

    /// The longest `detail` an event carries, in Unicode scalars (JSON Schema's `maxLength`): a
    /// longer reason is cut to it.
    public static let detailLimit = 500

    /// A new event about `row` as it stands after the change, `sequence` its place among the
    /// transaction's events.
    public static func about(
        _ row: Fulfilment, type: EventType, sequence: Int, detail: String? = nil, cause: RevocationCause? = nil, now: Date
    ) -> LedgerEvent {
        let eventID = UUID().uuidString.lowercased()
        let body = Body(
            id: eventID, type: type.rawValue, createdAt: RFC3339.utc(now), sequence: sequence, transactionId: row.transactionID,
            originalTransactionId: row.originalTransactionID, productId: row.productID, bundleId: row.bundleID,
            environment: row.environment?.rawValue, appAccountToken: row.appAccountToken, state: row.state.rawValue,
            detail: detail.map { String(String.UnicodeScalarView($0.unicodeScalars.prefix(LedgerEvent.detailLimit))) },
            cause: cause?.rawValue)
        return LedgerEvent(
            id: nil, eventID: eventID, type: type, transactionID: row.transactionID, sequence: sequence, body: body.json, createdAt: now,
            fannedOut: false)
    }
}

/// One event's delivery to one webhook endpoint: a durable queue, leased to one sender at a time,
/// so several instances sharing a PostgreSQL ledger send each event to each endpoint once (at
/// least once: a crash between the send and its record sends it again, under the same event ID).
public struct WebhookDelivery: Sendable, Equatable, Codable {
    public var id: Int64?
    /// The event (`ledger_events.id`).
    public var event: Int64
    /// The endpoint's name, as configured.
    public var endpoint: String
    public var transactionID: String
    /// The event's sequence: a delivery waits while an earlier event of its transaction is queued
    /// for the same endpoint, so each endpoint hears a transaction's events in order.
    public var sequence: Int
    public var status: Status
    /// Tries that did not deliver it.
    public var attempts: Int
    /// Not sent before this time (backoff, or the receiver's `Retry-After`).
    public var dueAt: Date
    /// Held by one sender until this time.
    public var leasedUntil: Date?
    public var lastError: String?
    /// The HTTP status of the last answer, if one came.
    public var lastStatus: Int?
    /// When it was queued, or queued again by an operator: the give-up window counts from here.
    public var createdAt: Date
    public var updatedAt: Date
    public var sentAt: Date?

    public enum Status: String, Sendable, Codable, CaseIterable {
        /// Waiting to be sent, or to be sent again.
        case queued
        /// The receiver answered 2xx.
        case sent
        /// Given up (a day of failures, 410 Gone, an endpoint no longer configured): kept for an
        /// operator to redeliver.
        case parked
    }

    public enum CodingKeys: String, CodingKey, CaseIterable {
        case id, event, endpoint, transactionID = "transaction_id", sequence, status, attempts, dueAt = "due_at"
        case leasedUntil = "leased_until", lastError = "last_error", lastStatus = "last_status", createdAt = "created_at"
        case updatedAt = "updated_at", sentAt = "sent_at"
    }

    /// A new queued delivery of `event` to `endpoint`, due now.
    public static func queued(_ event: LedgerEvent, id: Int64, to endpoint: String, now: Date) -> WebhookDelivery {
        WebhookDelivery(
            id: nil, event: id, endpoint: endpoint, transactionID: event.transactionID, sequence: event.sequence, status: .queued,
            attempts: 0, dueAt: now, leasedUntil: nil, lastError: nil, lastStatus: nil, createdAt: now, updatedAt: now, sentAt: nil)
    }

    /// The delivery after `result`: the one place its status changes.
    public mutating func apply(_ result: WebhookDeliveryResult, now: Date) {
        leasedUntil = nil
        updatedAt = now
        switch result {
        case .sent(let status):
            self.status = .sent
            sentAt = now
            lastStatus = status
            lastError = nil
        case .retry(let error, let status, let retryAt):
            attempts += 1
            lastError = error
            lastStatus = status
            dueAt = retryAt
        case .parked(let error, let status):
            attempts += 1
            self.status = .parked
            lastError = error
            lastStatus = status
        }
    }
}

/// How a leased delivery ended, as the sender reports it.
public enum WebhookDeliveryResult: Sendable, Equatable {
    /// The receiver answered 2xx (`status`).
    case sent(status: Int)
    /// Not received: try again at `retryAt`.
    case retry(error: String, status: Int?, retryAt: Date)
    /// Given up: kept for an operator to redeliver.
    case parked(error: String, status: Int?)
}

/// A leased delivery with its event: what the sender sends.
public struct LeasedDelivery: Sendable, Equatable {
    public var delivery: WebhookDelivery
    public var eventID: String
    /// The event's type as written (a newer instance's type is sent as it is).
    public var type: String
    public var body: String
    public var eventCreatedAt: Date

    /// A test event (`stockroom webhooks test`), sent once, outside the ledger.
    public static func test(eventID: String, body: String, endpoint: String) -> LeasedDelivery {
        let now = Date()
        return LeasedDelivery(
            delivery: WebhookDelivery(
                id: nil, event: 0, endpoint: endpoint, transactionID: "", sequence: 0, status: .queued, attempts: 0, dueAt: now,
                leasedUntil: nil, lastError: nil, lastStatus: nil, createdAt: now, updatedAt: now, sentAt: nil),
            eventID: eventID, type: "webhook.test", body: body, eventCreatedAt: now)
    }
}

/// One endpoint's queue at a glance: for metrics, the CLI and the console.
public struct WebhookQueueStats: Sendable, Equatable {
    public var endpoint: String
    public var queued: Int
    public var sent: Int
    public var parked: Int
    /// When the oldest queued delivery was queued, if one is.
    public var oldestQueuedAt: Date?

    public init(endpoint: String, queued: Int = 0, sent: Int = 0, parked: Int = 0, oldestQueuedAt: Date? = nil) {
        self.endpoint = endpoint
        self.queued = queued
        self.sent = sent
        self.parked = parked
        self.oldestQueuedAt = oldestQueuedAt
    }
}

/// Which deliveries to list.
public struct WebhookDeliveryQuery: Sendable, Equatable {
    public var endpoint: String?
    public var status: WebhookDelivery.Status?
    public var transactionID: String?
    public var limit: Int

    public init(endpoint: String? = nil, status: WebhookDelivery.Status? = nil, transactionID: String? = nil, limit: Int = 100) {
        self.endpoint = endpoint
        self.status = status
        self.transactionID = transactionID
        self.limit = limit
    }
}

/// A delivery as listed, with its event.
public struct ListedDelivery: Sendable, Equatable {
    public var delivery: WebhookDelivery
    public var eventID: String
    public var type: String
}
