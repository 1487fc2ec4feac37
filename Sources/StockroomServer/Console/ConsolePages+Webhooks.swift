import Foundation
import StockroomCore

extension ConsolePages {
    /// `/console/webhooks`: each endpoint's queue, and its recent deliveries (`?endpoint=`,
    /// `?status=`), with a form to send a parked one again.
    func webhooks(_ query: WebhookDeliveryQuery, endpoints: [WebhookEndpoint], session: ConsoleSession) async throws -> ConsoleResponse {
        let stats = try await ledger.webhookStats(endpoints: endpoints.map(\.name))
        var body = "<h1>Webhooks</h1>\n"
        if endpoints.isEmpty {
            body += "<p class=\"muted\">No endpoint is configured (<code>--webhook URL</code>, <code>--webhooks FILE</code>).</p>\n"
        }
        body += "<table id=\"endpoints\"><tr><th>Endpoint</th><th>URL</th><th class=\"num\">Queued</th><th class=\"num\">Sent</th>"
        body += "<th class=\"num\">Parked</th><th>Oldest queued</th></tr>\n"
        for entry in stats {
            let url = endpoints.first { $0.name == entry.endpoint }.map { WebhookEndpoint.redacted($0.url) } ?? "(no longer configured)"
            let name = HTML.escape(entry.endpoint)
            body += "<tr data-endpoint=\"\(name)\"><td><a href=\"/console/webhooks\(HTML.query([("endpoint", entry.endpoint)]))\">"
            body += "\(name)</a></td><td><code>\(HTML.escape(url))</code></td><td class=\"num\">\(entry.queued)</td>"
            body += "<td class=\"num\">\(entry.sent)</td><td class=\"num\" data-parked=\"\(entry.parked)\">\(entry.parked)</td>"
            body += "<td>\(HTML.time(entry.oldestQueuedAt))</td></tr>\n"
        }
        body += "</table>\n<h2>Recent deliveries</h2>\n"
        body += "<p class=\"muted\">Newest first, at most \(query.limit). Filter: "
        body += ["queued", "sent", "parked"].map { "<a href=\"/console/webhooks?status=\($0)\">\($0)</a>" }.joined(separator: " · ")
        body += "</p>\n<table id=\"deliveries\"><tr><th>ID</th><th>Endpoint</th><th>Event</th><th>Transaction</th><th>Status</th>"
        body += "<th class=\"num\">Tries</th><th>Last answer</th><th></th></tr>\n"
        let csrf = ConsoleResponse.csrfField(session)
        for listed in try await ledger.webhookDeliveries(query) {
            let delivery = listed.delivery
            let id = delivery.id ?? 0
            let transaction = HTML.escape(delivery.transactionID)
            body += "<tr data-status=\"\(delivery.status.rawValue)\" data-delivery=\"\(id)\"><td>\(id)</td>"
            body += "<td>\(HTML.escape(delivery.endpoint))</td><td>\(HTML.escape(listed.type)) #\(delivery.sequence)</td>"
            body += "<td><a href=\"/console/fulfilments/\(transaction)\">\(transaction)</a></td><td>\(delivery.status.rawValue)</td>"
            body += "<td class=\"num\">\(delivery.attempts)</td>"
            body += "<td>\(delivery.lastStatus.map { "HTTP \($0) " } ?? "")\(HTML.escape(delivery.lastError ?? ""))</td><td>"
            if delivery.status == .parked {
                body += "<form method=\"post\" action=\"/console/webhooks/deliveries/\(id)/redeliver\">\(csrf)"
                body += "<button type=\"submit\">Redeliver</button></form>"
            }
            body += "</td></tr>\n"
        }
        body += "</table>\n"
        return .page(title: "Webhooks", body: body, session: session)
    }
}
