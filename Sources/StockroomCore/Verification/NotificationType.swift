/// An App Store Server Notification V2's `notificationType`, or a type Apple adds later.
///
/// See https://developer.apple.com/documentation/appstoreservernotifications/notificationtype
public enum NotificationType: AppleEnumeration {
    case consumptionRequest
    case didChangeRenewalPref
    case didChangeRenewalStatus
    case didFailToRenew
    case didRenew
    case expired
    case externalPurchaseToken
    case gracePeriodExpired
    case metadataUpdate
    case migration
    case offerRedeemed
    case oneTimeCharge
    case priceChange
    case priceIncrease
    case refund
    case refundDeclined
    case refundReversed
    case renewalExtended
    case renewalExtension
    case rescindConsent
    case revoke
    case subscribed
    case test
    case unrecognized(String)

    public static let recognized: [NotificationType] = [
        .consumptionRequest, .didChangeRenewalPref, .didChangeRenewalStatus, .didFailToRenew, .didRenew, .expired, .externalPurchaseToken,
        .gracePeriodExpired, .metadataUpdate, .migration, .offerRedeemed, .oneTimeCharge, .priceChange, .priceIncrease, .refund,
        .refundDeclined, .refundReversed, .renewalExtended, .renewalExtension, .rescindConsent, .revoke, .subscribed, .test,
    ]

    public var rawValue: String {
        switch self {
        case .consumptionRequest: "CONSUMPTION_REQUEST"
        case .didChangeRenewalPref: "DID_CHANGE_RENEWAL_PREF"
        case .didChangeRenewalStatus: "DID_CHANGE_RENEWAL_STATUS"
        case .didFailToRenew: "DID_FAIL_TO_RENEW"
        case .didRenew: "DID_RENEW"
        case .expired: "EXPIRED"
        case .externalPurchaseToken: "EXTERNAL_PURCHASE_TOKEN"
        case .gracePeriodExpired: "GRACE_PERIOD_EXPIRED"
        case .metadataUpdate: "METADATA_UPDATE"
        case .migration: "MIGRATION"
        case .offerRedeemed: "OFFER_REDEEMED"
        case .oneTimeCharge: "ONE_TIME_CHARGE"
        case .priceChange: "PRICE_CHANGE"
        case .priceIncrease: "PRICE_INCREASE"
        case .refund: "REFUND"
        case .refundDeclined: "REFUND_DECLINED"
        case .refundReversed: "REFUND_REVERSED"
        case .renewalExtended: "RENEWAL_EXTENDED"
        case .renewalExtension: "RENEWAL_EXTENSION"
        case .rescindConsent: "RESCIND_CONSENT"
        case .revoke: "REVOKE"
        case .subscribed: "SUBSCRIBED"
        case .test: "TEST"
        case .unrecognized(let raw): raw
        }
    }
}

/// A notification's `subtype`, or one Apple adds later.
///
/// See https://developer.apple.com/documentation/appstoreservernotifications/subtype
public enum NotificationSubtype: AppleEnumeration {
    case accepted
    case autoRenewDisabled
    case autoRenewEnabled
    case billingRecovery
    case billingRetry
    case downgrade
    case failure
    case gracePeriod
    case initialBuy
    case pending
    case priceIncrease
    case productNotForSale
    case resubscribe
    case summary
    case upgrade
    case unreported
    case voluntary
    case unrecognized(String)

    public static let recognized: [NotificationSubtype] = [
        .accepted, .autoRenewDisabled, .autoRenewEnabled, .billingRecovery, .billingRetry, .downgrade, .failure, .gracePeriod, .initialBuy,
        .pending, .priceIncrease, .productNotForSale, .resubscribe, .summary, .upgrade, .unreported, .voluntary,
    ]

    public var rawValue: String {
        switch self {
        case .accepted: "ACCEPTED"
        case .autoRenewDisabled: "AUTO_RENEW_DISABLED"
        case .autoRenewEnabled: "AUTO_RENEW_ENABLED"
        case .billingRecovery: "BILLING_RECOVERY"
        case .billingRetry: "BILLING_RETRY"
        case .downgrade: "DOWNGRADE"
        case .failure: "FAILURE"
        case .gracePeriod: "GRACE_PERIOD"
        case .initialBuy: "INITIAL_BUY"
        case .pending: "PENDING"
        case .priceIncrease: "PRICE_INCREASE"
        case .productNotForSale: "PRODUCT_NOT_FOR_SALE"
        case .resubscribe: "RESUBSCRIBE"
        case .summary: "SUMMARY"
        case .upgrade: "UPGRADE"
        case .unreported: "UNREPORTED"
        case .voluntary: "VOLUNTARY"
        case .unrecognized(let raw): raw
        }
    }
}
