import Foundation
import Hummingbird
import StockroomCore

/// The simulator's own control API under `/sim`: mint purchases, refund them, queue faults,
/// read call counts.
struct ControlController<Context: RequestContext> {
    let state: SimulatorState

    func addRoutes(to group: RouterGroup<Context>) {
        group.post("purchases") { request, _ -> Response in
            let purchase = try await state.purchase(try await Self.decode(SimulatorState.PurchaseRequest.self, from: request))
            var response = try UpstreamController<Context>.json(purchase)
            response.status = .created
            return response
        }
        group.post("transactions/:id/refund") { _, context -> Response in
            let id = try context.parameters.require("id")
            let refund = try await state.refund(id)
            var response = try UpstreamController<Context>.json(refund)
            // Post the REFUND notification before answering, so a caller sees its effect at once.
            if let (url, body) = try await state.notification("REFUND", transactionID: id) {
                let delivered = try? await CurlHTTPClient(configuration: .init(totalTimeout: .seconds(5)))
                    .send(UpstreamRequest(method: .post, url: url, headers: [("Content-Type", "application/json")], body: body))
                response.headers[.init("X-Notification-Status")!] = delivered.map { String($0.status) } ?? "failed"
            }
            return response
        }
        group.post("notifications") { request, _ -> Response in
            let input = try await Self.decode(NotificationRequestBody.self, from: request)
            guard await state.hasTransaction(input.transactionId) else { throw SimulatorError.unknownTransaction(input.transactionId) }
            guard let (url, body) = try await state.notification(input.type, transactionID: input.transactionId, force: true) else {
                throw SimulatorError.internal("no notification was built")
            }
            var response = Response(status: .created, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: body)))
            if !url.isEmpty {
                let delivered = try? await CurlHTTPClient(configuration: .init(totalTimeout: .seconds(5)))
                    .send(UpstreamRequest(method: .post, url: url, headers: [("Content-Type", "application/json")], body: body))
                response.headers[.init("X-Notification-Status")!] = delivered.map { String($0.status) } ?? "failed"
            }
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
        do {
            return try JSONDecoder().decode(type, from: Data(buffer: bytes))
        } catch {
            throw SimulatorError.badRequest("the body is not the expected JSON: \(error)")
        }
    }
}

/// The body of `POST /sim/notifications`: a notification of any type about a transaction.
struct NotificationRequestBody: Decodable {
    var type: String
    var transactionId: String
}

/// The body of `PUT /sim/notification-url`.
struct NotificationURLBody: Decodable {
    var url: String?
}
