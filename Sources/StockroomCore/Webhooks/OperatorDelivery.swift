import Foundation

/// A webhook delivery as operators see it (CLI, admin API). Property names are the JSON keys.
public struct OperatorDelivery: Encodable, Sendable, Equatable {
    public var id: Int64
    public var endpoint: String
    public var eventId: String
    public var type: String
    public var transactionId: String
    public var sequence: Int
    public var status: String
    public var attempts: Int
    public var dueAt: String
    public var createdAt: String
    public var updatedAt: String
    public var sentAt: String?
    public var lastStatus: Int?
    public var lastError: String?

    public init(_ listed: ListedDelivery) {
        let delivery = listed.delivery
        id = delivery.id ?? 0
        endpoint = delivery.endpoint
        eventId = listed.eventID
        type = listed.type
        transactionId = delivery.transactionID
        sequence = delivery.sequence
        status = delivery.status.rawValue
        attempts = delivery.attempts
        dueAt = OperatorJSON.date(delivery.dueAt)
        createdAt = OperatorJSON.date(delivery.createdAt)
        updatedAt = OperatorJSON.date(delivery.updatedAt)
        sentAt = delivery.sentAt.map(OperatorJSON.date)
        lastStatus = delivery.lastStatus
        lastError = delivery.lastError
    }
}

/// An endpoint as operators see it: its name, its URL without the query, its queue.
public struct OperatorEndpoint: Encodable, Sendable, Equatable {
    public var name: String
    public var url: String
    public var queued: Int
    public var sent: Int
    public var parked: Int
    public var oldestQueuedAt: String?
    /// Only with `--show-secrets`.
    public var secrets: [String]?

    public init(_ endpoint: WebhookEndpoint, stats: WebhookQueueStats?, showingSecrets: Bool = false) {
        name = endpoint.name
        url = WebhookEndpoint.redacted(endpoint.url)
        queued = stats?.queued ?? 0
        sent = stats?.sent ?? 0
        parked = stats?.parked ?? 0
        oldestQueuedAt = stats?.oldestQueuedAt.map(OperatorJSON.date)
        secrets = showingSecrets ? endpoint.secrets : nil
    }
}
