import Foundation

/// The body of Set App Account Token: the UUID that binds a purchase to an account of the app's.
/// Queued with its call (`ServerCall.body`) and sent as queued, so the audit shows what Apple got.
///
/// See https://developer.apple.com/documentation/appstoreserverapi/updateappaccounttokenrequest
public struct UpdateAppAccountTokenRequest: Sendable, Equatable, Codable {
    /// Apple's `appAccountToken`, a UUID, lowercased as StoreKit writes it.
    public var appAccountToken: String

    public init(appAccountToken: String) {
        self.appAccountToken = appAccountToken.lowercased()
    }

    /// The request as JSON text; nil only if it cannot be encoded.
    public var json: String? {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(self)).map { String(decoding: $0, as: UTF8.self) }
    }

    /// The request a queued call carries, or nil when its body is none.
    public init?(json: String?) {
        guard let json, let decoded = try? JSONDecoder().decode(Self.self, from: Data(json.utf8)) else { return nil }
        self = decoded
    }
}
