import Foundation

/// Verifies a JWS (signed transactions, notifications): ES256 only, the `x5c` chain its policy
/// accepts at the payload's `signedDate`, then the signature over the input exactly as received.
/// The App Store's policy is three certificates, leaf → intermediate → a configured root, with
/// Apple's marker OIDs; StoreKit Testing in Xcode signs with one self-signed certificate. A chain
/// that verified is kept (`VerifiedChainCache`), so the next JWS it signs skips the chain work but
/// not the dates or the signature.
///
/// See https://developer.apple.com/documentation/appstoreserverapi/jwstransaction
public struct JWSVerifier: Sendable {
    /// Apple's marker on the certificate that signs App Store data.
    public static let leafOID = "1.2.840.113635.100.6.11.1"
    /// Apple's marker on the Worldwide Developer Relations intermediate.
    public static let intermediateOID = "1.2.840.113635.100.6.2.1"

    /// The `signedDate`s accepted, in milliseconds since 1970: 1970 to 2100. A number outside
    /// (1e30, a negative one) is refused before it meets a date or OpenSSL's `time_t`.
    public static let signedDateRange: ClosedRange<Double> = 0...4_102_444_800_000

    /// Which chains sign what this verifier accepts.
    public enum ChainPolicy: Sendable {
        /// The App Store's: leaf → intermediate → one of `roots` (several `--trust-root`), each
        /// certificate with Apple's marker OID.
        case appStore(roots: [Certificate])
        /// StoreKit Testing in Xcode: one self-signed certificate, the pinned one when given (any
        /// other proves only that the JWS is well formed: anyone can make one).
        case xcode(pinned: Certificate?)

        /// How many certificates the header's `x5c` holds.
        var certificateCount: Int {
            switch self {
            case .appStore: 3
            case .xcode: 1
            }
        }
    }

    /// Whether `jws` has the compact serialization's shape, checked before anything else runs:
    /// three parts (two dots, counted on the bytes) in at most 64 KiB.
    public static func isCompact(_ jws: String) -> Bool {
        jws.utf8.count <= 64 * 1024 && jws.utf8.reduce(0, { $0 + ($1 == UInt8(ascii: ".") ? 1 : 0) }) == 2
    }

    public let policy: ChainPolicy
    /// Chains that verified, shared by every copy of this verifier; nil verifies each afresh.
    public let chains: VerifiedChainCache?

    /// The App Store's chains, ending at `root` or one of `otherRoots`.
    public init(root: Certificate, otherRoots: [Certificate] = [], chains: VerifiedChainCache? = VerifiedChainCache()) {
        self.init(policy: .appStore(roots: [root] + otherRoots), chains: chains)
    }

    public init(policy: ChainPolicy, chains: VerifiedChainCache? = VerifiedChainCache()) {
        self.policy = policy
        self.chains = chains
    }

    /// The one way a JWS is verified: the chain (or a chain verified before), the signature
    /// and `signedDate`, then the payload decoded as `type` (through `UpstreamJSON`: no
    /// duplicate key, no deep nesting). Whether it is for this app is the caller's check
    /// (`SignedTransactionVerifier` makes it, and is the way in from outside this module).
    func verify<Payload: SignedPayload>(_ jws: String, as type: Payload.Type) -> Result<Verified<Payload>, JWSFailure> {
        verified(jws, as: type).flatMap { signed in
            guard let payload = signed.payload else { return .failure(.malformed("the payload is not \(type.kind)")) }
            return .success(Verified(payload: payload, jws: jws, chain: signed.chain))
        }
    }

    /// The verification: the payload is read once, as `type` and for its `signedDate` together,
    /// and used only once the signature has verified.
    private func verified<Payload: Decodable>(_ jws: String, as type: Payload.Type) -> Result<Signed<Payload>, JWSFailure> {
        // On the bytes in place: a StoreKit JWS carries 4 KB of certificates; walking it as
        // Characters costs more than verifying the signature, and walking it through its UTF8View
        // and copying its signing input a tenth of a warm verification.
        if let result = jws.utf8.withContiguousStorageIfAvailable({ verified(UnsafeRawBufferPointer($0), as: type) }) { return result }
        return Array(jws.utf8).withUnsafeBytes { verified($0, as: type) }
    }

    private func verified<Payload: Decodable>(_ jws: UnsafeRawBufferPointer, as type: Payload.Type) -> Result<Signed<Payload>, JWSFailure> {
        // memchr: 5 KB scanned a byte at a time was 3% of a warm verification.
        func dot(from start: Int) -> Int? {
            guard start < jws.count, let found = memchr(jws.baseAddress! + start, Int32(UInt8(ascii: ".")), jws.count - start) else {
                return nil
            }
            return UnsafeRawPointer(found) - jws.baseAddress!
        }
        guard let first = dot(from: 0), let second = dot(from: first + 1), dot(from: second + 1) == nil
        else { return .failure(.malformed("a JWS has three dot-separated parts")) }
        let headerBytes = UnsafeRawBufferPointer(rebasing: jws[..<first])
        let payload = UnsafeRawBufferPointer(rebasing: jws[(first + 1)..<second])
        let signature = UnsafeRawBufferPointer(rebasing: jws[(second + 1)...])
        let signingInput = UnsafeRawBufferPointer(rebasing: jws[..<second])
        // The header's exact bytes, x5c included, key the chains that verified: a header seen
        // before is neither decoded nor parsed again.
        if let chains, let chain = chains.chain(headerBytes) {
            var signed: Signed<Payload>
            switch Self.signed(payload: payload, signature: signature, as: type) {
            case .success(let value): signed = value
            case .failure(let failure): return .failure(failure)
            }
            signed.chain = chain
            if chains.servable(chain, at: signed.time) {
                return chain.key.isValidSignature(signed.signature, for: signingInput) ? .success(signed) : .failure(.badSignature)
            }
            // Not valid at this signedDate: the full verification says why.
        }
        guard let header = JWSHeader.of(String(decoding: headerBytes, as: UTF8.self)) else {
            return .failure(.malformed("the header is not base64url JSON"))
        }
        guard header.alg == "ES256" else {
            return .failure(.malformed("alg must be ES256, not \(header.alg ?? "missing")"))
        }
        let count = policy.certificateCount
        guard let chain = header.x5c, chain.count == count else {
            return .failure(.malformed("x5c must hold exactly \(count) certificate\(count == 1 ? "" : "s")"))
        }
        var signed: Signed<Payload>
        switch Self.signed(payload: payload, signature: signature, as: type) {
        case .success(let value): signed = value
        case .failure(let failure): return .failure(failure)
        }

        var certificates: [Certificate] = []
        for (index, entry) in chain.prefix(max(1, count - 1)).enumerated() {
            // x5c entries are standard base64 DER (RFC 7515 §4.1.6).
            guard let der = ByteEncoding.decodeBase64(entry), let certificate = try? Certificate(der: der) else {
                return .failure(.badCertificate("x5c[\(index)] is not a DER certificate"))
            }
            certificates.append(certificate)
        }
        let verifiedChain: [Certificate]
        switch Self.check(certificates, under: policy, at: signed.time) {
        case .success(let chain): verifiedChain = chain
        case .failure(let failure): return .failure(failure)
        }
        guard let key = verifiedChain[0].publicKey, key.isValidSignature(signed.signature, for: signingInput) else {
            return .failure(.badSignature)
        }
        let verified = VerifiedChainCache.Chain(certificates: verifiedChain, key: key)
        chains?.keep(verified, under: headerBytes)
        signed.chain = verified
        return .success(signed)
    }

    /// The chain `certificates` (the header's, without the root) make under `policy` at `time`,
    /// leaf first and ending at the certificate trusted, or why there is none.
    private static func check(_ certificates: [Certificate], under policy: ChainPolicy, at time: Date) -> Result<[Certificate], JWSFailure>
    {
        switch policy {
        case .appStore(let roots):
            let (leaf, intermediate) = (certificates[0], certificates[1])
            var problem: String?
            for root in roots {
                guard let found = CertificateChain.problem(leaf: leaf, intermediates: [intermediate], root: root, at: time) else {
                    guard leaf.hasExtension(oid: leafOID) else { return .failure(.missingOID("the leaf lacks \(leafOID)")) }
                    guard intermediate.hasExtension(oid: intermediateOID) else {
                        return .failure(.missingOID("the intermediate lacks \(intermediateOID)"))
                    }
                    return .success([leaf, intermediate, root])
                }
                problem = problem ?? found
            }
            return .failure(.badChain(problem ?? "no trusted root"))
        case .xcode(let pinned):
            let only = certificates[0]
            if let pinned, pinned.der != only.der { return .failure(.badChain("not the pinned StoreKit Test certificate")) }
            if let problem = CertificateChain.problem(leaf: only, intermediates: [], root: only, at: time) {
                return .failure(.badChain("the certificate is not self-signed and valid: \(problem)"))
            }
            return .success([only])
        }
    }

    /// A payload read for the one field every App Store payload carries that the verification
    /// needs, when it was signed (milliseconds; nil when missing or not a number), and as the
    /// caller's type (nil when it is not one). Both come from one parse of the bytes.
    private struct Dated<Payload: Decodable>: Decodable {
        var signedDate: Double?
        var payload: Payload?

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            signedDate = try? container.decodeIfPresent(Double.self, forKey: .signedDate)
            payload = try? Payload(from: decoder)
        }

        private enum CodingKeys: String, CodingKey { case signedDate }
    }

    /// The signed part of a JWS: its payload as the caller's type, the moment it claims, the
    /// signature, and (once verified) the chain that signed it.
    private struct Signed<Payload> {
        var payload: Payload?
        var time: Date
        var signature: [UInt8]
        var chain: VerifiedChainCache.Chain?
    }

    private static func signed<Payload: Decodable>(
        payload: UnsafeRawBufferPointer, signature encodedSignature: UnsafeRawBufferPointer, as type: Payload.Type
    ) -> Result<Signed<Payload>, JWSFailure> {
        guard let bytes = ByteEncoding.decodeBase64(payload), let dated = UpstreamJSON.decode(Dated<Payload>.self, from: bytes)
        else { return .failure(.malformed("the payload is not base64url JSON")) }
        guard let signedDate = dated.signedDate, signedDate.isFinite else {
            return .failure(.malformed("the payload has no signedDate"))
        }
        guard signedDateRange.contains(signedDate) else {
            return .failure(.malformed("signedDate must be milliseconds between 1970 and 2100"))
        }
        guard let signature = ByteEncoding.decodeBase64(encodedSignature), signature.count == 64 else {
            return .failure(.malformed("the signature is not 64 bytes of base64url"))
        }
        return .success(
            Signed(
                payload: dated.payload, time: Date(timeIntervalSince1970: signedDate / 1000), signature: signature))
    }
}

/// Why a JWS was refused; each has a stable code.
public enum JWSFailure: Error, Equatable, CustomStringConvertible {
    case malformed(String)
    case badCertificate(String)
    case badChain(String)
    case missingOID(String)
    case badSignature
    case wrongBundle(expected: String, actual: String)
    case wrongEnvironment(expected: StoreEnvironment, actual: String)
    /// A certificate of the signing chain is revoked, as its OCSP responder said.
    case certificateRevoked(String)
    /// `--ocsp hard`: the responder does not know a certificate of the signing chain.
    case revocationUnknown(String)
    /// `--ocsp hard`: no usable OCSP answer could be had (a transient failure: try again later).
    case revocationUnavailable(String)

    public var code: String {
        switch self {
        case .malformed: "jws_malformed"
        case .badCertificate: "jws_bad_certificate"
        case .badChain: "jws_bad_chain"
        case .missingOID: "jws_missing_apple_oid"
        case .badSignature: "jws_bad_signature"
        case .wrongBundle: "bundle_mismatch"
        case .wrongEnvironment: "environment_mismatch"
        case .certificateRevoked: "jws_certificate_revoked"
        case .revocationUnknown: "jws_certificate_status_unknown"
        case .revocationUnavailable: "jws_revocation_unavailable"
        }
    }

    public var description: String {
        switch self {
        case .malformed(let detail): "malformed JWS: \(detail)"
        case .badCertificate(let detail): "bad certificate: \(detail)"
        case .badChain(let detail): "the chain does not verify to the trusted root: \(detail)"
        case .missingOID(let detail): "missing Apple OID: \(detail)"
        case .badSignature: "the ES256 signature does not verify"
        case .wrongBundle(let expected, let actual): "the transaction is for bundle \(actual), not \(expected)"
        case .wrongEnvironment(let expected, let actual): "the transaction is from \(actual), not \(expected.rawValue)"
        case .certificateRevoked(let subject): "a certificate of the signing chain is revoked (OCSP): \(subject)"
        case .revocationUnknown(let subject): "the OCSP responder does not know a certificate of the signing chain: \(subject)"
        case .revocationUnavailable(let detail): "no usable OCSP answer for the signing chain: \(detail)"
        }
    }
}
