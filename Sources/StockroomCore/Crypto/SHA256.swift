import COpenSSL

/// SHA-256 over OpenSSL's EVP interface: one-shot, or incremental for large files.
///
/// Incremental hashing lets the catalogue digest a multi-gigabyte file in fixed-size chunks.
public struct SHA256: ~Copyable {
    private let context: OpaquePointer

    /// Starts a new digest.
    public init() {
        guard let context = EVP_MD_CTX_new(), EVP_DigestInit_ex(context, EVP_sha256(), nil) == 1 else {
            fatalError("OpenSSL could not initialise SHA-256: \(OpenSSLError.lastMessage())")
        }
        self.context = context
    }

    deinit { EVP_MD_CTX_free(context) }

    /// Feeds more bytes into the digest.
    public mutating func update(_ bytes: UnsafeRawBufferPointer) {
        guard bytes.count > 0 else { return }
        EVP_DigestUpdate(context, bytes.baseAddress, bytes.count)
    }

    /// Feeds more bytes into the digest.
    public mutating func update(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { update($0) }
    }

    /// The 32-byte digest; the value is consumed.
    public consuming func finalize() -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        EVP_DigestFinal_ex(context, &digest, &length)
        return Array(digest.prefix(Int(length)))
    }

    /// The digest of `bytes` in one call.
    public static func hash(_ bytes: [UInt8]) -> [UInt8] {
        var hasher = SHA256()
        bytes.withUnsafeBytes { hasher.update($0) }
        return hasher.finalize()
    }
}
