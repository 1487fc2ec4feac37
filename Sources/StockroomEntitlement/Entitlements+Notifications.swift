import Foundation
import StockroomCore

/// App Store Server Notifications V2, each applied once per `notificationUUID` and kept
/// verbatim: REFUND and REVOKE (FAMILY_REVOKE included) revoke the purchase; a prorated refund
/// follows `--prorated-refund`; REFUND_REVERSED lifts the refund's revocation (never an
/// operator's); ONE_TIME_CHARGE records the entitlement before the app asks; CONSUMPTION_REQUEST
/// queues one consumption answer per transaction; RESCIND_CONSENT records that consent was
/// withdrawn for an app download, and no consumption answer goes to Apple for its purchases
/// again (`ConsentRescission`); anything else (REFUND_DECLINED…) is recorded.
///
/// See https://developer.apple.com/documentation/appstoreservernotifications/notificationtype
extension Entitlements {
    /// What became of a notification.
    public enum NotificationOutcome: Sendable, Equatable {
        /// Applied and recorded.
        case recorded(effect: String)
        /// Recorded before: nothing changed.
        case duplicate
        /// It does not verify: nothing changed.
        case refused(JWSFailure)
    }

    /// How a notification reached Stockroom.
    public enum NotificationSource: String, Sendable {
        /// Apple posted it to `/v1/notifications/appstore`.
        case push
        /// `stockroom notifications sync` found it in Get Notification History.
        case history
    }

    /// Verifies `signedPayload` and applies it once per `notificationUUID`.
    public func apply(notification signedPayload: String, source: NotificationSource = .push) async throws -> NotificationOutcome {
        let notification: AppStoreNotification
        switch await AppStoreNotification.verifyOnline(signedPayload, with: signedTransactions) {
        case .success(let verified): notification = verified
        case .failure(let failure): return .refused(failure)
        }
        if try await ledger.notificationSeen(notification.notificationUUID) { return .duplicate }
        let effect = try await effect(of: notification)
        let transaction = notification.transaction
        // Recorded after its effect: a crash in between re-applies an idempotent effect on Apple's retry.
        let recorded = try await ledger.recordNotification(
            NotificationRecord(
                uuid: notification.notificationUUID, type: notification.notificationType.rawValue, subtype: notification.subtype?.rawValue,
                transactionID: transaction?.transactionId, originalTransactionID: transaction?.originalTransactionId,
                signedPayload: signedPayload, source: source.rawValue),
            outcome: effect, now: now())
        return recorded ? .recorded(effect: effect) : .duplicate
    }

    /// Applies what the notification says to the ledger; returns what it did, in words.
    private func effect(of notification: AppStoreNotification) async throws -> String {
        if notification.notificationType == .rescindConsent { return try await recordRescission(notification) }
        guard let transaction = notification.transaction else { return "recorded" }
        let type = notification.notificationType
        switch type {
        case .refund where transaction.revocationType == .refundProrated && policy.proratedRefund == .keep:
            return
                """
                kept: a prorated refund (\(transaction.revocationPercentage.map { "\($0 / 1000)%" } ?? "share unknown")), \
                --prorated-refund keep
                """
        case .refund, .revoke:
            var purchase = RevokedPurchase(
                transactionID: transaction.transactionId, originalTransactionID: transaction.originalTransactionId,
                productID: transaction.productId, bundleID: transaction.bundleId, environment: transaction.environment.storeEnvironment)
            if let info = notification.signedTransactionInfo {
                purchase.proofKind = .signedTransaction
                purchase.proof = info
                purchase.proofDigest = VerifiedProof.digest(of: info)
            }
            let cause = transaction.revocationType.map { " \($0.rawValue.lowercased())" } ?? ""
            _ = try await ledger.revoke(
                purchase, cause: .refund, reason: "\(type.rawValue.lowercased())\(cause) (App Store notification)", now: now())
            return "revoked"
        case .refundReversed:
            _ = try await ledger.reverseRefund(originalTransactionID: transaction.originalTransactionId, now: now())
            return "reinstated"
        case .refundDeclined:
            return "refund declined"
        case .oneTimeCharge:
            return try await recordCharge(notification)
        case .consumptionRequest:
            return try await queueConsumptionAnswer(transaction, uuid: notification.notificationUUID)
        default:
            return "recorded"
        }
    }

    /// ONE_TIME_CHARGE: Apple's signed transaction is a verified proof; the ledger records the
    /// entitlement (no account check, no attempt), so the app's first download needs no call.
    private func recordCharge(_ notification: AppStoreNotification) async throws -> String {
        guard let verified = notification.verifiedTransaction, case .success(let proof) = VerifiedProof.verifying(verified) else {
            return "recorded: no usable transaction"
        }
        if proof.environment == .sandbox, !policy.allowsSandbox { return "recorded: sandbox purchases are not entitled" }
        switch try await ledger.recordProof(
            policy.proratedRefund == .keep ? proof.keepingProratedRefund() : proof, terms: .reverification, now: now())
        {
        case .entitled: return "entitled"
        case .refused(let refusal): return "recorded: \(refusal.code)"
        }
    }

    /// CONSUMPTION_REQUEST: one answer per transaction, only with the customer's consent on record.
    private func queueConsumptionAnswer(_ transaction: SignedTransaction, uuid: String) async throws -> String {
        guard serverAPI != nil else { return "no consumption answer: no App Store Server API credentials" }
        let environment = transaction.environment.storeEnvironment ?? .production
        switch try await ledger.queueConsumptionAnswer(
            transaction.transactionId, environment: environment, appTransactionID: transaction.appTransactionId, requestedBy: uuid,
            now: now())
        {
        case .queued:
            serverCallQueued()
            return "consumption answer queued"
        case .alreadyAnswered: return "consumption answered before: not answered again"
        case .skippedNoConsent: return "no consumption answer: no customer consent on record"
        case .skippedConsentRescinded: return "no consumption answer: the customer's consent was rescinded"
        }
    }

    /// RESCIND_CONSENT: the app download its verified `appData` names, recorded once per
    /// environment. Its purchases' refund requests are answered no more, and an answer already
    /// queued is not sent (the sender asks the ledger before each one).
    private func recordRescission(_ notification: AppStoreNotification) async throws -> String {
        guard let app = notification.verifiedAppTransaction?.payload else { return "recorded: no app transaction" }
        // Recorded whatever the sandbox policy: a rescission only ever keeps data from Apple.
        guard let environment = app.environment else { return "recorded: an app transaction of \(app.receiptType), not the App Store's" }
        let rescission = ConsentRescission(
            appTransactionID: app.appTransactionId, environment: environment, bundleID: app.bundleId,
            notificationUUID: notification.notificationUUID, rescindedAt: now())
        let recorded = try await ledger.recordConsentRescission(rescission)
        return recorded
            ? "consent rescinded for app transaction \(app.appTransactionId): no consumption data is sent for its purchases"
            : "consent rescinded for app transaction \(app.appTransactionId) before"
    }
}
