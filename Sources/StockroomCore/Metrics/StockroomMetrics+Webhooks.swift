import Metrics
import Foundation

extension StockroomMetrics {
    /// One delivery's outcome: `sent`, `retry` or `parked`.
    public static func webhookDelivery(endpoint: String, result: WebhookDeliveryResult) {
        let outcome =
            switch result {
            case .sent: "sent"
            case .retry: "retry"
            case .parked: "parked"
            }
        webhookCounter(endpoint, outcome).increment()
    }

    /// Each endpoint's queue: deliveries queued and parked, and the age of the oldest queued.
    public static func webhookQueues(_ stats: [WebhookQueueStats], now: Date) {
        for entry in stats {
            Gauge(label: "stockroom_webhook_queued", dimensions: [("endpoint", entry.endpoint)]).record(entry.queued)
            Gauge(label: "stockroom_webhook_parked", dimensions: [("endpoint", entry.endpoint)]).record(entry.parked)
            let age = entry.oldestQueuedAt.map { max(0, now.timeIntervalSince($0)) } ?? 0
            Gauge(label: "stockroom_webhook_oldest_queued_seconds", dimensions: [("endpoint", entry.endpoint)]).record(age)
        }
    }

    /// Shows every endpoint's series at zero from the start.
    public static func registerWebhooks(_ endpoints: [String]) {
        for endpoint in endpoints {
            for outcome in ["sent", "retry", "parked"] { webhookCounter(endpoint, outcome).increment(by: 0) }
        }
        webhookQueues(endpoints.map { WebhookQueueStats(endpoint: $0) }, now: Date())
    }

    private static func webhookCounter(_ endpoint: String, _ outcome: String) -> Counter {
        Counter(label: "stockroom_webhook_deliveries_total", dimensions: [("endpoint", endpoint), ("outcome", outcome)])
    }
}
