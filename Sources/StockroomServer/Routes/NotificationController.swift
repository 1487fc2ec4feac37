import Foundation
import Hummingbird
import StockroomCore

/// `POST /v1/notifications/appstore`: App Store Server Notifications V2.
///
/// REFUND and REVOKE revoke the purchase, REFUND_REVERSED restores it, anything else is recorded
/// and acknowledged. Idempotent on `notificationUUID`; 200 once recorded; a notification that
/// does not verify is 400 and changes nothing.
struct NotificationController<Context: RequestContext> {
    let ledger: any Ledger
    let verifier: SignedTransactionVerifier
    let bundleID: String

    func addRoutes(to group: RouterGroup<Context>) {
        group.post("notifications/appstore", use: receive)
    }

    @Sendable func receive(_ request: Request, context: Context) async throws -> Response {
        let body = try await request.body.collect(upTo: context.maxUploadSize)
        guard let object = try? JSONSerialization.jsonObject(with: Data(buffer: body)) as? [String: Any],
            let signedPayload = object["signedPayload"] as? String
        else { throw NotificationError.badRequest("The body must be {\"signedPayload\": \"<JWS>\"}.") }
        let notification: AppStoreNotification
        switch AppStoreNotification.verify(signedPayload, with: verifier) {
        case .success(let verified): notification = verified
        case .failure(let failure): throw NotificationError.rejected(failure)
        }
        let transaction = notification.transaction
        let effect: NotificationEffect
        switch (notification.notificationType, transaction, notification.signedTransactionInfo) {
        case ("REFUND", .some(let transaction), .some(let proof)), ("REVOKE", .some(let transaction), .some(let proof)):
            effect = .revoke(
                VerifiedRecord(
                    transactionID: transaction.transactionId, originalTransactionID: transaction.originalTransactionId,
                    productID: transaction.productId, bundleID: bundleID, environment: StoreEnvironment(rawValue: transaction.environment),
                    proofKind: .signedTransaction, proof: proof),
                reason: "\(notification.notificationType.lowercased()) (App Store notification)")
        case ("REFUND_REVERSED", .some(let transaction), _):
            effect = .reinstate(originalTransactionID: transaction.originalTransactionId)
        default:
            effect = .none
        }
        let recorded = try await ledger.applyNotification(
            NotificationRecord(
                uuid: notification.notificationUUID, type: notification.notificationType, subtype: notification.subtype,
                transactionID: transaction?.transactionId, originalTransactionID: transaction?.originalTransactionId),
            effect: effect)
        context.logger.info(
            "App Store notification", metadata: ["type": .string(notification.notificationType), "duplicate": .stringConvertible(!recorded)])
        let answer = #"{"status":"\#(recorded ? "recorded" : "duplicate")"}"#
        return Response(status: .ok, headers: [.contentType: "application/json; charset=utf-8"], body: .init(byteBuffer: ByteBuffer(string: answer)))
    }
}

/// Errors of the notification endpoint.
enum NotificationError: APIError {
    case badRequest(String)
    case rejected(JWSFailure)

    var status: HTTPResponse.Status { .badRequest }

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
}
