import Foundation

/// AWS Signature Version 4 for S3 (and the stores that speak its API: R2, B2, MinIO, Ceph,
/// SeaweedFS): the canonical request, the string to sign, the signing key, the `Authorization`
/// header, and a presigned URL.
///
/// libcurl signs the requests Stockroom itself sends (`CURLOPT_AWS_SIGV4`); a presigned URL is a
/// request someone else sends (the app, redirected), so it is computed here. Checked against the
/// worked examples of AWS's documentation (`SigV4Tests`).
///
/// See https://docs.aws.amazon.com/AmazonS3/latest/API/sig-v4-header-based-auth.html and
/// https://docs.aws.amazon.com/AmazonS3/latest/API/sigv4-query-string-auth.html
public struct SigV4: Sendable {
    /// An access key, its secret and, for temporary credentials, a session token. Never printed:
    /// its description shows the access key ID alone.
    public struct Credentials: Sendable, CustomStringConvertible, CustomDebugStringConvertible {
        public var accessKeyID: String
        public var secretAccessKey: String
        public var sessionToken: String?

        public init(accessKeyID: String, secretAccessKey: String, sessionToken: String? = nil) {
            self.accessKeyID = accessKeyID
            self.secretAccessKey = secretAccessKey
            self.sessionToken = sessionToken
        }

        public var description: String { "access key \(accessKeyID) (secret withheld)" }
        public var debugDescription: String { description }
    }

    /// What a presigned URL may not outlive: S3 refuses more than 7 days.
    public static let longestExpiry: Duration = .seconds(604_800)
    /// The SHA-256 of an empty payload, as a GET or HEAD signs it.
    public static let emptyPayloadHash = ByteEncoding.hex(SHA256.hash([]))

    public var credentials: Credentials
    public var region: String
    public var service = "s3"

    public init(credentials: Credentials, region: String) {
        self.credentials = credentials
        self.region = region
    }

    /// A request to sign: `path` as it goes on the wire (already encoded, one segment at a time,
    /// by `encodePath`), its query parameters not yet encoded, and the headers to sign (`host`
    /// among them).
    public struct Request: Sendable {
        public var method: String
        public var path: String
        public var query: [(name: String, value: String)]
        public var headers: [(name: String, value: String)]
        public var payloadHash: String

        public init(
            method: String, path: String, query: [(name: String, value: String)] = [], headers: [(name: String, value: String)],
            payloadHash: String
        ) {
            self.method = method
            self.path = path
            self.query = query
            self.headers = headers
            self.payloadHash = payloadHash
        }
    }

    /// The `Authorization` header of `request` at `date`; `x-amz-date` (and `x-amz-content-sha256`,
    /// for S3) must be among its headers, as sent.
    public func authorization(_ request: Request, date: Date) -> String {
        let stamp = Self.stamp(date)
        let (canonical, signedHeaders) = Self.canonicalRequest(request)
        let signature = sign(canonical, stamp: stamp)
        return
            """
            AWS4-HMAC-SHA256 Credential=\(credentials.accessKeyID)/\(scope(stamp.day)), SignedHeaders=\(signedHeaders), \
            Signature=\(signature)
            """
    }

    /// A URL that lets whoever holds it send `method` to the object at `path` on `base`
    /// (`https://host[:port]`), until `expires` after `date`, with no other credential. It signs the
    /// host alone; the expiry is clamped to 1 s … 7 days.
    public func presignedURL(
        method: String, base: URL, path: String, expires: Duration, date: Date, query: [(name: String, value: String)] = []
    ) -> URL? {
        guard let host = base.host, let scheme = base.scheme?.lowercased(), scheme == "https" || scheme == "http" else { return nil }
        let stamp = Self.stamp(date)
        let seconds = min(max(expires.components.seconds, 1), Self.longestExpiry.components.seconds)
        var parameters =
            query + [
                ("X-Amz-Algorithm", "AWS4-HMAC-SHA256"), ("X-Amz-Credential", "\(credentials.accessKeyID)/\(scope(stamp.day))"),
                ("X-Amz-Date", stamp.time), ("X-Amz-Expires", String(seconds)), ("X-Amz-SignedHeaders", "host"),
            ]
        if let token = credentials.sessionToken { parameters.append(("X-Amz-Security-Token", token)) }
        let bracketed = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host  // an IPv6 address, as a Host header writes it
        let authority = base.port.map { "\(bracketed):\($0)" } ?? bracketed
        let request = Request(
            method: method, path: path, query: parameters, headers: [("host", authority)], payloadHash: "UNSIGNED-PAYLOAD")
        let signature = sign(Self.canonicalRequest(request).canonical, stamp: stamp)
        let queryText = Self.canonicalQuery(parameters) + "&X-Amz-Signature=" + signature
        return URL(string: "\(scheme)://\(authority)\(path)?\(queryText)")
    }

    // MARK: The steps, as the documentation names them

    /// The canonical request and the signed header names.
    static func canonicalRequest(_ request: Request) -> (canonical: String, signedHeaders: String) {
        var headers: [String: String] = [:]
        for (name, value) in request.headers {
            let key = name.lowercased()
            let trimmed = value.split(whereSeparator: { $0 == " " || $0 == "\t" }).joined(separator: " ")
            headers[key] = headers[key].map { $0 + "," + trimmed } ?? trimmed
        }
        let names = headers.keys.sorted()
        let signed = names.joined(separator: ";")
        let canonical = [
            request.method, request.path, canonicalQuery(request.query), names.map { "\($0):\(headers[$0]!)\n" }.joined(), signed,
            request.payloadHash,
        ].joined(separator: "\n")
        return (canonical, signed)
    }

    /// Parameters URI-encoded, sorted by name (then value).
    static func canonicalQuery(_ parameters: [(name: String, value: String)]) -> String {
        let encoded: [(name: String, value: String)] = parameters.map { (encode($0.name, slash: true), encode($0.value, slash: true)) }
        let sorted = encoded.sorted { first, second in first.name == second.name ? first.value < second.value : first.name < second.name }
        return sorted.map { "\($0.name)=\($0.value)" }.joined(separator: "&")
    }

    private func scope(_ day: String) -> String { "\(day)/\(region)/\(service)/aws4_request" }

    /// The hex signature of `canonical` with the key derived for the day, region and service.
    func sign(_ canonical: String, stamp: (day: String, time: String)) -> String {
        let stringToSign = "AWS4-HMAC-SHA256\n\(stamp.time)\n\(scope(stamp.day))\n\(ByteEncoding.hex(SHA256.hash(Array(canonical.utf8))))"
        var key = Array("AWS4\(credentials.secretAccessKey)".utf8)
        for part in [stamp.day, region, service, "aws4_request"] { key = HMACSHA256.authenticationCode(for: Array(part.utf8), key: key) }
        return ByteEncoding.hex(HMACSHA256.authenticationCode(for: Array(stringToSign.utf8), key: key))
    }

    /// `yyyyMMdd` and `yyyyMMdd'T'HHmmss'Z'` in UTC.
    static func stamp(_ date: Date) -> (day: String, time: String) {
        var seconds = time_t(date.timeIntervalSince1970.rounded(.down))
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let day = "\(parts.tm_year + 1900)\(two(parts.tm_mon + 1))\(two(parts.tm_mday))"
        return (day, "\(day)T\(two(parts.tm_hour))\(two(parts.tm_min))\(two(parts.tm_sec))Z")
    }

    /// S3's URI encoding: every byte but the unreserved ones (`A-Z a-z 0-9 - . _ ~`) as `%XX`,
    /// and `/` too unless `slash` is false (in a path).
    public static func encode(_ text: String, slash: Bool) -> String {
        var result = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                result.unicodeScalars.append(Unicode.Scalar(byte))
            case UInt8(ascii: "/") where !slash:
                result.append("/")
            default:
                let hex = String(byte, radix: 16, uppercase: true)
                result += "%" + (hex.count == 1 ? "0" + hex : hex)
            }
        }
        return result
    }

    /// An object key as a path: `/` then the key, each segment encoded once.
    public static func encodePath(_ key: String) -> String {
        "/" + encode(key, slash: false)
    }
}
