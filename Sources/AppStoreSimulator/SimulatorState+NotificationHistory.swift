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

    private func historyAnswer(body: [UInt8], paginationToken: String?, authorization: String?, environment: StoreEnvironment) -> APIAnswer {
        if let problem = Self.tokenProblem(authorization, apiKey: apiKey, bundleID: configuration.bundleID) {
            return AppleAPIError(401, 4_010_000, problem).answer
        }
        let query: HistoryQuery
        switch HistoryQuery.parse(body, now: AppleDate.nowMilliseconds()) {
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
            let attempts = notifications[index].sendAttempts.map { ["attemptDate": $0.attemptDate, "sendAttemptResult": $0.sendAttemptResult] as [String: Any] }
            entries.append(["signedPayload": signed, "sendAttempts": attempts])
        }
        let hasMore = notifications[min(index, notifications.count)...].contains(where: matches)
        var answer: [String: Any] = ["notificationHistory": entries, "hasMore": hasMore]
        if hasMore { answer["paginationToken"] = query.token(position: index + droppedNotifications, environment: environment) }
        return (200, answer)
    }
}

/// A `NotificationHistoryRequest` the simulator accepted.
struct HistoryQuery: Sendable {
    var start: Int64
    var end: Int64
    var notificationType: String?
    var notificationSubtype: String?
    var transactionID: String?
    var onlyFailures: Bool

    /// Apple's validation, first rule broken first: InvalidStartDateError 4000015,
    /// InvalidEndDateError 4000016, StartDateAfterEndDateError 4000013,
    /// StartDateTooFarInPastError 4000012, MultipleFiltersSuppliedError 4000019,
    /// InvalidNotificationTypeError 4000018, GeneralBadRequestError 4000000.
    static func parse(_ body: [UInt8], now: Int64) -> Result<HistoryQuery, AppleAPIError> {
        guard body.count <= 16 * 1024, let object = try? JSONDecoder().decode([String: JSONScalar].self, from: Data(body)) else {
            return .failure(AppleAPIError(400, 4_000_000, "Invalid request. The request body is malformed."))
        }
        guard case .integer(let start) = object["startDate"], start >= 0 else { return .failure(AppleAPIError(400, 4_000_015, "Invalid request. The start date is invalid.")) }
        guard case .integer(let end) = object["endDate"], end >= 0 else { return .failure(AppleAPIError(400, 4_000_016, "Invalid request. The end date is invalid.")) }
        guard start < end else { return .failure(AppleAPIError(400, 4_000_013, "Invalid request. The start date is after or equal to the end date.")) }
        guard start >= now - SimulatorState.historyReach else { return .failure(AppleAPIError(400, 4_000_012, "Invalid request. The start date is too far in the past.")) }
        func text(_ key: String) -> Result<String?, AppleAPIError> {
            switch object[key] {
            case nil: .success(nil)
            case .string(let value)?: .success(value)
            default: .failure(AppleAPIError(400, key.hasPrefix("notification") ? 4_000_018 : 4_000_000, "Invalid request. \(key) is invalid."))
            }
        }
        let onlyFailures: Bool
        switch object["onlyFailures"] {
        case nil: onlyFailures = false
        case .boolean(let value)?: onlyFailures = value
        default: return .failure(AppleAPIError(400, 4_000_000, "Invalid request. onlyFailures is invalid."))
        }
        let query: HistoryQuery
        do throws(AppleAPIError) {
            query = HistoryQuery(
                start: start, end: end, notificationType: try text("notificationType").get(), notificationSubtype: try text("notificationSubtype").get(),
                transactionID: try text("transactionId").get(), onlyFailures: onlyFailures)
        } catch {
            return .failure(error)
        }
        if query.transactionID != nil, query.notificationType != nil {
            return .failure(AppleAPIError(400, 4_000_019, "Invalid request. Only one of transactionId or notificationType may be supplied."))
        }
        if let type = query.notificationType, !SimulatedNotification.types.contains(type) {
            return .failure(AppleAPIError(400, 4_000_018, "Invalid request. The notification type or subtype is invalid."))
        }
        if query.notificationSubtype != nil, query.notificationType == nil {
            return .failure(AppleAPIError(400, 4_000_018, "Invalid request. The notification type or subtype is invalid."))
        }
        return .success(query)
    }

    /// Whether the query selects `notification`; with a `transactionID`, only notifications
    /// about the purchases of `customer` (that transaction's device) match.
    func matches(_ notification: SimulatedNotification, customer: String?) -> Bool {
        guard (start..<end).contains(notification.signedDateMilliseconds) else { return false }
        if onlyFailures, !notification.isFailure { return false }
        if let notificationType, notification.type != notificationType { return false }
        if let notificationSubtype, notification.subtype != notificationSubtype { return false }
        if transactionID != nil, notification.transaction.deviceID != customer { return false }
        return true
    }

    /// What a token is bound to: the environment and every field of the query.
    private func digest(_ environment: StoreEnvironment) -> String {
        let canonical = [environment.rawValue, String(start), String(end), notificationType ?? "", notificationSubtype ?? "", transactionID ?? "", String(onlyFailures)]
        return String(ByteEncoding.hex(SHA256.hash(Array(canonical.joined(separator: "\u{1F}").utf8))).prefix(32))
    }

    func token(position: Int, environment: StoreEnvironment) -> String {
        ByteEncoding.base64URL(Array("v1.\(position).\(digest(environment))".utf8))
    }

    /// The position a token resumes at, when it was made by this query in this environment.
    func position(in token: String, environment: StoreEnvironment) -> Int? {
        guard token.utf8.count <= 512, let bytes = ByteEncoding.decodeBase64(token) else { return nil }
        let parts = String(decoding: bytes, as: UTF8.self).split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0] == "v1", parts[2] == digest(environment), parts[1].utf8.count <= 12, let position = Int(parts[1]), position >= 0 else { return nil }
        return position
    }
}
