import StockroomCore

/// One App Store Server Notification V2 the simulator minted, kept for Get Notification
/// History whether it was delivered, failed, or never sent (no URL set).
///
/// See https://developer.apple.com/documentation/appstoreserverapi/notificationhistoryresponseitem
struct SimulatedNotification: Sendable {
    /// One delivery attempt: Apple's `sendAttempts[]` item.
    ///
    /// See https://developer.apple.com/documentation/appstoreserverapi/sendattemptitem
    struct SendAttempt: Sendable, Encodable {
        var attemptDate: Int64
        /// Apple's `sendAttemptResult`: `SUCCESS`, `UNSUCCESSFUL_HTTP_RESPONSE_CODE`, `TIMED_OUT`, …
        var sendAttemptResult: String
    }

    var uuid: String
    var type: String
    var subtype: String?
    var transactionID: String
    var originalTransactionID: String
    var environment: StoreEnvironment
    var signedDateMilliseconds: Int64
    /// The `{"signedPayload": …}` JWS, signed when first needed (posting or listing), so a
    /// purchase with no URL set costs no signature.
    var signedPayload: String?
    /// The transaction as it was when the notification was minted.
    var transaction: SimulatedTransaction
    /// Extra `data` fields: `consumptionRequestReason`.
    var consumptionRequestReason: String?
    var sendAttempts: [SendAttempt] = []

    /// Whether Apple would list it under `onlyFailures`: no attempt succeeded, or none was made.
    var isFailure: Bool { !sendAttempts.contains { $0.sendAttemptResult == "SUCCESS" } }

    /// Apple's `sendAttemptResult` for what posting it to the URL came to.
    ///
    /// See https://developer.apple.com/documentation/appstoreserverapi/sendattemptresult
    static func sendAttemptResult(status: Int?, error: UpstreamError?) -> String {
        if let status { return (200...299).contains(status) ? "SUCCESS" : "UNSUCCESSFUL_HTTP_RESPONSE_CODE" }
        switch error {
        case .timedOut: return "TIMED_OUT"
        case .tls: return "TLS_ISSUE"
        case .connectionFailed: return "SOCKET_ISSUE"
        case .responseTooLarge: return "INVALID_RESPONSE"
        case .transport: return "PREMATURE_CLOSE"
        case .invalidRequest, nil: return "OTHER"
        }
    }

    /// V2 notification types the simulator mints through `POST /sim/notifications`.
    ///
    /// See https://developer.apple.com/documentation/appstoreservernotifications/notificationtype
    static let types: Set = [
        "ONE_TIME_CHARGE", "CONSUMPTION_REQUEST", "REFUND", "REFUND_DECLINED", "REFUND_REVERSED", "REVOKE", "TEST",
        "DID_RENEW", "EXPIRED", "SUBSCRIBED", "DID_CHANGE_RENEWAL_STATUS", "DID_FAIL_TO_RENEW", "GRACE_PERIOD_EXPIRED",
        "PRICE_INCREASE", "RENEWAL_EXTENDED", "RENEWAL_EXTENSION", "OFFER_REDEEMED", "DID_CHANGE_RENEWAL_PREF",
        "EXTERNAL_PURCHASE_TOKEN", "METADATA_UPDATE", "MIGRATION", "PRICE_CHANGE", "RESCIND_CONSENT",
    ]

    /// Apple's `consumptionRequestReason` values.
    ///
    /// See https://developer.apple.com/documentation/appstoreservernotifications/consumptionrequestreason
    static let consumptionRequestReasons: Set = ["UNINTENDED_PURCHASE", "FULFILLMENT_ISSUE", "UNSATISFIED_WITH_PURCHASE", "LEGAL", "OTHER"]

    /// Apple's `revocationType` values.
    ///
    /// See https://developer.apple.com/documentation/appstoreservernotifications/revocationtype
    static let revocationTypes: Set = ["REFUND_FULL", "REFUND_PRORATED", "FAMILY_REVOKE"]
}
