import Foundation

/// A RESCIND_CONSENT notification, as the ledger keeps it: the app download (Apple's
/// `appTransactionId`, in its environment) whose consent was withdrawn, and when.
///
/// What it changes: consumption information is data about the customer that Apple takes only with
/// the customer's consent (`customerConsented`: "If not, don't respond to the CONSUMPTION_REQUEST
/// notification"). Once consent is rescinded for an app download, no consumption answer is sent
/// for any purchase whose signed transaction names that download, whatever the app said before:
/// refund requests for them are recorded unanswered, and an answer already queued is not sent.
///
/// See https://developer.apple.com/documentation/appstoreservernotifications/appdata and
/// https://developer.apple.com/documentation/appstoreserverapi/customerconsented
public struct ConsentRescission: Sendable, Equatable, Codable {
    public var appTransactionID: String
    public var environment: StoreEnvironment
    public var bundleID: String
    /// The RESCIND_CONSENT notification that recorded it (the first, if Apple sent several).
    public var notificationUUID: String
    public var rescindedAt: Date

    public init(appTransactionID: String, environment: StoreEnvironment, bundleID: String, notificationUUID: String, rescindedAt: Date) {
        (self.appTransactionID, self.environment, self.bundleID) = (appTransactionID, environment, bundleID)
        (self.notificationUUID, self.rescindedAt) = (notificationUUID, rescindedAt)
    }

    public enum CodingKeys: String, CodingKey, CaseIterable {
        case appTransactionID = "app_transaction_id", environment, bundleID = "bundle_id", notificationUUID = "notification_uuid"
        case rescindedAt = "rescinded_at"
    }

    /// Why a consumption answer for a purchase of this download is not sent, in the call's record.
    public var reason: String {
        "the customer's consent was rescinded (RESCIND_CONSENT \(notificationUUID), \(RFC3339.utc(rescindedAt))): nothing is sent to Apple"
    }
}

extension ConsentRescission: LedgerRow {
    public static let table = "consent_rescissions"
}

extension Fulfilment {
    /// The app download (Apple's `appTransactionId`) the purchase's signed transaction names; nil
    /// for a receipt, or a transaction signed before Apple added the field. Read from the proof
    /// on record, verified when it was kept: no column, nothing on a download's path.
    public var appTransactionID: String? {
        guard proofKind == .signedTransaction else { return nil }
        let parts = proof.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, var text = Optional(String(parts[1])) else { return nil }
        text = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        text += String(repeating: "=", count: (4 - text.utf8.count % 4) % 4)
        guard let data = Data(base64Encoded: text) else { return nil }
        return (try? JSONDecoder().decode(AppTransactionReference.self, from: data))?.appTransactionId
    }
}

/// The app download a signed payload names, read as `AppTransaction` and `SignedTransaction`
/// read it (`appTransactionID(_:)`), so the two sides always compare the same text.
struct AppTransactionReference: Decodable {
    var appTransactionId: String?

    private enum CodingKeys: String, CodingKey { case appTransactionId }

    init(from decoder: any Decoder) throws {
        appTransactionId = try decoder.container(keyedBy: CodingKeys.self).appTransactionID(.appTransactionId)
    }
}

extension KeyedDecodingContainer {
    /// Apple's `appTransactionId`: a string (or a whole number) of 1 to 64 characters; anything
    /// else is not an ID (nil when absent).
    func appTransactionID(_ key: Key) throws -> String? {
        guard contains(key), try !decodeNil(forKey: key) else { return nil }
        let value = try decodeLenientString(key)
        guard !value.isEmpty, value.utf8.count <= 64 else {
            throw DecodingError.dataCorruptedError(forKey: key, in: self, debugDescription: "appTransactionId must be 1 to 64 characters")
        }
        return value
    }
}

extension LedgerStatement {
    /// Records a rescission once per app download and environment.
    public static func record(_ rescission: ConsentRescission) -> LedgerStatement {
        insert(rescission, onConflict: "(app_transaction_id, environment) DO NOTHING RETURNING 1")
    }

    public static func rescission(of appTransactionID: String, environment: StoreEnvironment) -> LedgerStatement {
        LedgerStatement(
            "SELECT * FROM consent_rescissions WHERE app_transaction_id = ?1 AND environment = ?2", [appTransactionID, environment])
    }
}

extension NotificationLog where Self: LedgerStatementRunner {
    public func recordConsentRescission(_ rescission: ConsentRescission) async throws -> Bool {
        try await execute(.record(rescission)) == 1
    }

    public func consentRescission(of appTransactionID: String, environment: StoreEnvironment) async throws -> ConsentRescission? {
        try await fetch(.rescission(of: appTransactionID, environment: environment), as: ConsentRescission.self).first
    }
}

extension NotificationLog {
    /// The rescission recorded for the app download `row`'s signed transaction names, if any.
    public func consentRescission(of row: Fulfilment) async throws -> ConsentRescission? {
        guard let app = row.appTransactionID, let environment = row.environment else { return nil }
        return try await consentRescission(of: app, environment: environment)
    }
}
