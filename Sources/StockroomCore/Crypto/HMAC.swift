import COpenSSL

/// HMAC-SHA256, for download tokens and anything else the server signs for itself.
public enum HMACSHA256 {
    /// The 32-byte authentication code of `message` under `key`.
    public static func authenticationCode(for message: [UInt8], key: [UInt8]) -> [UInt8] {
        var code = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        key.withUnsafeBytes { key in
            message.withUnsafeBytes { message in
                _ = HMAC(
                    EVP_sha256(),
                    key.baseAddress, Int32(key.count),
                    message.baseAddress?.assumingMemoryBound(to: UInt8.self), message.count,
                    &code, &length
                )
            }
        }
        return Array(code.prefix(Int(length)))
    }

    /// Whether `code` is the authentication code of `message`, compared in constant time.
    public static func isValid(_ code: [UInt8], for message: [UInt8], key: [UInt8]) -> Bool {
        constantTimeEquals(code, authenticationCode(for: message, key: key))
    }
}

/// Compares two byte strings without leaking, through timing, where they first differ.
///
/// Lengths are public (a MAC's length is fixed), so a length mismatch returns at once.
public func constantTimeEquals(_ lhs: [UInt8], _ rhs: [UInt8]) -> Bool {
    guard lhs.count == rhs.count else { return false }
    guard !lhs.isEmpty else { return true }
    return lhs.withUnsafeBytes { left in
        rhs.withUnsafeBytes { right in
            CRYPTO_memcmp(left.baseAddress, right.baseAddress, left.count) == 0
        }
    }
}

/// Cryptographically secure random bytes from OpenSSL's DRBG.
public func secureRandomBytes(count: Int) -> [UInt8] {
    var bytes = [UInt8](repeating: 0, count: count)
    guard RAND_bytes(&bytes, Int32(count)) == 1 else {
        fatalError("OpenSSL could not produce random bytes: \(OpenSSLError.lastMessage())")
    }
    return bytes
}
