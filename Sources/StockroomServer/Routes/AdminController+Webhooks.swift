import Foundation
import Hummingbird
import StockroomCore

/// `/v1/admin/webhooks`: the endpoints with their queues, the deliveries, and redelivery.
extension AdminController {
    func addWebhookRoutes(to admin: RouterGroup<Context>) {
        admin.get("webhooks", use: endpoints)
        admin.get("webhooks/deliveries", use: deliveries)
        admin.post("webhooks/deliveries/:deliveryId/redeliver", use: redeliver)
    }

    @Sendable func endpoints(_ request: Request, context: Context) async throws -> WebhookEndpointList {
        let stats = try await ledger.webhookStats(endpoints: webhooks.map(\.name))
        return WebhookEndpointList(
            endpoints: webhooks.map { endpoint in OperatorEndpoint(endpoint, stats: stats.first { $0.endpoint == endpoint.name }) })
    }

    @Sendable func deliveries(_ request: Request, context: Context) async throws -> WebhookDeliveryList {
        let parameters = request.uri.queryParameters
        var query = WebhookDeliveryQuery(endpoint: parameters.get("endpoint"), transactionID: parameters.get("transaction"))
        if let status = parameters.get("status") {
            guard let parsed = WebhookDelivery.Status(rawValue: status) else {
                throw AdminError.badRequest("status must be queued, sent or parked, not \"\(status)\"")
            }
            query.status = parsed
        }
        if let limit = parameters.get("limit") {
            guard let value = Int(limit), (1...10_000).contains(value) else { throw AdminError.badRequest("limit must be 1–10000") }
            query.limit = value
        }
        if let transaction = query.transactionID, !TransactionID.isValid(transaction) {
            throw AdminError.badRequest("the transaction ID is malformed")
        }
        return WebhookDeliveryList(deliveries: try await ledger.webhookDeliveries(query).map(OperatorDelivery.init))
    }

    @Sendable func redeliver(_ request: Request, context: Context) async throws -> Redelivered {
        guard let text = context.parameters.get("deliveryId"), let id = Int64(text), id > 0 else {
            throw AdminError.badRequest("the delivery ID is a positive number")
        }
        guard try await ledger.redeliver(id, now: Date()) else { throw AdminError.unknownDelivery }
        return Redelivered(redelivered: id)
    }
}

struct WebhookEndpointList: ResponseEncodable {
    var endpoints: [OperatorEndpoint]
}

struct WebhookDeliveryList: ResponseEncodable {
    var deliveries: [OperatorDelivery]
}

struct Redelivered: ResponseEncodable {
    var redelivered: Int64
}
