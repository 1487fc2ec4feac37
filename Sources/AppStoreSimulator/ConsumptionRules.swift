import Foundation

/// How the App Store judges a Send Consumption Information body (`ConsumptionRequest`): the
/// first rule broken, as Apple's 400, or nil when it takes the body.
///
/// See https://developer.apple.com/documentation/appstoreserverapi/consumptionrequest and
/// https://developer.apple.com/documentation/appstoreserverapi/send-consumption-information
enum ConsumptionRules {
    /// The largest body taken; Apple's are a few hundred bytes.
    static let maximumBodyBytes = 16 * 1024

    /// https://developer.apple.com/documentation/appstoreserverapi/deliverystatus
    static let deliveryStatuses: Set = [
        "DELIVERED", "UNDELIVERED_QUALITY_ISSUE", "UNDELIVERED_WRONG_ITEM", "UNDELIVERED_SERVER_OUTAGE", "UNDELIVERED_OTHER",
    ]
    /// https://developer.apple.com/documentation/appstoreserverapi/refundpreference
    static let refundPreferences: Set = ["DECLINE", "GRANT_FULL", "GRANT_PRORATED"]

    /// Apple's codes: InvalidCustomerConsentedError 4000035, InvalidDeliveryStatusError 4000036,
    /// InvalidSampleContentProvidedError 4000041, InvalidRefundPreferenceError 4000044,
    /// ConsumptionPercentageAutoRenewableSubscriptionError 4000209. The numeric codes of
    /// ConsumptionPercentageOutOfRangeError and UndeliveredConsumptionPercentageNonZeroError
    /// were not in the documentation available here: they answer GeneralBadRequestError
    /// 4000000 with Apple's error name in the message.
    static func refusal(of body: [UInt8], productType: String) -> AppleAPIError? {
        guard body.count <= maximumBodyBytes, let object = try? JSONDecoder().decode([String: JSONScalar].self, from: Data(body)) else {
            return AppleAPIError(400, nil, "Invalid request. The request body is malformed.")
        }
        guard object["customerConsented"] == .boolean(true) else {
            return AppleAPIError(
                400, 4_000_035, "Invalid request. The customer consented field is invalid or doesn't indicate that the customer consented.")
        }
        guard case .string(let delivery) = object["deliveryStatus"], deliveryStatuses.contains(delivery) else {
            return AppleAPIError(400, 4_000_036, "Invalid request. The delivery status field is invalid.")
        }
        guard case .boolean = object["sampleContentProvided"] else {
            return AppleAPIError(400, 4_000_041, "Invalid request. The sample content provided field is invalid.")
        }
        if let preference = object["refundPreference"] {
            guard case .string(let value) = preference, refundPreferences.contains(value) else {
                return AppleAPIError(400, 4_000_044, "Invalid request. The refund preference field is invalid.")
            }
        }
        guard let raw = object["consumptionPercentage"] else { return nil }
        guard case .integer(let percentage) = raw, (0...100_000).contains(percentage) else {
            return AppleAPIError(
                400, 4_000_000, "ConsumptionPercentageOutOfRangeError: the consumption percentage is outside the valid range.")
        }
        if productType == SimulatedTransaction.autoRenewable {
            return AppleAPIError(
                400, 4_000_209,
                "Invalid request. The consumption percentage field is not supported for auto-renewable subscription transactions.")
        }
        if delivery != "DELIVERED", percentage != 0 {
            return AppleAPIError(
                400, 4_000_000,
                "UndeliveredConsumptionPercentageNonZeroError: the consumption percentage must be zero for the provided delivery status.")
        }
        return nil
    }
}
