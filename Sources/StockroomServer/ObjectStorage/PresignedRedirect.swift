import Foundation
import HTTPTypes
import Hummingbird
import Logging
import StockroomCore
import StockroomHTTP

/// Answers an authorised download of content in a bucket with a presigned URL for exactly that
/// object (`--content-delivery redirect`): 303 to the claim, 307 to a resume. The store serves the
/// bytes and the ranges; Stockroom serves none.
///
/// The URL names the object that was hashed. In a bucket that keeps versions it names the version
/// hashed (`versionId=`, signed into the URL), so a replace at any time afterwards cannot change
/// what it serves. Otherwise a fresh HEAD (never the one `ObjectHeads` shares for 250 ms) confirms
/// the hashed size and ETag as the URL is made; what remains is a replace between that HEAD and
/// the store serving the URL (SECURITY.md). A URL lives no longer than `--presign-lifetime` nor
/// than the download token, and is never logged.
struct PresignedRedirect: Sendable {
    let client: S3Client
    let lifetime: Duration
    let logger: Logger

    /// `prepared` is the object as `ObjectContentStore.prepare` found it: still the size and ETag
    /// the catalogue hashed.
    func response(
        status: HTTPResponse.Status, prepared: PreparedContent, tokenExpiry: Date?, extraHeaders: HTTPFields, now: Date = Date()
    ) async throws -> Response {
        let representation = prepared.representation
        let key = prepared.absolutePath
        let remaining = tokenExpiry.map { Duration.seconds(Int64($0.timeIntervalSince(now).rounded(.down))) } ?? lifetime
        let version = representation.objectVersionID
        if version == nil { try await confirmHashed(representation, key: key) }
        guard remaining >= .seconds(1), let url = client.presignedGET(key, versionID: version, lifetime: min(lifetime, remaining), now: now)
        else {
            throw ContentError.unavailable(key: key, reason: "no presigned URL could be made")
        }
        var headers = extraHeaders
        headers[.location] = url.absoluteString
        headers[.eTag] = representation.etag
        headers[.reprDigest] = representation.reprDigest
        headers[.contentSize] = String(representation.size)
        headers[.cacheControl] = "no-store"
        headers[.referrerPolicy] = "no-referrer"
        headers[.contentLength] = "0"
        return Response(status: status, headers: headers, body: ResponseBody())
    }

    /// A HEAD of its own, now: the object at `key` is still the size and ETag hashed.
    private func confirmHashed(_ representation: ContentRepresentation, key: String) async throws {
        let head: S3Client.Head
        do {
            head = try await client.head(key)
        } catch {
            StockroomMetrics.objectStoreError(operation: "presign", error)
            if case .changed = error { throw ContentError.changedSinceHashed(key) }
            throw ContentError.unavailable(key: key, reason: error.description)
        }
        guard head.size == representation.size, head.etag == representation.objectETag else {
            StockroomMetrics.objectStoreError(operation: "presign", .changed(key: key))
            logger.warning(
                "an object changed since the catalogue hashed it; the next poll hashes it again", metadata: ["key": .string(key)])
            throw ContentError.changedSinceHashed(key)
        }
    }
}

extension HTTPField.Name {
    /// The size of the content a redirect leads to (the answer itself has no body).
    static let contentSize = Self("X-Content-Size")!
}
