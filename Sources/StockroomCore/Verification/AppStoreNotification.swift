import Foundation

/// An App Store Server Notification V2, verified: the outer `signedPayload` and its nested
/// `signedTransactionInfo`, both against the same root.
///
/// See https://developer.apple.com/documentation/appstoreservernotifications/responsebodyv2decodedpayload
public struct AppStoreNotification: Sendable, Equatable {
    public var notificationType: String
    public var subtype: String?
    public var notificationUUID: String
    /// Present for transaction notifications (REFUND, REVOKE, REFUND_REVERSED, …).
    public var transaction: SignedTransaction?
    /// The nested signed transaction as received, kept as a proof.
    public var signedTransactionInfo: String?

    /// Verifies `signedPayload` with `transactions`' root and bundle; nil payload data is allowed
    /// for notification types that carry no transaction.
    public static func verify(_ signedPayload: String, with transactions: SignedTransactionVerifier) -> Result<AppStoreNotification, JWSFailure> {
        let payload: [UInt8]
        switch transactions.jws.verify(signedPayload) {
        case .success(let bytes): payload = bytes
        case .failure(let failure): return .failure(failure)
        }
        guard JSONNesting.isShallow(payload), let object = try? JSONSerialization.jsonObject(with: Data(payload)) as? [String: Any],
            let type = object["notificationType"] as? String, let uuid = object["notificationUUID"] as? String, !uuid.isEmpty
        else { return .failure(.malformed("the payload has no notificationType or notificationUUID")) }
        var notification = AppStoreNotification(
            notificationType: type, subtype: object["subtype"] as? String, notificationUUID: uuid, transaction: nil, signedTransactionInfo: nil)
        let data = object["data"] as? [String: Any]
        if let bundle = data?["bundleId"] as? String, bundle != transactions.bundleID {
            return .failure(.wrongBundle(expected: transactions.bundleID, actual: bundle))
        }
        if let info = data?["signedTransactionInfo"] as? String {
            switch transactions.verify(info) {
            case .success(let transaction):
                notification.transaction = transaction
                notification.signedTransactionInfo = info
            case .failure(let failure):
                return .failure(failure)
            }
        }
        return .success(notification)
    }
}
