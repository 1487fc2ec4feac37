import Foundation

/// A call Stockroom owes the App Store Server API, kept in the ledger until it is made:
/// Finish Transaction once the app has its content, one consumption answer per refund request,
/// and Set App Account Token once a purchase Apple holds without an account is bound to one. A
/// durable queue: it survives restarts, and each row is leased to one sender at a time, so
/// several instances sharing a ledger make each call once.
///
/// One row per (kind, transaction): a transaction is finished once and answered once, however
/// often Apple asks (it re-sends CONSUMPTION_REQUEST with new UUIDs until it hears back); a
/// purchase is told its account once, under its original transaction ID (Apple's key for it).
public struct ServerCall: Sendable, Equatable, Codable {
    public var id: Int64?
    public var kind: Kind
    public var transactionID: String
    /// The host the call goes to (the sandbox's for sandbox transactions).
    public var environment: StoreEnvironment
    public var status: Status
    /// Calls made so far that did not settle it.
    public var attempts: Int
    /// Not sent before this time (backoff, or Apple's `Retry-After`).
    public var dueAt: Date
    /// Held by one sender until this time.
    public var leasedUntil: Date?
    public var lastError: String?
    /// What was sent, verbatim, for audit: a consumption answer once sent; an account token's
    /// `UpdateAppAccountTokenRequest` from the start (the sender sends it as queued).
    public var body: String?
    /// The notification that asked for it (consumption answers).
    public var requestedBy: String?
    /// The app download the refund request's signed transaction names (consumption answers):
    /// checked for a rescinded consent when the request comes and again before the answer is sent.
    public var appTransactionID: String? = nil
    public var createdAt: Date
    public var updatedAt: Date
    public var sentAt: Date?

    /// What the call does.
    public enum Kind: String, Sendable, Codable, CaseIterable {
        /// `POST /inApps/v1/transactions/{transactionId}/finish`.
        case finish
        /// `PUT /inApps/v2/transactions/consumption/{transactionId}`.
        case consumption
        /// `PUT /inApps/v1/transactions/{originalTransactionId}/appAccountToken`; its
        /// `transactionID` is the purchase's original transaction ID.
        case appAccountToken
    }

    /// Where a call stands.
    public enum Status: String, Sendable, Codable, CaseIterable {
        /// Waiting to be sent (or re-sent after a transient failure).
        case queued
        /// Apple accepted it.
        case sent
        /// Not sent, on purpose: no customer consent is on record for a consumption answer, or
        /// the ledger cannot tell how the delivery went (`ConsumptionAnswer.withhold`).
        case skipped
        /// Apple refused it for good (a 4xx other than 429); not retried.
        case refused
    }

    public enum CodingKeys: String, CodingKey, CaseIterable {
        case id, kind, transactionID = "transaction_id", environment, status, attempts, dueAt = "due_at"
        case leasedUntil = "leased_until", lastError = "last_error", body, requestedBy = "requested_by"
        case createdAt = "created_at", updatedAt = "updated_at", sentAt = "sent_at"
        case appTransactionID = "app_transaction_id"
    }

    /// A new queued call, due now.
    public static func queued(_ kind: Kind, _ transactionID: String, environment: StoreEnvironment, requestedBy: String? = nil, now: Date)
        -> ServerCall
    {
        ServerCall(
            id: nil, kind: kind, transactionID: transactionID, environment: environment, status: .queued, attempts: 0, dueAt: now,
            leasedUntil: nil, lastError: nil, body: nil, requestedBy: requestedBy, appTransactionID: nil, createdAt: now, updatedAt: now,
            sentAt: nil)
    }

    /// The answer owed to a refund request (CONSUMPTION_REQUEST) for `transactionID`, whose row
    /// (if on record) says whether the customer consented: without consent, or with consent
    /// rescinded since (`rescission`), it is recorded skipped.
    public static func consumptionAnswer(
        _ transactionID: String, row: Fulfilment?, appTransactionID: String? = nil, rescission: ConsentRescission? = nil,
        environment: StoreEnvironment, requestedBy uuid: String, now: Date
    ) -> ServerCall {
        var call = ServerCall.queued(.consumption, transactionID, environment: row?.environment ?? environment, requestedBy: uuid, now: now)
        call.appTransactionID = appTransactionID ?? row?.appTransactionID
        if let rescission {
            call.status = .skipped
            call.lastError = rescission.reason
        } else if row?.customerConsented != true {
            call.status = .skipped
            call.lastError = "no customer consent on record: nothing is sent to Apple"
        }
        return call
    }

    /// Set App Account Token for the purchase `originalTransactionID`, queued in the write that
    /// binds it to `appAccountToken` (a UUID); its body is Apple's `UpdateAppAccountTokenRequest`.
    ///
    /// See https://developer.apple.com/documentation/appstoreserverapi/set-app-account-token
    public static func appAccountToken(_ appAccountToken: String, originalTransactionID: String, environment: StoreEnvironment, now: Date)
        -> ServerCall
    {
        var call = ServerCall.queued(.appAccountToken, originalTransactionID, environment: environment, now: now)
        call.body = UpdateAppAccountTokenRequest(appAccountToken: appAccountToken).json
        return call
    }

    /// The statements that settle this call with `result`: the call, and once a finish or a
    /// consumption answer is sent, its transaction's row (`row`, read locked), stamped
    /// `finished_at` for a finish, and the event that reports it. An account token told to Apple
    /// changes nothing Stockroom decides (the ledger bound the account already): no event.
    public func settlement(_ result: ServerCallResult, row: Fulfilment?, now: Date) -> [LedgerStatement] {
        var call = self
        call.apply(result, now: now)
        guard call.status == .sent, var row else { return [.settle(call)] }
        let type: LedgerEvent.EventType
        switch call.kind {
        case .finish:
            row.finishedAt = row.finishedAt ?? now
            type = .finished
        case .consumption:
            type = .consumptionAnswered
        case .appAccountToken:
            return [.settle(call)]
        }
        row.updatedAt = now
        let sequence = (row.eventSequence ?? 0) + 1
        row.eventSequence = sequence
        return [.settle(call), .update(row), .insert(LedgerEvent.about(row, type: type, sequence: sequence, now: now))]
    }

    /// The wait before the next try after `attempts` failures: 2 s doubling to an hour, or
    /// Apple's `Retry-After` when that is longer.
    public static func backoff(afterAttempts attempts: Int, retryAfter: Duration?) -> Duration {
        let exponent = min(max(attempts, 1), 12)
        let doubling = Duration.seconds(min(1 << exponent, 3600))
        guard let retryAfter, retryAfter > doubling else { return doubling }
        return min(retryAfter, .seconds(3600))
    }
}

/// How a leased call ended, as the sender reports it to the ledger.
public enum ServerCallResult: Sendable, Equatable {
    /// Apple accepted it; `body` is what was sent. A finish stamps the transaction `finished_at`.
    case sent(body: String?)
    /// A transient failure: try again at `retryAt`.
    case retry(error: String, retryAt: Date)
    /// Apple refused it for good, or it cannot be made.
    case refused(error: String)
    /// Not made, on purpose: the ledger cannot support an answer (`reason`), so none is sent.
    case skipped(reason: String)
}

/// When Stockroom finishes a transaction with Apple itself (`--finish-on`).
public enum FinishTrigger: String, Sendable, Equatable, CaseIterable {
    /// Once the app acknowledges it has the content (the default with Server API credentials).
    case acknowledged
    /// Once a whole copy went out, acknowledged or not.
    case delivered

    /// Whether a transaction that went from `before` to `after.state` is now due a finish call.
    public func isDue(before: FulfilmentState?, after: Fulfilment) -> Bool {
        guard before != after.state, after.finishedAt == nil, after.environment != nil else { return false }
        switch self {
        case .acknowledged: return after.state == .acknowledged
        case .delivered: return after.state == .delivered || after.state == .acknowledged
        }
    }
}

/// What became of a refund request's call for consumption information.
public enum ConsumptionQueueing: Sendable, Equatable {
    /// Queued: the sender builds the answer from the ledger and sends it.
    case queued
    /// This transaction was answered (or is queued, or was skipped) before: once per transaction.
    case alreadyAnswered
    /// No consent from the customer is on record: no call is made, and that is recorded.
    case skippedNoConsent
    /// Consent was rescinded for the app download the purchase names (RESCIND_CONSENT): no call
    /// is made, and that is recorded.
    case skippedConsentRescinded
}

extension ServerCall {
    /// The call after `result`: the one place a call's status changes, for both ledgers.
    public mutating func apply(_ result: ServerCallResult, now: Date) {
        leasedUntil = nil
        updatedAt = now
        switch result {
        case .sent(let body):
            status = .sent
            sentAt = now
            lastError = nil
            self.body = body
        case .retry(let error, let retryAt):
            attempts += 1
            lastError = error
            dueAt = retryAt
        case .refused(let error):
            attempts += 1
            status = .refused
            lastError = error
        case .skipped(let reason):
            status = .skipped
            lastError = reason
        }
    }
}
