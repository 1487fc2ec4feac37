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
/// The object is checked first (`ObjectContentStore.prepare`: a HEAD, still the size and ETag the
/// catalogue hashed), so a URL never hands out bytes whose digest was not published. A URL lives no longer than
/// `--presign-lifetime` nor than the download token, and is never logged.
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
        guard remaining >= .seconds(1), let url = client.presignedGET(key, lifetime: min(lifetime, remaining), now: now) else {
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
}

extension HTTPField.Name {
    /// The size of the content a redirect leads to (the answer itself has no body).
    static let contentSize = Self("X-Content-Size")!
}
