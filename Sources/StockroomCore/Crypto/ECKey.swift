import COpenSSL
import Synchronization

/// A P-256 private key (ES256): signs JWS and JWTs, and issues the simulator's certificates.
public final class ECPrivateKey: @unchecked Sendable {
    let key: OpaquePointer

    /// A new random key.
    public init() throws(CryptoError) {
        guard let key = stockroom_EC_P256_generate() else { throw .openSSL("P-256 key generation", OpenSSLError.lastMessage()) }
        self.key = key
    }

    /// A PEM key, such as an App Store Connect `.p8` file (PKCS#8).
    public init(pem: String) throws(CryptoError) {
        let parsed: OpaquePointer? = Array(pem.utf8).withUnsafeBytes { buffer in
            guard let length = Int32(exactly: buffer.count) else { return nil }  // OpenSSL's BIO takes an int
            let bio = BIO_new_mem_buf(buffer.baseAddress, length)
            defer { BIO_free(bio) }
            return PEM_read_bio_PrivateKey(bio, nil, nil, nil)
        }
        guard let key = parsed else { throw .invalidKey(OpenSSLError.lastMessage()) }
        guard isP256Key(key) else {
            EVP_PKEY_free(key)
            throw .invalidKey("not a P-256 EC key")
        }
        self.key = key
    }

    deinit { EVP_PKEY_free(key) }

    /// The key as PKCS#8 PEM (the `.p8` layout).
    public var pem: String {
        guard let bio = BIO_new(BIO_s_mem()) else { return "" }
        defer { BIO_free(bio) }
        PEM_write_bio_PrivateKey(bio, key, nil, nil, 0, nil, nil)
        return BIOText.read(bio)
    }

    public var publicKey: ECPublicKey {
        EVP_PKEY_up_ref(key)
        return ECPublicKey(owning: key)
    }

    /// ES256 over `message`, in JOSE form: r‖s, 32 bytes each.
    public func sign(_ message: [UInt8]) throws(CryptoError) -> [UInt8] {
        guard let context = EVP_MD_CTX_new() else { throw .openSSL("signing", "no context") }
        defer { EVP_MD_CTX_free(context) }
        var length = 0
        var der = [UInt8](repeating: 0, count: 80)
        let signed = message.withUnsafeBytes { bytes in
            EVP_DigestSignInit(context, nil, EVP_sha256(), nil, key) == 1
                && EVP_DigestSign(context, nil, &length, bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), bytes.count) == 1
                && length <= der.count
                && EVP_DigestSign(context, &der, &length, bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), bytes.count) == 1
        }
        guard signed else { throw .openSSL("signing", OpenSSLError.lastMessage()) }
        var cursor: UnsafePointer<UInt8>? = der.withUnsafeBufferPointer { $0.baseAddress }
        let parsed: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
            cursor = buffer.baseAddress
            return d2i_ECDSA_SIG(nil, &cursor, length)
        }
        guard let signature = parsed else { throw .openSSL("signature decoding", OpenSSLError.lastMessage()) }
        defer { ECDSA_SIG_free(signature) }
        var jose = [UInt8](repeating: 0, count: 64)
        let r = ECDSA_SIG_get0_r(signature)
        let s = ECDSA_SIG_get0_s(signature)
        jose.withUnsafeMutableBufferPointer { out in
            _ = BN_bn2binpad(r, out.baseAddress, 32)
            _ = BN_bn2binpad(s, out.baseAddress! + 32, 32)
        }
        return jose
    }
}

/// A P-256 public key: verifies ES256 signatures.
///
/// A verification hashes the message, then checks the signature over the digest on a context
/// prepared once for this key (`EVP_PKEY_verify` may be called again on the same context). Setting
/// a context up cost as much as the curve arithmetic: `EVP_DigestVerifyInit` fetches the algorithm
/// from the provider under OpenSSL's locks on every call. A context serves one verification at a
/// time, so the idle ones wait in a small pool.
public final class ECPublicKey: @unchecked Sendable {
    let key: OpaquePointer
    /// Whether the key is on P-256; ES256 accepts no other curve.
    private let isP256: Bool
    private let idle = Mutex<[VerifyContext]>([])
    /// Idle contexts kept; more are freed after use (one per core is plenty).
    private static let idleLimit = 16

    init(owning key: OpaquePointer) {
        self.key = key
        self.isP256 = isP256Key(key)
    }

    deinit {
        EVP_PKEY_free(key)
        for context in idle.withLock({ $0 }) { EVP_PKEY_CTX_free(context.pointer) }
    }

    /// SHA-256 fetched once from the default provider: `EVP_sha256()` makes every digest look it
    /// up again under OpenSSL's locks. Never freed.
    nonisolated(unsafe) static let sha256: OpaquePointer? = EVP_MD_fetch(nil, "SHA256", nil)

    /// Whether `signature` (JOSE r‖s, 64 bytes) is this key's ES256 signature of `message`.
    public func isValidSignature(_ signature: [UInt8], for message: [UInt8]) -> Bool {
        message.withUnsafeBytes { isValidSignature(signature, for: $0) }
    }

    /// The same over bytes in place: a JWS's signing input is 5 KB of a string already in memory.
    public func isValidSignature(_ signature: [UInt8], for message: UnsafeRawBufferPointer) -> Bool {
        guard isP256, signature.count == 64, let sha256 = Self.sha256 else { return false }
        var digest = [UInt8](repeating: 0, count: 32)
        var digestLength: UInt32 = 0
        let hashed = EVP_Digest(message.baseAddress, message.count, &digest, &digestLength, sha256, nil) == 1
        guard hashed, digestLength == 32, let context = takeContext() else { return false }
        let der = Self.der(signature)
        let verified = EVP_PKEY_verify(context.pointer, der, der.count, digest, digest.count) == 1
        putBack(context)
        return verified
    }

    /// An `EVP_PKEY_CTX` set up to verify with this key, used by one verification at a time.
    private struct VerifyContext: @unchecked Sendable {
        let pointer: OpaquePointer
    }

    /// An idle context, or a new one.
    private func takeContext() -> VerifyContext? {
        if let context = idle.withLock({ $0.popLast() }) { return context }
        guard let context = EVP_PKEY_CTX_new_from_pkey(nil, key, nil) else { return nil }
        guard EVP_PKEY_verify_init(context) == 1 else {
            EVP_PKEY_CTX_free(context)
            return nil
        }
        return VerifyContext(pointer: context)
    }

    private func putBack(_ context: VerifyContext) {
        let kept = idle.withLock { idle in
            guard idle.count < Self.idleLimit else { return false }
            idle.append(context)
            return true
        }
        if !kept { EVP_PKEY_CTX_free(context.pointer) }
    }

    /// A JOSE signature (r‖s) as the DER `ECDSA-Sig-Value` OpenSSL reads: SEQUENCE { INTEGER r,
    /// INTEGER s }, each minimal and positive. OpenSSL refuses any DER that is not the canonical
    /// encoding of what it decodes, so a mistake here refuses a signature, never accepts one.
    static func der(_ signature: [UInt8]) -> [UInt8] {
        func integer(_ bytes: ArraySlice<UInt8>) -> [UInt8] {
            var body = Array(bytes.drop { $0 == 0 })
            if body.isEmpty || body[0] & 0x80 != 0 { body.insert(0, at: 0) }  // zero, or a sign byte
            return [0x02, UInt8(body.count)] + body
        }
        let content = integer(signature[0..<32]) + integer(signature[32..<64])
        return [0x30, UInt8(content.count)] + content  // at most 70 bytes: the short length form
    }
}

/// Whether `key` is an EC key on P-256 (prime256v1), the one curve ES256 allows. Its size does not
/// tell: secp256k1 and brainpoolP256r1 keys are 256 bits too.
func isP256Key(_ key: OpaquePointer) -> Bool {
    guard EVP_PKEY_get_base_id(key) == EVP_PKEY_EC else { return false }
    var name = [CChar](repeating: 0, count: 64)
    var length = 0
    guard EVP_PKEY_get_group_name(key, &name, name.count, &length) == 1 else { return false }
    return String(decoding: name.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self) == "prime256v1"
}

/// Why a cryptographic operation failed.
public enum CryptoError: Error, Equatable, CustomStringConvertible {
    case invalidKey(String)
    case invalidCertificate(String)
    case openSSL(String, String)

    public var description: String {
        switch self {
        case .invalidKey(let detail): "invalid key: \(detail)"
        case .invalidCertificate(let detail): "invalid certificate: \(detail)"
        case .openSSL(let operation, let detail): "\(operation) failed: \(detail)"
        }
    }
}

/// Reads a memory BIO's contents as text.
enum BIOText {
    static func read(_ bio: OpaquePointer) -> String {
        var data: UnsafeMutablePointer<CChar>?
        let length = stockroom_BIO_get_mem_data(bio, &data)
        guard length > 0, let data else { return "" }
        return String(decoding: UnsafeRawBufferPointer(start: data, count: length), as: UTF8.self)
    }
}
