/// A payload whose JWS verified: chain, signature and `signedDate`, then (through
/// `SignedTransactionVerifier`) the app's bundle and environment. Only verification makes one, so
/// a value of this type is the proof that the checks ran; nothing needs to verify it again.
public struct Verified<Payload: Sendable>: Sendable {
    /// What the JWS says.
    public let payload: Payload
    /// The JWS as it verified: what a proof keeps.
    public let jws: String
    /// The chain that signed it, for the revocation step after verification; nil when none is
    /// checked (StoreKit Testing in Xcode).
    public let chain: VerifiedChainCache.Chain?

    init(payload: Payload, jws: String, chain: VerifiedChainCache.Chain? = nil) {
        self.payload = payload
        self.jws = jws
        self.chain = chain
    }
}

extension Verified: Equatable where Payload: Equatable {}

/// A payload Apple signs as a JWS: a transaction, a notification, a renewal info.
///
/// `SignedTransactionVerifier.verify(_:as:)` verifies the JWS, decodes the payload through
/// `UpstreamJSON`, and then asks the payload whether it is for this app.
public protocol SignedPayload: Decodable, Sendable {
    /// What the payload is, in a refusal's words: "a transaction".
    static var kind: String { get }

    /// Why the payload is not for the app `bundleID` in `environment` (nil: either
    /// environment), or nil when it is.
    func mismatch(bundleID: String, environment: StoreEnvironment?) -> JWSFailure?
}

/// A JWS header, as App Store JWS carry it: the algorithm and the certificate chain. Other
/// members (`kid`, `typ`) are not read.
///
/// See https://datatracker.ietf.org/doc/html/rfc7515#section-4.1
struct JWSHeader: Decodable {
    /// Nil when missing or not a string; refused unless `ES256`.
    var alg: String?
    /// Nil when missing or not an array of strings.
    var x5c: [String]?
    /// The number of entries `x5c` holds, whatever they are.
    var x5cCount: Int?

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        alg = try? container.decodeIfPresent(String.self, forKey: .alg)
        x5c = try? container.decodeIfPresent([String].self, forKey: .x5c)
        x5cCount = (try? container.nestedUnkeyedContainer(forKey: .x5c))?.count
    }

    private enum CodingKeys: String, CodingKey { case alg, x5c }

    /// The header of `jws` (its text up to the first dot), or nil when it is not base64url JSON.
    static func of(_ encoded: some StringProtocol) -> JWSHeader? {
        guard let bytes = ByteEncoding.decodeBase64(encoded) else { return nil }
        return UpstreamJSON.decode(JWSHeader.self, from: bytes)
    }
}
