import Foundation
import Hummingbird
import StockroomCore

/// The simulator's own control API under `/sim`: mint purchases, refund them, mint
/// notifications, show what Apple knows of a transaction, queue faults, read call counts.
struct ControlController<Context: RequestContext> {
    let state: SimulatorState
    var poster: NotificationPoster { NotificationPoster(state: state) }
    /// What posting the notification came to: its HTTP status, or `failed`; absent when no URL is set.
    static var notificationStatus: String { "X-Notification-Status" }

    func addRoutes(to group: RouterGroup<Context>) {
        group.post("purchases") { request, _ -> Response in
            let input = try await Self.decode(SimulatorState.PurchaseRequest.self, from: request)
            let purchase = try await state.purchase(input)
            var response = try UpstreamController<Context>.json(purchase)
            response.status = .created
            // A one-time product's purchase (not a restore) raises ONE_TIME_CHARGE, posted before answering.
            if input.originalTransactionId == nil, purchase.type != SimulatedTransaction.autoRenewable {
                let notification = try await state.mint("ONE_TIME_CHARGE", transactionID: purchase.transactionId)
                if let status = try await poster.deliver(notification) { response.headers[.init(Self.notificationStatus)!] = status }
            }
            return response
        }
        group.post("transactions/:id/refund") { _, context -> Response in
            let id = try context.parameters.require("id")
            let refund = try await state.refund(id)
            var response = try UpstreamController<Context>.json(refund)
            // Post the REFUND notification before answering, so a caller sees its effect at once.
            let notification = try await state.mint("REFUND", transactionID: id)
            if let status = try await poster.deliver(notification) { response.headers[.init(Self.notificationStatus)!] = status }
            return response
        }
        group.get("transactions/:id") { _, context -> Response in
            let data = try await state.transactionView(try context.parameters.require("id"))
            return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: data)))
        }
        group.post("notifications") { request, _ -> Response in
            let input = try await Self.decode(NotificationRequestBody.self, from: request)
            if let problem = input.problem { throw SimulatorError.badRequest(problem) }
            guard await state.hasTransaction(input.transactionId) else { throw SimulatorError.unknownTransaction(input.transactionId) }
            await state.applyRevocation(
                of: input.type, to: input.transactionId, revocationType: input.revocationType, percentage: input.revocationPercentage)
            let notification = try await state.mint(
                input.type, subtype: input.subtype, transactionID: input.transactionId,
                consumptionRequestReason: input.consumptionRequestReason, sign: true)
            var response = Response(
                status: .created, headers: [.contentType: "application/json"],
                body: .init(byteBuffer: ByteBuffer(bytes: try await state.postBody(of: notification))))
            if let status = try await poster.deliver(notification) { response.headers[.init(Self.notificationStatus)!] = status }
            return response
        }
        group.put("notification-url") { request, _ -> Response in
            try await state.setNotificationURL(try await Self.decode(NotificationURLBody.self, from: request).url)
            return Response(status: .noContent)
        }
        group.post("faults") { request, _ -> Response in
            let queued = try await state.enqueue(try await Self.decode(Fault.self, from: request))
            var response = try UpstreamController<Context>.json(["queued": queued])
            response.status = .created
            return response
        }
        group.delete("faults") { _, _ -> Response in
            await state.clearFaults()
            return Response(status: .noContent)
        }
        group.get("stats") { _, _ -> Response in
            try UpstreamController<Context>.json(await state.stats)
        }
        group.delete("stats") { _, _ -> Response in
            await state.resetStats()
            return Response(status: .noContent)
        }
    }

    static func decode<Value: Decodable>(_ type: Value.Type, from request: Request) async throws -> Value {
        let bytes = try await request.body.collect(upTo: 1 << 20)
        guard JSONNesting.isShallow(bytes.readableBytesView) else {
            throw SimulatorError.badRequest("the body nests deeper than \(JSONNesting.limit) levels")
        }
        do {
            return try JSONDecoder().decode(type, from: Data(buffer: bytes))
        } catch {
            throw SimulatorError.badRequest("the body is not the expected JSON: \(error)")
        }
    }
}

/// The body of `PUT /sim/notification-url`.
struct NotificationURLBody: Decodable {
    var url: String?
}
