import Foundation

/// Signs and checks download tokens: `v1.<expiry>.<base64url product>.<base64url HMAC>`, the
/// HMAC-SHA256 over transaction, product and expiry, keyed by the server's secret.
///
/// A token proves that this server verified the purchase; the resume, status and ack routes take
/// it as a bearer token. Compared in constant time.
public struct DownloadTokenSigner: Sendable {
    private let key: [UInt8]
    /// How long a token authorises content; status and ack accept an authentic expired one.
    public let lifetime: Duration

    public init(key: [UInt8], lifetime: Duration = .seconds(3600)) {
        self.key = key
        self.lifetime = lifetime
    }

    /// A token for `transactionID` and `productID`, expiring `lifetime` after `now`.
    public func token(transactionID: String, productID: String, now: Date = Date()) -> String {
        let expiry = Int64(now.timeIntervalSince1970) + lifetime.components.seconds
        let mac = HMACSHA256.authenticationCode(for: Self.message(transactionID, productID, expiry), key: key)
        return "v1.\(expiry).\(ByteEncoding.base64URL(Array(productID.utf8))).\(ByteEncoding.base64URL(mac))"
    }

    /// What a presented token proves.
    public enum Check: Sendable, Equatable {
        /// Authentic and unexpired, for this product.
        case valid(productID: String)
        /// Authentic, but past its expiry.
        case expired(productID: String)
        /// Not one of ours, altered, or for another transaction.
        case invalid
    }

    public func check(_ token: String, transactionID: String, now: Date = Date()) -> Check {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4, parts[0] == "v1", let expiry = Int64(parts[1]),
            let productBytes = ByteEncoding.decodeBase64(parts[2]), let mac = ByteEncoding.decodeBase64(parts[3])
        else { return .invalid }
        let productID = String(decoding: productBytes, as: UTF8.self)
        guard HMACSHA256.isValid(mac, for: Self.message(transactionID, productID, expiry), key: key) else { return .invalid }
        return Int64(now.timeIntervalSince1970) < expiry ? .valid(productID: productID) : .expired(productID: productID)
    }

    private static func message(_ transactionID: String, _ productID: String, _ expiry: Int64) -> [UInt8] {
        Array("stockroom-download-v1\n\(transactionID)\n\(productID)\n\(expiry)".utf8)
    }

    /// The signing key: `configured` (STOCKROOM_TOKEN_SECRET, at least 32 bytes) when given, else
    /// the secret kept in `file`, created once with 32 random bytes and mode 0600. A kept file
    /// that group or others may read, or that holds no key, is refused rather than used.
    public static func loadKey(configured: String?, file: String) throws(TokenSecretError) -> [UInt8] {
        if let configured, !configured.isEmpty {
            guard configured.utf8.count >= 32 else { throw .tooShort(bytes: configured.utf8.count) }
            return Array(configured.utf8)
        }
        if let key = try existingKey(file) { return key }
        let key = secureRandomBytes(count: 32)
        let descriptor = open(file, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            let error = errno
            // Another process created it first: use theirs.
            if error == EEXIST, let key = try existingKey(file) { return key }
            throw .cannotCreate(reason: String(cString: strerror(error)))
        }
        defer { close(descriptor) }
        // The umask can only take bits away from 0600; make it exactly that regardless.
        fchmod(descriptor, 0o600)
        let text = Array((ByteEncoding.base64(key) + "\n").utf8)
        let written = text.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        guard written == text.count, fsync(descriptor) == 0 else { throw .cannotCreate(reason: String(cString: strerror(errno))) }
        return key
    }

    /// The key kept in `file`, nil when there is no file; refuses one readable beyond its owner.
    private static func existingKey(_ file: String) throws(TokenSecretError) -> [UInt8]? {
        var status = stat()
        guard lstat(file, &status) == 0 else {
            if errno == ENOENT { return nil }
            throw .cannotRead(reason: String(cString: strerror(errno)))
        }
        guard status.st_mode & S_IFMT == S_IFREG else { throw .notAFile }
        let mode = status.st_mode & 0o777
        guard mode & 0o077 == 0 else { throw .readableByOthers(mode: String(mode, radix: 8)) }
        guard status.st_size <= 4096, let data = FileManager.default.contents(atPath: file) else { throw .malformed }
        guard let key = ByteEncoding.decodeBase64(String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)),
            key.count >= 32
        else { throw .malformed }
        return key
    }
}

/// Why the download-token secret cannot be used.
public enum TokenSecretError: Error, Equatable, CustomStringConvertible {
    /// STOCKROOM_TOKEN_SECRET is shorter than 32 bytes.
    case tooShort(bytes: Int)
    /// The kept file may be read by group or others (a secret that may have leaked).
    case readableByOthers(mode: String)
    /// The kept path is a link, a folder or another non-file.
    case notAFile
    /// The kept file holds no base64 key of at least 32 bytes.
    case malformed
    /// The kept file exists but cannot be examined or read.
    case cannotRead(reason: String)
    /// There is no kept file and a new one cannot be written.
    case cannotCreate(reason: String)

    public var description: String {
        switch self {
        case .tooShort(let bytes): "STOCKROOM_TOKEN_SECRET must be at least 32 bytes; it has \(bytes)"
        case .readableByOthers(let mode): "mode \(mode) lets others read it; chmod 600 it, or delete it to make a new one"
        case .notAFile: "it is not a regular file"
        case .malformed: "it holds no base64 key of at least 32 bytes; delete it to make a new one"
        case .cannotRead(let reason): "it cannot be read: \(reason)"
        case .cannotCreate(let reason): "it cannot be created: \(reason)"
        }
    }
}
