import Foundation
import StockroomCore

/// Get Notification History: `POST /inApps/v1/notifications/history`, per environment, 20 to
/// a page, with an opaque `paginationToken` that is only good for the query that made it.
///
/// See https://developer.apple.com/documentation/appstoreserverapi/get-notification-history and
/// https://developer.apple.com/documentation/appstoreserverapi/notificationhistoryrequest
extension SimulatorState {
    /// Entries per page, small so that tests page.
    static let historyPageSize = 20
    /// How far back a `startDate` may reach: 180 days.
    static let historyReach: Int64 = 180 * 86_400_000

    /// Apple's answer to one history request.
    func notificationHistory(body: [UInt8], paginationToken: String?, authorization: String?, environment: StoreEnvironment) -> WireAnswer {
        WireAnswer(historyAnswer(body: body, paginationToken: paginationToken, authorization: authorization, environment: environment))
    }

    private func historyAnswer(body: [UInt8], paginationToken: String?, authorization: String?, environment: StoreEnvironment) -> APIAnswer
    {
        if let problem = Self.tokenProblem(authorization, apiKey: apiKey, bundleID: configuration.bundleID) {
            return AppleAPIError(401, 4_010_000, problem).answer
        }
        let query: NotificationHistoryFilter
        switch NotificationHistoryFilter.parse(body, now: AppleDate.nowMilliseconds()) {
        case .failure(let error): return error.answer
        case .success(let parsed): query = parsed
        }
        var cursor = droppedNotifications
        if let paginationToken {
            guard let position = query.position(in: paginationToken, environment: environment) else {
                return AppleAPIError(400, 4_000_014, "Invalid request. The pagination token is invalid.").answer
            }
            cursor = max(position, droppedNotifications)
        }
        // Apple limits a transactionId query to that transaction's customer: here, its device.
        let customer = query.transactionID.flatMap { transactions[$0]?.deviceID }
        let matches: (SimulatedNotification) -> Bool = { note in
            note.environment == environment && query.matches(note, customer: customer)
        }
        var entries: [[String: Any]] = []
        var index = cursor - droppedNotifications
        while index < notifications.count, entries.count < Self.historyPageSize {
            defer { index += 1 }
            guard matches(notifications[index]) else { continue }
            guard let signed = try? signedPayload(of: notifications[index]) else { continue }
            notifications[index].signedPayload = signed
            let attempts = notifications[index].sendAttempts.map {
                ["attemptDate": $0.attemptDate, "sendAttemptResult": $0.sendAttemptResult] as [String: Any]
            }
            entries.append(["signedPayload": signed, "sendAttempts": attempts])
        }
        let hasMore = notifications[min(index, notifications.count)...].contains(where: matches)
        var answer: [String: Any] = ["notificationHistory": entries, "hasMore": hasMore]
        if hasMore { answer["paginationToken"] = query.token(position: index + droppedNotifications, environment: environment) }
        return (200, answer)
    }
}
