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

    /// The signing key: `configured` (STOCKROOM_TOKEN_SECRET) when given, else the secret kept
    /// in `file`, created once with 32 random bytes and mode 0600.
    public static func loadKey(configured: String?, file: String) throws -> [UInt8] {
        if let configured, !configured.isEmpty { return Array(configured.utf8) }
        if let existing = FileManager.default.contents(atPath: file), let key = ByteEncoding.decodeBase64(String(decoding: existing, as: UTF8.self)), key.count >= 32 {
            return key
        }
        let key = secureRandomBytes(count: 32)
        let descriptor = open(file, O_WRONLY | O_CREAT | O_EXCL, 0o600)
        guard descriptor >= 0 else {
            // Another process created it first: use theirs.
            if errno == EEXIST, let existing = FileManager.default.contents(atPath: file),
                let key = ByteEncoding.decodeBase64(String(decoding: existing, as: UTF8.self)), key.count >= 32
            {
                return key
            }
            throw CocoaError(.fileWriteNoPermission, userInfo: [NSFilePathErrorKey: file])
        }
        let text = Array((ByteEncoding.base64(key) + "\n").utf8)
        let written = text.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        fsync(descriptor)
        close(descriptor)
        guard written == text.count else { throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: file]) }
        return key
    }
}
