import Foundation

/// What Get Notification History is asked for: Apple's `NotificationHistoryRequest`.
/// `start` and `end` are required; Apple keeps 180 days of history and refuses an older start
/// (4000012) or a start not before the end (4000013). Give `transactionID` or
/// `notificationType`, not both (4000019).
///
/// See https://developer.apple.com/documentation/appstoreserverapi/notificationhistoryrequest
public struct NotificationHistoryQuery: Sendable, Equatable {
    public var start: Date
    public var end: Date
    /// Only notifications Apple failed to deliver.
    public var onlyFailures: Bool
    /// One V2 `notificationType`, e.g. `ONE_TIME_CHARGE`.
    public var notificationType: String?
    /// Only notifications about this transaction (its customer's, per Apple).
    public var transactionID: String?

    public init(start: Date, end: Date, onlyFailures: Bool = false, notificationType: String? = nil, transactionID: String? = nil) {
        self.start = start
        self.end = end
        self.onlyFailures = onlyFailures
        self.notificationType = notificationType
        self.transactionID = transactionID
    }

    /// The JSON body, dates in milliseconds since 1970; nil when a date cannot be one.
    func body() -> [UInt8]? {
        func milliseconds(_ date: Date) -> Int64? {
            let value = (date.timeIntervalSince1970 * 1000).rounded()
            guard value.isFinite, abs(value) < 1e15 else { return nil }
            return Int64(exactly: value)
        }
        guard let startMs = milliseconds(start), let endMs = milliseconds(end) else { return nil }
        return UpstreamBody.encode(
            Body(
                startDate: startMs, endDate: endMs, onlyFailures: onlyFailures ? true : nil, notificationType: notificationType,
                transactionId: transactionID))
    }

    /// Apple's `NotificationHistoryRequest`; a nil member is left out.
    private struct Body: Encodable {
        var startDate: Int64
        var endDate: Int64
        var onlyFailures: Bool?
        var notificationType: String?
        var transactionId: String?
    }
}

/// One page of Get Notification History: Apple's `NotificationHistoryResponse`, reduced to the
/// signed payloads (verify each before use) and the paging state.
///
/// See https://developer.apple.com/documentation/appstoreserverapi/notificationhistoryresponse
public struct NotificationHistoryPage: Sendable, Equatable {
    /// Each entry's `signedPayload`, as a V2 notification's `signedPayload` (a JWS).
    public var signedPayloads: [String]
    public var hasMore: Bool
    /// Pass it back for the next page; nil when `hasMore` is false.
    public var paginationToken: String?

    public init(signedPayloads: [String], hasMore: Bool, paginationToken: String?) {
        self.signedPayloads = signedPayloads
        self.hasMore = hasMore
        self.paginationToken = paginationToken
    }

    /// Entries accepted in one page; Apple sends far fewer, so more is a broken or hostile answer.
    public static let maximumEntries = 1_000
    /// The longest signed payload accepted.
    public static let maximumPayloadBytes = 64 * 1024
    /// The longest pagination token accepted (it goes back into a URL).
    public static let maximumTokenBytes = 2_048
    /// Pages a whole sync should read at most; callers stop there and report it, so a token
    /// that never ends cannot keep them paging forever.
    public static let maximumPagesPerSync = 10_000
}
