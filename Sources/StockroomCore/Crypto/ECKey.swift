import COpenSSL

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
        guard EVP_PKEY_get_base_id(key) == EVP_PKEY_EC, EVP_PKEY_get_bits(key) == 256 else {
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
public final class ECPublicKey: @unchecked Sendable {
    let key: OpaquePointer

    init(owning key: OpaquePointer) {
        self.key = key
    }

    deinit { EVP_PKEY_free(key) }

    /// Whether `signature` (JOSE r‖s, 64 bytes) is this key's ES256 signature of `message`.
    /// SHA-256 fetched once from the default provider: `EVP_sha256()` makes every verification
    /// look it up again under OpenSSL's locks (8% of a warm JWS verification's time). Never freed.
    nonisolated(unsafe) static let sha256: OpaquePointer? = EVP_MD_fetch(nil, "SHA256", nil)

    public func isValidSignature(_ signature: [UInt8], for message: [UInt8]) -> Bool {
        guard signature.count == 64, EVP_PKEY_get_base_id(key) == EVP_PKEY_EC else { return false }
        guard let ecdsa = ECDSA_SIG_new() else { return false }
        defer { ECDSA_SIG_free(ecdsa) }
        let r = signature.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress, 32, nil) }
        let s = signature.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress! + 32, 32, nil) }
        guard let r, let s, ECDSA_SIG_set0(ecdsa, r, s) == 1 else {
            BN_free(r)
            BN_free(s)
            return false
        }
        var derPointer: UnsafeMutablePointer<UInt8>?
        let derLength = i2d_ECDSA_SIG(ecdsa, &derPointer)
        guard derLength > 0, let derPointer else { return false }
        defer { stockroom_OPENSSL_free(derPointer) }
        guard let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context) }
        return message.withUnsafeBytes { bytes in
            EVP_DigestVerifyInit(context, nil, ECPublicKey.sha256, nil, key) == 1
                && EVP_DigestVerify(context, derPointer, Int(derLength), bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), bytes.count) == 1
        }
    }
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
