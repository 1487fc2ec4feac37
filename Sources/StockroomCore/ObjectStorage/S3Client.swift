import Foundation
import NIOPosix
import Synchronization

/// One bucket of an S3-compatible store, through libcurl: requests signed with SigV4 by libcurl,
/// presigned URLs by `SigV4`. Every call has a timeout; a long transfer (an object hashed, a part
/// uploaded) ends when it falls under 16 KiB/s for 30 s.
public final class S3Client: Sendable {
    /// Object size and the store's ETag, from a HEAD; and its version, in a bucket that keeps
    /// versions. Two heads are the same object when size and ETag agree (the same bytes stored
    /// again under a new version are the same content); the version is not kept in the digest
    /// cache.
    public struct Head: Sendable, Equatable, Codable {
        public var size: Int64
        public var etag: String
        /// `x-amz-version-id`, when the bucket keeps versions (absent, or `null`, otherwise).
        public var versionID: String?

        public init(size: Int64, etag: String, versionID: String? = nil) {
            self.size = size
            self.etag = etag
            self.versionID = versionID
        }

        public static func == (left: Head, right: Head) -> Bool {
            left.size == right.size && left.etag == right.etag
        }

        private enum CodingKeys: String, CodingKey {
            case size, etag
        }
    }

    public let settings: ObjectStoreSettings
    public let bucket: String
    private let transport: CurlHTTPClient
    private let signing: UpstreamRequest.AWSSigning

    /// The largest body read whole: a chunk of a stream, or a catalogue.
    public static let largestBody = 16 << 20

    public init(settings: ObjectStoreSettings, bucket: String) {
        self.settings = settings
        self.bucket = bucket
        self.transport = CurlHTTPClient(
            configuration: .init(
                connectTimeout: .seconds(5), totalTimeout: .seconds(6 * 3600), maximumResponseBytes: Self.largestBody,
                minimumBytesPerSecond: 16 * 1024, slowWindow: .seconds(30)),
            threadPool: Self.threadPool)
        self.signing = .init(credentials: settings.credentials, region: settings.region)
    }

    /// Object-store transfers block a thread each; they get a pool of their own, so a slow store
    /// never delays a call to Apple, and a slow Apple never delays content.
    public static let threadPool: NIOThreadPool = {
        let pool = NIOThreadPool(numberOfThreads: 48)
        pool.start()
        return pool
    }()

    // MARK: Reading

    /// The object's size and ETag.
    public func head(_ key: String, timeout: Duration = .seconds(10)) async throws(ObjectStoreError) -> Head {
        let answer = try await send(.head, key: key, timeout: timeout)
        try check(answer, key: key)
        return try Self.head(of: answer, key: key)
    }

    /// Whether the bucket exists and the credentials may read it (`HEAD /BUCKET`).
    public func headBucket(timeout: Duration = .seconds(10)) async throws(ObjectStoreError) {
        let answer = try await send(.head, key: nil, timeout: timeout)
        if answer.status == 404 { throw .noBucket(bucket) }
        try check(answer, key: nil)
    }

    /// The bytes of `range` of the object, which must still have `etag` (else `.changed`).
    public func read(_ key: String, range: ClosedRange<Int64>, ifMatch etag: String?, timeout: Duration = .seconds(60))
        async throws(ObjectStoreError) -> [UInt8]
    {
        var headers: [(name: String, value: String)] = [("Range", "bytes=\(range.lowerBound)-\(range.upperBound)")]
        if let etag { headers.append(("If-Match", etag)) }
        let answer = try await send(.get, key: key, headers: headers, timeout: timeout)
        try check(answer, key: key)
        let expected = range.upperBound - range.lowerBound + 1
        guard answer.status == 206 || (answer.status == 200 && range.lowerBound == 0) else {
            throw .badAnswer("\(answer.status) to a range request for \"\(key)\"")
        }
        guard Int64(answer.body.count) >= expected || answer.status == 206 else {
            throw .badAnswer("\(answer.body.count) bytes for \(expected) of \"\(key)\"")
        }
        if answer.status == 206 {
            // The range sent must be the range asked: bytes from elsewhere in the object would pass
            // every length check.
            let expectedRange = "bytes \(range.lowerBound)-\(range.upperBound)/"
            guard answer.headers["content-range"]?.hasPrefix(expectedRange) == true else {
                throw .badAnswer(
                    "a range of \"\(key)\" other than the one asked (\(answer.headers["content-range"] ?? "no Content-Range"))")
            }
        }
        let body = answer.status == 200 ? Array(answer.body.prefix(Int(expected))) : answer.body
        guard Int64(body.count) == expected else { throw .unavailable("\(body.count) of \(expected) bytes of \"\(key)\" arrived") }
        return body
    }

    /// A small object whole (a catalogue), unless its ETag is still `etag` (nil for 304).
    public func fetch(_ key: String, ifNoneMatch etag: String?, timeout: Duration = .seconds(30)) async throws(ObjectStoreError) -> (
        body: [UInt8], etag: String
    )? {
        var headers: [(name: String, value: String)] = []
        if let etag { headers.append(("If-None-Match", etag)) }
        let answer = try await send(.get, key: key, headers: headers, timeout: timeout)
        if answer.status == 304 { return nil }
        try check(answer, key: key)
        guard answer.status == 200, let tag = answer.headers["etag"] else {
            throw .badAnswer("\(answer.status) without an ETag for \"\(key)\"")
        }
        return (answer.body, tag)
    }

    /// The digests of the whole object, streamed through in bounded memory, and its size; the
    /// object must still have `etag`, else `.changed`.
    public func digest(_ key: String, ifMatch etag: String) async throws(ObjectStoreError) -> (digest: ObjectDigest, size: Int64) {
        let hasher = StreamHasher()
        let answer = try await send(.get, key: key, headers: [("If-Match", etag)], timeout: nil, sink: hasher.sink)
        try check(answer, key: key)
        guard answer.status == 200 else { throw .badAnswer("\(answer.status) to a GET of \"\(key)\"") }
        if let length = answer.headers["content-length"].flatMap(Int64.init), length != hasher.count {
            throw .unavailable("\(hasher.count) of \(length) bytes of \"\(key)\" arrived")
        }
        return (hasher.finish(), hasher.count)
    }

    /// Streams `range` of the object, which must still have `etag`, into `sink` as it arrives:
    /// one GET, however long, on a thread of its own. `sink` may block while its reader is slow;
    /// the transfer ends when the store sends nothing for `stallTimeout` (time the sink waits does
    /// not count). Returns the bytes that arrived; fewer than the range means the store broke off
    /// (ask again from there).
    public func stream(
        _ key: String, range: ClosedRange<Int64>, ifMatch etag: String?, stallTimeout: Duration = .seconds(30),
        into sink: @escaping @Sendable (UnsafeRawBufferPointer) -> Bool
    ) async throws(ObjectStoreError) -> Int64 {
        var headers: [(name: String, value: String)] = [("Range", "bytes=\(range.lowerBound)-\(range.upperBound)")]
        if let etag { headers.append(("If-Match", etag)) }
        let expectedRange = "bytes \(range.lowerBound)-\(range.upperBound)/"
        let length = range.upperBound - range.lowerBound + 1
        let counter = ByteCounter()
        let answer: UpstreamResponse
        do {
            answer = try await send(
                .get, key: key, headers: headers, timeout: nil,
                sink: { start, bytes in
                    // The object asked for: a store (or a cache before it) that ignores If-Match
                    // still names what it sends.
                    if let etag, let sent = start.headers["etag"], sent != etag {
                        counter.changed = true
                        return false
                    }
                    // Only the range asked, as a 206 (or the whole object from its start): bytes
                    // from elsewhere would pass every length check.
                    guard start.status == 206 ? start.headers["content-range"]?.hasPrefix(expectedRange) == true : range.lowerBound == 0
                    else {
                        counter.refused = true
                        return false
                    }
                    // Never a byte past the range: a store (or a proxy before it) that ignores
                    // Range sends the whole object, and what ran past the response's
                    // Content-Length would read as the connection's next response.
                    let wanted = Int(min(Int64(bytes.count), length - counter.count))
                    guard wanted > 0 else { return false }
                    counter.count += Int64(wanted)
                    guard sink(UnsafeRawBufferPointer(rebasing: bytes[0..<wanted])) else { return false }
                    return wanted == bytes.count
                }, stallTimeout: stallTimeout)
        } catch {
            if counter.changed { throw .changed(key: key) }
            if counter.refused { throw .badAnswer("a range of \"\(key)\" other than the one asked") }
            guard counter.count > 0 else { throw error }
            return counter.count  // broke off (or ran past the range) after some bytes: the caller asks for what is missing
        }
        try check(answer, key: key)
        return counter.count
    }

    // MARK: Writing

    /// Puts a small object (a catalogue, a part-sized file) in one request; returns its ETag.
    /// With `ifMatch`, only over the object with that ETag (a catalogue two operators may edit):
    /// `.changed` when another write came first. With `createOnly`, only where no object is
    /// (`If-None-Match: *`, S3's conditional create): `.exists` when one is.
    @discardableResult
    public func put(
        _ key: String, body: [UInt8], contentType: String, ifMatch: String? = nil, createOnly: Bool = false, timeout: Duration? = nil
    )
        async throws(ObjectStoreError)
        -> String
    {
        var headers: [(name: String, value: String)] = [("Content-Type", contentType)]
        if let ifMatch { headers.append(("If-Match", ifMatch)) }
        if createOnly { headers.append(("If-None-Match", "*")) }
        let answer = try await send(.put, key: key, headers: headers, body: body, timeout: timeout)
        try check(answer, key: key, createOnly: createOnly)
        guard (200..<300).contains(answer.status), let etag = answer.headers["etag"] else {
            throw .badAnswer("\(answer.status) to a PUT of \"\(key)\"")
        }
        return etag
    }

    /// Starts a multipart upload; returns its upload ID.
    public func startMultipart(_ key: String, contentType: String) async throws(ObjectStoreError) -> String {
        let answer = try await send(
            .post, key: key, query: "uploads=", headers: [("Content-Type", contentType)], body: [], timeout: .seconds(30))
        try check(answer, key: key)
        guard answer.status == 200, let id = XMLField.first("UploadId", in: answer.body) else {
            throw .badAnswer("no UploadId for \"\(key)\"")
        }
        return id
    }

    /// Uploads part `number` (1…10,000) of an upload; returns its ETag.
    public func uploadPart(_ key: String, uploadID: String, number: Int, body: [UInt8]) async throws(ObjectStoreError) -> String {
        let query = "partNumber=\(number)&uploadId=\(SigV4.encode(uploadID, slash: true))"
        let answer = try await send(.put, key: key, query: query, body: body, timeout: nil)
        try check(answer, key: key)
        guard answer.status == 200, let etag = answer.headers["etag"] else {
            throw .badAnswer("\(answer.status) for part \(number) of \"\(key)\"")
        }
        return etag
    }

    /// Completes an upload from its parts' ETags, in order; returns the object's ETag. With
    /// `createOnly`, only where no object is (`If-None-Match: *`): `.exists` when one is.
    public func completeMultipart(_ key: String, uploadID: String, parts: [String], createOnly: Bool = false)
        async throws(ObjectStoreError) -> String
    {
        var xml = "<CompleteMultipartUpload>"
        for (index, etag) in parts.enumerated() {
            xml += "<Part><PartNumber>\(index + 1)</PartNumber><ETag>\(XMLField.escape(etag))</ETag></Part>"
        }
        xml += "</CompleteMultipartUpload>"
        let query = "uploadId=\(SigV4.encode(uploadID, slash: true))"
        var headers: [(name: String, value: String)] = [("Content-Type", "application/xml")]
        if createOnly { headers.append(("If-None-Match", "*")) }
        let answer = try await send(.post, key: key, query: query, headers: headers, body: Array(xml.utf8), timeout: .seconds(300))
        try check(answer, key: key, createOnly: createOnly)
        // S3 may answer 200 with an error in the body when the completion fails late.
        guard answer.status == 200, XMLField.first("Code", in: answer.body) == nil else {
            throw .badAnswer(
                "the upload of \"\(key)\" did not complete: \(XMLField.first("Code", in: answer.body) ?? "status \(answer.status)")")
        }
        return XMLField.first("ETag", in: answer.body) ?? answer.headers["etag"] ?? ""
    }

    /// Abandons an upload, so the store drops its parts. Best effort.
    public func abortMultipart(_ key: String, uploadID: String) async {
        _ = try? await send(.delete, key: key, query: "uploadId=\(SigV4.encode(uploadID, slash: true))", timeout: .seconds(30))
    }

    /// Removes an object (tests, and a failed push's leftovers).
    public func delete(_ key: String) async throws(ObjectStoreError) {
        let answer = try await send(.delete, key: key, timeout: .seconds(30))
        if answer.status == 404 { return }
        try check(answer, key: key)
    }

    /// Creates the bucket (tests and first set-up); an existing one of ours is fine.
    public func createBucket() async throws(ObjectStoreError) {
        let answer = try await send(.put, key: nil, timeout: .seconds(30))
        if answer.status == 409, XMLField.first("Code", in: answer.body) == "BucketAlreadyOwnedByYou" { return }
        try check(answer, key: nil)
    }

    /// Turns on the bucket's versioning (`PUT /BUCKET?versioning`): tests and first set-up. Every
    /// write then keeps the version before it, and a presigned URL can name the version hashed.
    public func enableVersioning() async throws(ObjectStoreError) {
        let xml =
            #"<VersioningConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Status>Enabled</Status></VersioningConfiguration>"#
        let answer = try await send(
            .put, key: nil, query: "versioning=", headers: [("Content-Type", "application/xml")], body: Array(xml.utf8),
            timeout: .seconds(30))
        try check(answer, key: nil)
    }

    // MARK: Presigning

    /// A URL that lets whoever holds it GET `key`, and nothing else, for `lifetime` from `now`;
    /// with `versionID`, that version of it only (`?versionId=`, signed), whatever is written to
    /// the key afterwards. Never log it: it is a credential for that object until it expires.
    public func presignedGET(_ key: String, versionID: String? = nil, lifetime: Duration, now: Date = Date()) -> URL? {
        let (origin, _) = settings.base(bucket: bucket)
        guard let base = URL(string: origin) else { return nil }
        let signer = SigV4(credentials: settings.credentials, region: settings.region)
        return signer.presignedURL(
            method: "GET", base: base, path: settings.path(bucket: bucket, key: key), expires: lifetime, date: now,
            query: versionID.map { [("versionId", $0)] } ?? [])
    }

    // MARK: The one way out

    private func send(
        _ method: UpstreamRequest.Method, key: String?, query: String = "", headers: [(name: String, value: String)] = [],
        body: [UInt8]? = nil,
        timeout: Duration?, sink: (@Sendable (ResponseStart, UnsafeRawBufferPointer) -> Bool)? = nil, stallTimeout: Duration? = nil
    ) async throws(ObjectStoreError) -> UpstreamResponse {
        if let key, !ObjectKey.isValid(key) { throw .badAnswer("the key \"\(key)\" is not one Stockroom uses") }
        let request = UpstreamRequest(
            method: method, url: settings.url(bucket: bucket, key: key, query: query), headers: headers, body: body, timeout: timeout,
            signing: signing, bodySink: sink, stallTimeout: stallTimeout)
        do {
            return try await transport.send(request)
        } catch {
            throw .unavailable(error.description)
        }
    }

    /// Maps a refusal to its error; a 2xx, 206, 304 passes. For a conditional create, 412 (and
    /// AWS's 409 `ConditionalRequestConflict`, a create racing another) means an object is there.
    private func check(_ answer: UpstreamResponse, key: String?, createOnly: Bool = false) throws(ObjectStoreError) {
        switch answer.status {
        case 200..<300, 304: return
        case 409 where createOnly, 412 where createOnly: throw .exists(key: key ?? "")
        case 404:
            if XMLField.first("Code", in: answer.body) == "NoSuchBucket" { throw .noBucket(bucket) }
            if let key { throw .missing(key: key) }
            throw .noBucket(bucket)
        case 412: throw .changed(key: key ?? "")
        case 401, 403: throw .denied(status: answer.status, code: XMLField.first("Code", in: answer.body), key: key)
        case 408, 429, 500..<600: throw .unavailable("\(answer.status)\(XMLField.first("Code", in: answer.body).map { " \($0)" } ?? "")")
        default: throw .badAnswer("status \(answer.status)\(XMLField.first("Code", in: answer.body).map { " \($0)" } ?? "")")
        }
    }

    private static func head(of answer: UpstreamResponse, key: String) throws(ObjectStoreError) -> Head {
        guard let length = answer.headers["content-length"].flatMap(Int64.init), length >= 0 else {
            throw .badAnswer("no Content-Length for \"\(key)\"")
        }
        guard let etag = answer.headers["etag"], !etag.isEmpty, etag.utf8.count <= 256 else { throw .badAnswer("no ETag for \"\(key)\"") }
        // "null" is what a bucket that never kept versions (or suspended them) names its objects.
        let version = answer.headers["x-amz-version-id"].flatMap { $0.isEmpty || $0 == "null" || $0.utf8.count > 1024 ? nil : $0 }
        return Head(size: length, etag: etag, versionID: version)
    }
}

/// Feeds a streamed body into SHA-256, counting its bytes. libcurl calls the sink from one thread.
private final class StreamHasher: @unchecked Sendable {
    private var hasher: ObjectHasher? = ObjectHasher()
    private(set) var count: Int64 = 0

    var sink: @Sendable (ResponseStart, UnsafeRawBufferPointer) -> Bool {
        { _, bytes in
            self.hasher?.update(bytes)
            self.count += Int64(bytes.count)
            return true
        }
    }

    func finish() -> ObjectDigest {
        guard let hasher = hasher.take() else { return ObjectDigest(sha256: "", crc32c: 0, blocks: []) }
        return hasher.finalize()
    }
}

/// Bytes a stream handed on; libcurl's callbacks run on one thread, read after the transfer.
private final class ByteCounter: @unchecked Sendable {
    var count: Int64 = 0
    var refused = false
    var changed = false
}

/// The few fields Stockroom reads from S3's XML answers, found by tag; bounded input.
enum XMLField {
    static func first(_ tag: String, in body: [UInt8]) -> String? {
        guard !body.isEmpty else { return nil }
        let text = String(decoding: body.prefix(64 * 1024), as: UTF8.self)
        guard let open = text.range(of: "<\(tag)>"), let close = text.range(of: "</\(tag)>", range: open.upperBound..<text.endIndex) else {
            return nil
        }
        let value = String(text[open.upperBound..<close.lowerBound])
        return value.replacingOccurrences(of: "&quot;", with: "\"").replacingOccurrences(of: "&#34;", with: "\"").replacingOccurrences(
            of: "&#39;", with: "'"
        )
        .replacingOccurrences(of: "&apos;", with: "'").replacingOccurrences(of: "&lt;", with: "<").replacingOccurrences(
            of: "&gt;", with: ">"
        )
        .replacingOccurrences(of: "&amp;", with: "&")
    }

    static func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(
            of: ">", with: "&gt;"
        )
        .replacingOccurrences(of: "\"", with: "&quot;")
    }
}
