import Foundation
import StockroomCore

/// The simulator's App Store Server API key: what App Store Connect would issue, made at start
/// and published at `GET /sim/api-key` so a developer can configure Stockroom with it.
public struct ServerAPIKey: Sendable {
    public let keyID: String
    public let issuerID: String
    public let privateKey: ECPrivateKey

    public init() throws(CryptoError) {
        keyID = "SIM" + String(ByteEncoding.hex(secureRandomBytes(count: 4))).uppercased()
        issuerID = UUID().uuidString.lowercased()
        privateKey = try ECPrivateKey()
    }

    /// Why Apple would answer 401 to this bearer token for `bundleID`, or nil when it is good.
    func problem(with token: String, bundleID: String, now: Date = Date()) -> String? {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3,
            let headerBytes = ByteEncoding.decodeBase64(parts[0]), let claimsBytes = ByteEncoding.decodeBase64(parts[1]),
            let header = try? JSONSerialization.jsonObject(with: Data(headerBytes)) as? [String: Any],
            let claims = try? JSONSerialization.jsonObject(with: Data(claimsBytes)) as? [String: Any],
            let signature = ByteEncoding.decodeBase64(parts[2])
        else { return "not a JWT" }
        guard header["alg"] as? String == "ES256" else { return "alg must be ES256" }
        guard header["kid"] as? String == keyID else { return "unknown kid" }
        guard claims["iss"] as? String == issuerID else { return "wrong iss" }
        guard claims["aud"] as? String == "appstoreconnect-v1" else { return "aud must be appstoreconnect-v1" }
        guard claims["bid"] as? String == bundleID else { return "bid does not match the app" }
        guard let issued = (claims["iat"] as? NSNumber)?.int64Value, let expires = (claims["exp"] as? NSNumber)?.int64Value else {
            return "iat and exp are required"
        }
        let current = Int64(now.timeIntervalSince1970)
        guard expires > current else { return "expired" }
        guard expires - issued <= 3600 else { return "exp is more than 60 minutes after iat" }
        guard privateKey.publicKey.isValidSignature(signature, for: Array("\(parts[0]).\(parts[1])".utf8)) else { return "bad signature" }
        return nil
    }
}
