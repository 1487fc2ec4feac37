import Foundation
import StockroomCore

/// App Store Server Notifications V2: REFUND and REVOKE revoke the purchase, REFUND_REVERSED
/// lifts the refund's revocation (never an operator's), anything else is recorded.
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

    /// Verifies `signedPayload` and applies it once per `notificationUUID`.
    public func apply(notification signedPayload: String) async throws -> NotificationOutcome {
        let notification: AppStoreNotification
        switch AppStoreNotification.verify(signedPayload, with: signedTransactions) {
        case .success(let verified): notification = verified
        case .failure(let failure): return .refused(failure)
        }
        if try await ledger.notificationSeen(notification.notificationUUID) { return .duplicate }
        let transaction = notification.transaction
        var effect = "recorded"
        switch (notification.notificationType, transaction) {
        case ("REFUND", .some(let transaction)), ("REVOKE", .some(let transaction)):
            var purchase = RevokedPurchase(
                transactionID: transaction.transactionId, originalTransactionID: transaction.originalTransactionId,
                productID: transaction.productId, bundleID: transaction.bundleId, environment: StoreEnvironment(rawValue: transaction.environment))
            if let info = notification.signedTransactionInfo {
                purchase.proofKind = .signedTransaction
                purchase.proof = info
                purchase.proofDigest = VerifiedProof.digest(of: info)
            }
            _ = try await ledger.revoke(
                purchase, cause: .refund, reason: "\(notification.notificationType.lowercased()) (App Store notification)", now: now())
            effect = "revoked"
        case ("REFUND_REVERSED", .some(let transaction)):
            _ = try await ledger.reverseRefund(originalTransactionID: transaction.originalTransactionId, now: now())
            effect = "reinstated"
        default:
            break
        }
        // Recorded after its effect: a crash in between re-applies an idempotent effect on Apple's retry.
        let recorded = try await ledger.recordNotification(
            NotificationRecord(
                uuid: notification.notificationUUID, type: notification.notificationType, subtype: notification.subtype,
                transactionID: transaction?.transactionId, originalTransactionID: transaction?.originalTransactionId),
            outcome: effect, now: now())
        return recorded ? .recorded(effect: effect) : .duplicate
    }
}
