/// Why Apple revoked a transaction (`revocationType`), or a value Apple adds later.
///
/// See https://developer.apple.com/documentation/appstoreserverapi/revocationtype
public enum RevocationType: AppleEnumeration {
    case refundFull
    case refundProrated
    case familyRevoke
    case unrecognized(String)

    public static let recognized: [RevocationType] = [.refundFull, .refundProrated, .familyRevoke]

    public var rawValue: String {
        switch self {
        case .refundFull: "REFUND_FULL"
        case .refundProrated: "REFUND_PRORATED"
        case .familyRevoke: "FAMILY_REVOKE"
        case .unrecognized(let raw): raw
        }
    }
}
