/// The body of Send Consumption Information (v2): Apple's `ConsumptionRequest`, sent when the
/// customer asked for a refund and consented to sharing consumption data.
///
/// `customerConsented` and `sampleContentProvided` are required booleans, `deliveryStatus` is
/// required; `consumptionPercentage` (milliunits: 0...100 000 is 0…100 %) and `refundPreference`
/// are optional and left out of the JSON when nil. Apple refuses a body whose
/// `customerConsented` is not `true` (4000035), a non-zero percentage with a `deliveryStatus`
/// other than `DELIVERED`, and any percentage for an auto-renewable subscription (4000209).
///
/// See https://developer.apple.com/documentation/appstoreserverapi/consumptionrequest,
/// https://developer.apple.com/documentation/appstoreserverapi/consumptionpercentage and
/// https://developer.apple.com/documentation/appstoreserverapi/refundpreference
public struct ConsumptionInformation: Sendable, Equatable, Codable {
    /// Whether the app delivered a working In-App Purchase.
    ///
    /// See https://developer.apple.com/documentation/appstoreserverapi/deliverystatus
    public enum DeliveryStatus: String, Sendable, Equatable, Codable, CaseIterable {
        case delivered = "DELIVERED"
        case undeliveredQualityIssue = "UNDELIVERED_QUALITY_ISSUE"
        case undeliveredWrongItem = "UNDELIVERED_WRONG_ITEM"
        case undeliveredServerOutage = "UNDELIVERED_SERVER_OUTAGE"
        case undeliveredOther = "UNDELIVERED_OTHER"
    }

    /// The outcome the developer prefers for the refund request.
    ///
    /// See https://developer.apple.com/documentation/appstoreserverapi/refundpreference
    public enum RefundPreference: String, Sendable, Equatable, Codable, CaseIterable {
        case decline = "DECLINE"
        case grantFull = "GRANT_FULL"
        case grantProrated = "GRANT_PRORATED"
    }

    /// The largest `consumptionPercentage`: 100 % in milliunits.
    public static let fullConsumption = 100_000

    public var customerConsented: Bool
    public var deliveryStatus: DeliveryStatus
    public var sampleContentProvided: Bool
    /// Milliunits of a percent (45 200 is 45.2 %); nil leaves the field out.
    public var consumptionPercentage: Int?
    public var refundPreference: RefundPreference?

    public init(
        customerConsented: Bool, deliveryStatus: DeliveryStatus, sampleContentProvided: Bool,
        consumptionPercentage: Int? = nil, refundPreference: RefundPreference? = nil
    ) {
        self.customerConsented = customerConsented
        self.deliveryStatus = deliveryStatus
        self.sampleContentProvided = sampleContentProvided
        self.consumptionPercentage = consumptionPercentage
        self.refundPreference = refundPreference
    }
}
