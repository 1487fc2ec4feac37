import Foundation
import Hummingbird

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
            try UpstreamController<Context>.json(try await state.refund(try context.parameters.require("id")))
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
