import Foundation
import Hummingbird
import StockroomCore
import StockroomHTTP
import StockroomEntitlement

/// `POST /v1/notifications/appstore`: App Store Server Notifications V2.
///
/// REFUND and REVOKE revoke the purchase, REFUND_REVERSED restores it, anything else is recorded
/// and acknowledged. Idempotent on `notificationUUID`; 200 once recorded; a notification that
/// does not verify is 400 and changes nothing.
struct NotificationController<Context: RequestContext> {
    let entitlements: Entitlements

    func addRoutes(to group: RouterGroup<Context>) {
        group.post("notifications/appstore", use: receive)
    }

    @Sendable func receive(_ request: Request, context: Context) async throws -> Response {
        let body = try await request.body.collect(upTo: context.maxUploadSize)
        guard JSONNesting.isShallow(body.readableBytesView),
            let signedPayload = try? JSONDecoder().decode(NotificationBody.self, from: Data(buffer: body)).signedPayload
        else { throw NotificationError.badRequest("The body must be {\"signedPayload\": \"<JWS>\"}.") }
        let status: String
        switch try await entitlements.apply(notification: signedPayload) {
        case .refused(let failure): throw NotificationError.rejected(failure)
        case .duplicate: status = "duplicate"
        case .recorded(let effect):
            status = "recorded"
            context.logger.info("App Store notification", metadata: ["effect": .string(effect)])
        }
        return Response(
            status: .ok, headers: [.contentType: "application/json; charset=utf-8"],
            body: .init(byteBuffer: ByteBuffer(data: OperatorJSON.data(["status": status]))))
    }
}

/// What Apple posts: `{"signedPayload": "<JWS>"}`.
private struct NotificationBody: Decodable {
    var signedPayload: String
}

/// Errors of the notification endpoint.
enum NotificationError: APIError {
    case badRequest(String)
    case rejected(JWSFailure)

    /// A notification whose certificates' revocation could not be checked (`--ocsp hard`) is an
    /// outage, 503, which Apple retries; anything else that does not verify is 400.
    var status: HTTPResponse.Status {
        if case .rejected(.revocationUnavailable) = self { return .serviceUnavailable }
        return .badRequest
    }

    var code: String {
        switch self {
        case .badRequest: "bad_request"
        case .rejected(let failure): failure.code
        }
    }

    var message: String {
        switch self {
        case .badRequest(let detail): detail
        case .rejected(let failure): "The notification does not verify: \(failure)."
        }
    }

    var headers: HTTPFields {
        if case .rejected(.revocationUnavailable) = self { return [.retryAfter: "60"] }
        return [:]
    }
}
