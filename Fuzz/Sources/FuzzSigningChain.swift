import Foundation
import StockroomCore

/// A root, an intermediate and a leaf with Apple's marker OIDs, as the simulator's
/// `SigningChain` makes them, built here on StockroomCore alone so that the fuzz build does not
/// compile the simulator's HTTP stack (Hummingbird) a second time.
final class FuzzSigningChain: Sendable {
    let root: Certificate
    let intermediate: Certificate
    let leaf: Certificate
    private let leafKey: ECPrivateKey

    init(now: Date = Date()) throws(CryptoError) {
        let year: TimeInterval = 365 * 86400
        let rootKey = try ECPrivateKey(), intermediateKey = try ECPrivateKey()
        leafKey = try ECPrivateKey()
        root = try Certificate.issue(
            commonName: "Stockroom Fuzz Root CA", subjectKey: rootKey, issuer: nil, isAuthority: true,
            notBefore: now - 10 * year, notAfter: now + 20 * year, serial: 1)
        intermediate = try Certificate.issue(
            commonName: "Stockroom Fuzz Intermediate", subjectKey: intermediateKey, issuer: (root, rootKey), isAuthority: true,
            notBefore: now - 10 * year, notAfter: now + 10 * year, markerOIDs: [JWSVerifier.intermediateOID], serial: 2)
        leaf = try Certificate.issue(
            commonName: "Stockroom Fuzz App Store Signing", subjectKey: leafKey, issuer: (intermediate, intermediateKey),
            isAuthority: false, notBefore: now - 10 * year, notAfter: now + 5 * year, markerOIDs: [JWSVerifier.leafOID], serial: 3)
    }

    /// A compact ES256 JWS of `payload` with `x5c` = [leaf, intermediate, root].
    func sign(payload: [UInt8]) throws(CryptoError) -> String {
        let chain = [leaf, intermediate, root].map { "\"\(ByteEncoding.base64($0.der))\"" }.joined(separator: ",")
        let header = "{\"alg\":\"ES256\",\"x5c\":[\(chain)]}"
        let signingInput = ByteEncoding.base64URL(Array(header.utf8)) + "." + ByteEncoding.base64URL(payload)
        return signingInput + "." + ByteEncoding.base64URL(try leafKey.sign(Array(signingInput.utf8)))
    }

    /// `payload` as PKCS#7 SignedData signed by the leaf, the intermediate included.
    func signReceipt(payload: [UInt8]) throws(CryptoError) -> [UInt8] {
        try SignedData.sign(payload, signer: leaf, key: leafKey, chain: [intermediate])
    }
}
