import Foundation

/// The app download a RESCIND_CONSENT notification names: its `appData.signedAppTransactionInfo`,
/// decoded from a verified JWS. `appTransactionId` is the one link Apple gives between that
/// notification and the purchases made in the app: StoreKit 2 transactions carry the same ID.
///
/// See https://developer.apple.com/documentation/appstoreservernotifications/appdata and
/// https://developer.apple.com/documentation/appstoreserverapi/jwsapptransactiondecodedpayload
public struct AppTransaction: SignedPayload, Equatable {
    public static let kind = "an app transaction"

    public var appTransactionId: String
    public var bundleId: String
    /// Apple's `receiptType`: `Production`, `Sandbox` (or `Xcode`).
    public var receiptType: String
    public var signedDate: Int64

    enum CodingKeys: String, CodingKey { case appTransactionId, bundleId, receiptType, signedDate }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        guard let app = try container.appTransactionID(.appTransactionId) else {
            throw DecodingError.valueNotFound(
                String.self, .init(codingPath: [CodingKeys.appTransactionId], debugDescription: "appTransactionId is required"))
        }
        appTransactionId = app
        bundleId = try container.decode(String.self, forKey: .bundleId)
        receiptType = try container.decode(String.self, forKey: .receiptType)
        guard let signed = try container.decodeMilliseconds(.signedDate) else {
            throw DecodingError.valueNotFound(
                Int64.self, .init(codingPath: [CodingKeys.signedDate], debugDescription: "signedDate is required"))
        }
        signedDate = signed
    }

    /// The environment the app was downloaded in (`Xcode` counts as neither).
    public var environment: StoreEnvironment? { StoreEnvironment(rawValue: receiptType) }

    public func mismatch(bundleID: String, environment: StoreEnvironment?) -> JWSFailure? {
        guard bundleId == bundleID else { return .wrongBundle(expected: bundleID, actual: bundleId) }
        if let environment, self.environment != environment {
            return .wrongEnvironment(expected: environment, actual: receiptType)
        }
        return nil
    }
}
