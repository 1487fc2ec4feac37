import Foundation

/// An App Store Server Notification V2, verified: the outer `signedPayload` and its nested
/// `signedTransactionInfo`, each verified once, through the same verifier.
///
/// See https://developer.apple.com/documentation/appstoreservernotifications/responsebodyv2decodedpayload
public struct AppStoreNotification: Sendable, Equatable {
    public var notificationType: NotificationType
    public var subtype: NotificationSubtype?
    public var notificationUUID: String
    /// The nested signed transaction, verified (REFUND, REVOKE, REFUND_REVERSED, …): a proof
    /// as it stands, which needs no second verification.
    public var verifiedTransaction: Verified<SignedTransaction>?

    /// Present for transaction notifications.
    public var transaction: SignedTransaction? { verifiedTransaction?.payload }
    /// The nested signed transaction as received, kept as a proof.
    public var signedTransactionInfo: String? { verifiedTransaction?.jws }
    /// RESCIND_CONSENT's app download (`appData.signedAppTransactionInfo`), verified.
    public var verifiedAppTransaction: Verified<AppTransaction>?
    /// The chain that signed the outer `signedPayload`, for the revocation step.
    var payloadChain: VerifiedChainCache.Chain?

    /// Verifies `signedPayload` with `transactions`' root and bundle; nil payload data is allowed
    /// for notification types that carry no transaction.
    public static func verify(_ signedPayload: String, with transactions: SignedTransactionVerifier) -> Result<
        AppStoreNotification, JWSFailure
    > {
        let verified: Verified<NotificationPayload>
        switch transactions.verify(signedPayload, as: NotificationPayload.self) {
        case .success(let value): verified = value
        case .failure(let failure): return .failure(failure)
        }
        let payload = verified.payload
        var notification = AppStoreNotification(
            notificationType: payload.notificationType, subtype: payload.subtype, notificationUUID: payload.notificationUUID)
        notification.payloadChain = verified.chain
        if let info = payload.data?.signedTransactionInfo {
            switch transactions.verify(info, as: SignedTransaction.self) {
            case .success(let transaction): notification.verifiedTransaction = transaction
            case .failure(let failure): return .failure(failure)
            }
        }
        if let info = payload.appData?.signedAppTransactionInfo {
            switch transactions.verify(info, as: AppTransaction.self) {
            case .success(let app): notification.verifiedAppTransaction = app
            case .failure(let failure): return .failure(failure)
            }
        }
        return .success(notification)
    }
}

/// A notification's signed payload: Apple's `responseBodyV2DecodedPayload`, the fields Stockroom
/// reads. A notification without `data` (a summary) is one too.
///
/// See https://developer.apple.com/documentation/appstoreservernotifications/responsebodyv2decodedpayload
struct NotificationPayload: SignedPayload {
    static let kind = "a notification with a notificationType and a notificationUUID"

    var notificationType: NotificationType
    var subtype: NotificationSubtype?
    var notificationUUID: String
    var data: NotificationData?
    var appData: AppData?

    /// Apple's `data`: the app and the signed transaction (unverified here).
    ///
    /// See https://developer.apple.com/documentation/appstoreservernotifications/data
    struct NotificationData: Decodable {
        var bundleId: String?
        var signedTransactionInfo: String?
    }

    /// Apple's `appData` (RESCIND_CONSENT): the app and its signed app transaction (unverified here).
    ///
    /// See https://developer.apple.com/documentation/appstoreservernotifications/appdata
    struct AppData: Decodable {
        var bundleId: String?
        var signedAppTransactionInfo: String?
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        notificationType = try container.decode(NotificationType.self, forKey: .notificationType)
        subtype = try container.decodeIfPresent(NotificationSubtype.self, forKey: .subtype)
        notificationUUID = try container.decode(String.self, forKey: .notificationUUID)
        guard !notificationUUID.isEmpty else {
            throw DecodingError.dataCorruptedError(forKey: .notificationUUID, in: container, debugDescription: "notificationUUID is empty")
        }
        data = try container.decodeIfPresent(NotificationData.self, forKey: .data)
        appData = try container.decodeIfPresent(AppData.self, forKey: .appData)
    }

    private enum CodingKeys: String, CodingKey { case notificationType, subtype, notificationUUID, data, appData }

    func mismatch(bundleID: String, environment: StoreEnvironment?) -> JWSFailure? {
        for bundle in [data?.bundleId, appData?.bundleId].compactMap(\.self) where bundle != bundleID {
            return .wrongBundle(expected: bundleID, actual: bundle)
        }
        return nil
    }
}
