/// A misbehaviour queued through `POST /sim/faults`, applied to the next `count` upstream calls.
struct Fault: Codable, Sendable, Equatable {
    enum Kind: String, Codable, Sendable {
        /// Answer with HTTP status `status` (a 5xx, say) and a non-JSON body.
        case httpStatus = "http-status"
        /// Answer HTTP 200 with verifyReceipt `status` (21005, 21009, 21100–21199, 21007…).
        case status
        /// Wait `delayMs` before answering normally.
        case delay
        /// Promise a body, send part of it, and close the connection.
        case drop
        /// Answer HTTP 200 with a body that is not JSON.
        case malformed
    }

    var kind: Kind
    var status: Int?
    var delayMs: Int?
    var count: Int?
    /// With `kind: status`: sets Apple's retry flag on the answer.
    var retryable: Bool?
    /// Which spelling of the flag to send: `is-retryable` (default) or `is_retryable`.
    var retryableField: String?
    /// With `kind: http-status`: a `Retry-After` header, in seconds (for 429).
    var retryAfter: Int?
    /// The same, under the name the lifecycle tests use; `retryAfter` wins when both are set.
    var retryAfterSeconds: Int?
    /// Only calls to this endpoint take the fault (`finish`, `consumption`, `appAccountToken`, …); nil: any call.
    var endpoint: String?

    /// The endpoints a fault can be aimed at, as `GET /sim/stats` names them.
    static let endpoints: Set = [
        "verifyReceipt", "inApps", "finish", "consumption", "appAccountToken", "notificationHistory", "transactionHistory",
    ]

    /// The `Retry-After` seconds to send, if any.
    var retryAfterHeader: Int? { retryAfter ?? retryAfterSeconds }

    /// Why the fault cannot be queued, or nil when it is well formed.
    var problem: String? {
        switch kind {
        case .httpStatus: if !(100...599).contains(status ?? 0) { return "http-status needs \"status\" from 100 to 599" }
        case .status: if status == nil { return "status needs \"status\"" }
        case .delay: if !(0...120_000).contains(delayMs ?? -1) { return "delay needs \"delayMs\" from 0 to 120000" }
        case .drop, .malformed: break
        }
        if let count, !(1...100_000).contains(count) { return "count must be from 1 to 100000" }
        if let seconds = retryAfterHeader, !(0...86_400).contains(seconds) { return "retryAfter must be from 0 to 86400 seconds" }
        if let endpoint, !Self.endpoints.contains(endpoint) { return "endpoint must be one of \(Self.endpoints.sorted())" }
        if let retryableField, !["is-retryable", "is_retryable"].contains(retryableField) {
            return "retryableField must be is-retryable or is_retryable"
        }
        return nil
    }
}
