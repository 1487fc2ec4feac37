import Foundation
import Hummingbird
import StockroomCore

/// The App Store Server API's purchase-lifecycle endpoints, production at `/` and sandbox
/// under `/sandbox`: Finish Transaction, Send Consumption Information (v2), Set App Account
/// Token and Get Notification History, with the same queued faults as the other upstream endpoints.
///
/// See https://developer.apple.com/documentation/appstoreserverapi
struct LifecycleController<Context: RequestContext> {
    let state: SimulatorState

    func addRoutes(to router: RouterGroup<Context>) {
        for environment in StoreEnvironment.allCases {
            let prefix = environment == .sandbox ? "sandbox/" : ""
            router.post("\(prefix)inApps/v1/transactions/:id/finish") { request, context in
                try await answer("finish", environment: environment) {
                    await state.finish(
                        try context.parameters.require("id"), authorization: request.headers[.authorization], environment: environment)
                }
            }
            router.put("\(prefix)inApps/v2/transactions/consumption/:id") { request, context in
                try await answer("consumption", environment: environment) {
                    let body = Array(buffer: try await request.body.collect(upTo: ConsumptionRules.maximumBodyBytes * 4))
                    return await state.consume(
                        try context.parameters.require("id"), body: body, authorization: request.headers[.authorization],
                        environment: environment)
                }
            }
            router.put("\(prefix)inApps/v1/transactions/:id/appAccountToken") { request, context in
                try await answer("appAccountToken", environment: environment) {
                    let body = Array(buffer: try await request.body.collect(upTo: 64 * 1024))
                    return await state.setAppAccountToken(
                        try context.parameters.require("id"), body: body, authorization: request.headers[.authorization],
                        environment: environment)
                }
            }
            router.post("\(prefix)inApps/v1/notifications/history") { request, _ in
                try await answer("notificationHistory", environment: environment) {
                    let body = Array(buffer: try await request.body.collect(upTo: 64 * 1024))
                    return await state.notificationHistory(
                        body: body, paginationToken: request.uri.queryParameters["paginationToken"].map(String.init),
                        authorization: request.headers[.authorization], environment: environment)
                }
            }
        }
    }

    /// Counts the call, applies a queued fault (latency first), or answers with `body`'s JSON.
    private func answer(
        _ endpoint: String, environment: StoreEnvironment, _ body: () async throws -> SimulatorState.WireAnswer
    ) async throws -> Response {
        let fault = await state.begin(endpoint, environment: environment)
        if let faulted = try await UpstreamController<Context>(state: state).apply(fault) { return faulted }
        let answer = try await body()
        var headers: HTTPFields = [:]
        if !answer.body.isEmpty { headers[.contentType] = "application/json" }
        return Response(status: .init(code: answer.status), headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: answer.body)))
    }
}
