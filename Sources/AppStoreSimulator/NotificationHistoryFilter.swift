import Foundation
import StockroomCore

/// A `NotificationHistoryRequest` the simulator accepted.
struct NotificationHistoryFilter: Sendable {
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
    static func parse(_ body: [UInt8], now: Int64) -> Result<NotificationHistoryFilter, AppleAPIError> {
        guard body.count <= 16 * 1024, let object = try? JSONDecoder().decode([String: JSONScalar].self, from: Data(body)) else {
            return .failure(AppleAPIError(400, 4_000_000, "Invalid request. The request body is malformed."))
        }
        guard case .integer(let start) = object["startDate"], start >= 0 else {
            return .failure(AppleAPIError(400, 4_000_015, "Invalid request. The start date is invalid."))
        }
        guard case .integer(let end) = object["endDate"], end >= 0 else {
            return .failure(AppleAPIError(400, 4_000_016, "Invalid request. The end date is invalid."))
        }
        guard start < end else {
            return .failure(AppleAPIError(400, 4_000_013, "Invalid request. The start date is after or equal to the end date."))
        }
        guard start >= now - SimulatorState.historyReach else {
            return .failure(AppleAPIError(400, 4_000_012, "Invalid request. The start date is too far in the past."))
        }
        func text(_ key: String) -> Result<String?, AppleAPIError> {
            switch object[key] {
            case nil: .success(nil)
            case .string(let value)?: .success(value)
            default:
                .failure(AppleAPIError(400, key.hasPrefix("notification") ? 4_000_018 : 4_000_000, "Invalid request. \(key) is invalid."))
            }
        }
        let onlyFailures: Bool
        switch object["onlyFailures"] {
        case nil: onlyFailures = false
        case .boolean(let value)?: onlyFailures = value
        default: return .failure(AppleAPIError(400, 4_000_000, "Invalid request. onlyFailures is invalid."))
        }
        let query: NotificationHistoryFilter
        do throws(AppleAPIError) {
            query = NotificationHistoryFilter(
                start: start, end: end, notificationType: try text("notificationType").get(),
                notificationSubtype: try text("notificationSubtype").get(),
                transactionID: try text("transactionId").get(), onlyFailures: onlyFailures)
        } catch {
            return .failure(error)
        }
        if query.transactionID != nil, query.notificationType != nil {
            return .failure(
                AppleAPIError(400, 4_000_019, "Invalid request. Only one of transactionId or notificationType may be supplied."))
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
        let canonical = [
            environment.rawValue, String(start), String(end), notificationType ?? "", notificationSubtype ?? "", transactionID ?? "",
            String(onlyFailures),
        ]
        return String(ByteEncoding.hex(SHA256.hash(Array(canonical.joined(separator: "\u{1F}").utf8))).prefix(32))
    }

    func token(position: Int, environment: StoreEnvironment) -> String {
        ByteEncoding.base64URL(Array("v1.\(position).\(digest(environment))".utf8))
    }

    /// The position a token resumes at, when it was made by this query in this environment.
    func position(in token: String, environment: StoreEnvironment) -> Int? {
        guard token.utf8.count <= 512, let bytes = ByteEncoding.decodeBase64(token) else { return nil }
        let parts = String(decoding: bytes, as: UTF8.self).split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0] == "v1", parts[2] == digest(environment), parts[1].utf8.count <= 12, let position = Int(parts[1]),
            position >= 0
        else { return nil }
        return position
    }
}
