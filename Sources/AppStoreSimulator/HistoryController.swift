import Foundation
import Hummingbird
import StockroomCore

/// The App Store Server API's Get Transaction History v2, production and `/sandbox`, with the
/// same faults and call counts as the other upstream endpoints.
///
/// See https://developer.apple.com/documentation/appstoreserverapi/get-transaction-history
struct HistoryController<Context: RequestContext> {
    let state: SimulatorState

    func addRoutes(to router: RouterGroup<Context>) {
        router.get("inApps/v2/history/:id") { request, context in
            try await history(request, context: context, environment: .production)
        }
        router.get("sandbox/inApps/v2/history/:id") { request, context in
            try await history(request, context: context, environment: .sandbox)
        }
    }

    func history(_ request: Request, context: Context, environment: StoreEnvironment) async throws -> Response {
        let fault = await state.begin("history", environment: environment)
        if let faulted = try await UpstreamController<Context>(state: state).apply(fault) { return faulted }
        let parameters = request.uri.queryParameters
        let query = SimulatorState.HistoryQuery(
            revision: parameters.get("revision"), sort: parameters.get("sort"),
            productIds: parameters.getAll("productId"), productTypes: parameters.getAll("productType"),
            revoked: parameters.get("revoked"))
        let (status, body) = await state.transactionHistory(
            try context.parameters.require("id"), query: query, authorization: request.headers[.authorization], environment: environment)
        return Response(
            status: .init(code: status), headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: body)))
    }
}
