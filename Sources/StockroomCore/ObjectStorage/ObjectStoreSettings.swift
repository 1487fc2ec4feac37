import Foundation

/// How to reach an S3-compatible store: its endpoint, region, addressing style and credentials.
///
/// AWS S3 when no endpoint is given (`https://s3.REGION.amazonaws.com`, virtual-hosted); any
/// other store (Cloudflare R2, Backblaze B2, MinIO, Ceph, SeaweedFS) by `--s3-endpoint`, with
/// path-style addressing unless told otherwise.
public struct ObjectStoreSettings: Sendable {
    public enum Addressing: String, Sendable, CaseIterable {
        /// `https://endpoint/BUCKET/KEY`: what most self-hosted stores need.
        case path
        /// `https://BUCKET.endpoint/KEY`: AWS's own default.
        case virtual
    }

    /// `scheme://host[:port]`, no path; nil for AWS's regional endpoint.
    public let endpoint: URL?
    public let region: String
    public let addressing: Addressing
    public let credentials: SigV4.Credentials

    /// Checks the endpoint: `http` or `https`, a host, no path, query, fragment or user info.
    public init(endpoint: String?, region: String, addressing: Addressing? = nil, credentials: SigV4.Credentials)
        throws(ObjectStoreSettingError)
    {
        if let endpoint {
            guard let url = URL(string: endpoint), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
                let host = url.host,
                !host.isEmpty, url.user == nil, url.password == nil, url.query == nil, url.fragment == nil,
                url.path.isEmpty || url.path == "/"
            else { throw .endpoint(URLText.redacted(endpoint)) }
            var text = "\(scheme)://\(host.contains(":") ? "[\(host)]" : host)"
            // A default port is left out, as clients leave it out of the Host they send: a
            // presigned URL signs the host as written, and `host:443` would match no request.
            if let port = url.port, !(scheme == "https" && port == 443), !(scheme == "http" && port == 80) { text += ":\(port)" }
            self.endpoint = URL(string: text)
        } else {
            self.endpoint = nil
        }
        guard Self.isValidRegion(region) else { throw .region(region) }
        self.region = region
        self.addressing = addressing ?? (endpoint == nil ? .virtual : .path)
        self.credentials = credentials
    }

    /// The origin (`scheme://host[:port]`) requests for `bucket` go to, and the path prefix
    /// before a key (`/BUCKET` for path-style, empty for virtual-hosted).
    public func base(bucket: String) -> (origin: String, pathPrefix: String) {
        let endpoint = self.endpoint ?? URL(string: "https://s3.\(region).amazonaws.com")!
        let scheme = endpoint.scheme ?? "https"
        let host = endpoint.host ?? ""
        let port = endpoint.port.map { ":\($0)" } ?? ""
        switch addressing {
        case .path: return ("\(scheme)://\(host.contains(":") ? "[\(host)]" : host)\(port)", "/\(bucket)")
        case .virtual: return ("\(scheme)://\(bucket).\(host)\(port)", "")
        }
    }

    /// The encoded path of `key` in `bucket` (what is signed and sent).
    public func path(bucket: String, key: String) -> String {
        base(bucket: bucket).pathPrefix + SigV4.encodePath(key)
    }

    /// The full URL of `key` in `bucket`, with `query` already encoded (or empty).
    public func url(bucket: String, key: String?, query: String = "") -> String {
        let (origin, prefix) = base(bucket: bucket)
        let path = key.map { prefix + SigV4.encodePath($0) } ?? (prefix.isEmpty ? "/" : prefix)
        return origin + path + (query.isEmpty ? "" : "?" + query)
    }

    /// Letters, digits and `-`, 1–64 of them (`us-east-1`, `auto` for R2, `eu-central-003` for B2).
    public static func isValidRegion(_ region: String) -> Bool {
        (1...64).contains(region.utf8.count)
            && region.utf8.allSatisfy { byte in
                (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
                    || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: "-")
            }
    }
}

/// Why an object-store setting was refused; never carries a secret.
public enum ObjectStoreSettingError: Error, Equatable, CustomStringConvertible {
    /// The endpoint as given, its user information redacted (`URLText`).
    case endpoint(String)
    case region(String)
    case addressing(String)
    case noCredentials(String)
    case credentialsFile(String)

    public var description: String {
        switch self {
        case .endpoint(let text):
            """
            --s3-endpoint must be an http or https URL with a host and no path, query or user info (credentials go in \
            AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY), not "\(URLText.redacted(text))"
            """
        case .region(let text): "--s3-region must be letters, digits and - (us-east-1, auto), not \"\(text)\""
        case .addressing(let text): "--s3-addressing must be path or virtual, not \"\(text)\""
        case .noCredentials(let detail): "no S3 credentials: \(detail)"
        case .credentialsFile(let detail): "the shared credentials file cannot be used: \(detail)"
        }
    }
}

/// Reads S3 credentials the way AWS's own tools do: `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`
/// and `AWS_SESSION_TOKEN` first, then a profile (`AWS_PROFILE`, else `default`) of the shared
/// credentials file (`AWS_SHARED_CREDENTIALS_FILE`, else `~/.aws/credentials`).
public enum ObjectStoreCredentials {
    public static func resolve(environment: [String: String], profile: String? = nil) throws(ObjectStoreSettingError) -> SigV4.Credentials {
        if profile == nil, let key = environment["AWS_ACCESS_KEY_ID"], !key.isEmpty {
            guard let secret = environment["AWS_SECRET_ACCESS_KEY"], !secret.isEmpty else {
                throw .noCredentials("AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not")
            }
            let token = environment["AWS_SESSION_TOKEN"].flatMap { $0.isEmpty ? nil : $0 }
            return SigV4.Credentials(accessKeyID: key, secretAccessKey: secret, sessionToken: token)
        }
        let name = profile ?? environment["AWS_PROFILE"].flatMap { $0.isEmpty ? nil : $0 } ?? "default"
        let file =
            environment["AWS_SHARED_CREDENTIALS_FILE"].flatMap { $0.isEmpty ? nil : $0 }
            ?? environment["HOME"].map { $0 + "/.aws/credentials" }
        guard let file else { throw .noCredentials("set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or a profile in ~/.aws/credentials") }
        guard let data = FileManager.default.contents(atPath: file) else {
            throw .noCredentials("set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or a profile in \(file) (not readable)")
        }
        guard data.count <= 1 << 20 else { throw .credentialsFile("\(file) is larger than 1 MiB") }
        let sections = parse(String(decoding: data, as: UTF8.self))
        guard let section = sections[name] else { throw .noCredentials("\(file) has no profile [\(name)]") }
        guard let key = section["aws_access_key_id"], !key.isEmpty, let secret = section["aws_secret_access_key"], !secret.isEmpty else {
            throw .noCredentials("the profile [\(name)] of \(file) lacks aws_access_key_id or aws_secret_access_key")
        }
        return SigV4.Credentials(
            accessKeyID: key, secretAccessKey: secret, sessionToken: section["aws_session_token"].flatMap { $0.isEmpty ? nil : $0 })
    }

    /// The INI sections of a credentials file: `[name]` then `key = value` lines; `#` and `;` comment.
    static func parse(_ text: String) -> [String: [String: String]] {
        var sections: [String: [String: String]] = [:]
        var current: String?
        for raw in text.split(whereSeparator: \.isNewline) {
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") || line.hasPrefix(";") { continue }
            if line.hasPrefix("["), line.hasSuffix("]") {
                var name = line.dropFirst().dropLast().trimmingCharacters(in: .whitespaces)
                if name.hasPrefix("profile ") { name = String(name.dropFirst(8)).trimmingCharacters(in: .whitespaces) }
                current = name
                sections[name, default: [:]] = sections[name] ?? [:]
                continue
            }
            guard let current, let equals = line.firstIndex(of: "=") else { continue }
            let key = line[..<equals].trimmingCharacters(in: .whitespaces).lowercased()
            let value = line[line.index(after: equals)...].trimmingCharacters(in: .whitespaces)
            sections[current]?[key] = value
        }
        return sections
    }
}
