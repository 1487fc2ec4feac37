import Foundation
import StockroomCore

/// The simulator's stand-in for Apple's signing chain: a test root, an intermediate carrying
/// Apple's intermediate OID, and a leaf carrying Apple's leaf OID, made at start.
///
/// A server trusts this root only when it is pointed at the simulator.
public final class SigningChain: Sendable {
    public let root: Certificate
    public let intermediate: Certificate
    public let leaf: Certificate
    private let leafKey: ECPrivateKey

    public init(now: Date = Date()) throws(CryptoError) {
        let year: TimeInterval = 365 * 86400
        let rootKey = try ECPrivateKey()
        let intermediateKey = try ECPrivateKey()
        leafKey = try ECPrivateKey()
        root = try Certificate.issue(
            commonName: "Stockroom Simulator Root CA", subjectKey: rootKey, issuer: nil, isAuthority: true,
            notBefore: now - year, notAfter: now + 20 * year, serial: 1)
        intermediate = try Certificate.issue(
            commonName: "Stockroom Simulator WWDR Intermediate", subjectKey: intermediateKey, issuer: (root, rootKey), isAuthority: true,
            notBefore: now - year, notAfter: now + 10 * year, markerOIDs: [JWSVerifier.intermediateOID], serial: 2)
        leaf = try Certificate.issue(
            commonName: "Stockroom Simulator App Store Signing", subjectKey: leafKey, issuer: (intermediate, intermediateKey),
            isAuthority: false, notBefore: now - year, notAfter: now + 5 * year, markerOIDs: [JWSVerifier.leafOID], serial: 3)
    }

    /// A JWS of `payload` (JSON bytes) signed by the leaf, with `x5c` = [leaf, intermediate, root].
    public func sign(payload: [UInt8]) throws(CryptoError) -> String {
        try Self.jws(payload: payload, key: leafKey, x5c: [leaf, intermediate, root])
    }

    /// An app receipt: `payload` as PKCS#7 SignedData signed by the leaf, the intermediate included,
    /// as BER with indefinite lengths (as Xcode's and Apple's are).
    public func signReceipt(payload: [UInt8]) throws(CryptoError) -> [UInt8] {
        try SignedData.sign(payload, signer: leaf, key: leafKey, chain: [intermediate])
    }

    /// The `signature` of a transaction receipt: ES256 (raw r‖s) by the leaf over `bytes`.
    public func signTransactionReceipt(_ bytes: [UInt8]) throws(CryptoError) -> [UInt8] {
        try leafKey.sign(bytes)
    }

    /// Whether `signature` is the leaf's over `bytes`: how the simulator tells its own
    /// transaction receipts from altered ones.
    public func isValidTransactionReceiptSignature(_ signature: [UInt8], for bytes: [UInt8]) -> Bool {
        leafKey.publicKey.isValidSignature(signature, for: bytes)
    }

    /// A compact JWS with any key, chain and algorithm name: the simulator's, or a test's forgery.
    public static func jws(payload: [UInt8], key: ECPrivateKey, x5c: [Certificate], alg: String = "ES256") throws(CryptoError) -> String {
        let header: [String: Any] = ["alg": alg, "x5c": x5c.map { ByteEncoding.base64($0.der) }]
        let headerJSON = (try? JSONSerialization.data(withJSONObject: header, options: [.sortedKeys])) ?? Data()
        let signingInput = ByteEncoding.base64URL(Array(headerJSON)) + "." + ByteEncoding.base64URL(payload)
        return signingInput + "." + ByteEncoding.base64URL(try key.sign(Array(signingInput.utf8)))
    }
}
