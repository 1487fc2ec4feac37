import Foundation
import StockroomCore

/// App Store Server Notifications V2 the simulator mints: signed, posted when a URL is set,
/// and kept (delivered, failed or unsent) for Get Notification History.
///
/// See https://developer.apple.com/documentation/appstoreservernotifications/responsebodyv2decodedpayload
extension SimulatorState {
    /// How many notifications are kept; older ones are dropped, as Apple drops them after 180 days.
    static let notificationsKept = 100_000

    /// A new notification of `type` about `transactionID`, kept for the history. It is signed
    /// now only when it will be posted (a URL is set) or `sign` asks for it.
    func mint(
        _ type: String, subtype: String? = nil, transactionID: String, consumptionRequestReason: String? = nil, sign: Bool = false
    ) throws(SimulatorError) -> SimulatedNotification {
        guard let transaction = transactions[transactionID] else { throw .unknownTransaction(transactionID) }
        var notification = SimulatedNotification(
            uuid: UUID().uuidString.lowercased(), type: type, subtype: subtype, transactionID: transactionID,
            originalTransactionID: transaction.originalTransactionID, environment: transaction.environment,
            signedDateMilliseconds: AppleDate.nowMilliseconds(), transaction: transaction,
            consumptionRequestReason: consumptionRequestReason)
        if sign || notificationURL != nil { notification.signedPayload = try signedPayload(of: notification) }
        notificationPositions[notification.uuid] = droppedNotifications + notifications.count
        notifications.append(notification)
        if notifications.count > Self.notificationsKept {
            notificationPositions[notifications[0].uuid] = nil
            notifications.removeFirst()
            droppedNotifications += 1
        }
        return notification
    }

    /// Records one delivery attempt of the notification `uuid`.
    func recordAttempt(_ uuid: String, result: String) {
        guard let position = notificationPositions[uuid], position >= droppedNotifications else { return }
        notifications[position - droppedNotifications].sendAttempts.append(
            .init(attemptDate: AppleDate.nowMilliseconds(), sendAttemptResult: result))
    }

    /// The notification's JWS, signed by the simulator's leaf like Apple's.
    func signedPayload(of notification: SimulatedNotification) throws(SimulatorError) -> String {
        if let signed = notification.signedPayload { return signed }
        var data: [String: Any] = [
            "bundleId": notification.transaction.bundleID, "environment": notification.environment.rawValue,
            "signedTransactionInfo": try signedTransaction(notification.transaction, at: notification.signedDateMilliseconds),
        ]
        if let reason = notification.consumptionRequestReason { data["consumptionRequestReason"] = reason }
        var payload: [String: Any] = [
            "notificationType": notification.type, "notificationUUID": notification.uuid, "version": "2.0",
            "signedDate": notification.signedDateMilliseconds, "data": data,
        ]
        // RESCIND_CONSENT names the app download, not a purchase: `appData`, with no `data`.
        if notification.type == "RESCIND_CONSENT" {
            payload["data"] = nil
            payload["appData"] = [
                "bundleId": notification.transaction.bundleID, "environment": notification.environment.rawValue,
                "signedAppTransactionInfo": try signedAppTransaction(of: notification.transaction, at: notification.signedDateMilliseconds),
            ]
        }
        if let subtype = notification.subtype { payload["subtype"] = subtype }
        do {
            return try signingChain.sign(payload: Array(try JSONSerialization.data(withJSONObject: payload, options: [.sortedKeys])))
        } catch {
            throw .internal("signing the notification failed: \(error)")
        }
    }

    /// The body to post: `{"signedPayload": …}`.
    func postBody(of notification: SimulatedNotification) throws(SimulatorError) -> [UInt8] {
        let signed = try signedPayload(of: notification)
        return Array((try? JSONSerialization.data(withJSONObject: ["signedPayload": signed])) ?? Data())
    }
}
