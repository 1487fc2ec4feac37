import HTTPTypes
import Hummingbird
import StockroomCore
import StockroomHTTP

/// Answers an authorised download with the headers Stockroom decides, `X-Accel-Redirect` to
/// the file, and no body: nginx sends the bytes with sendfile and applies `Range` itself.
///
/// The file is checked as for a stream (inside the jail, unchanged since hashed: 503
/// `content_changing` otherwise) before nginx is told its path.
struct OffloadResponder: Sendable {
    let store: LocalContentStore
    let offload: ContentOffload

    /// The headers-only response for `representation`, with `extraHeaders` (transaction, token,
    /// location, cache policy) added.
    func response(representation: ContentRepresentation, extraHeaders: HTTPFields) async throws -> Response {
        let prepared = try await store.prepare(representation)
        guard let inside = AccelRedirect.relativePath(of: prepared.absolutePath, inside: store.jail.root),
            let target = AccelRedirect.target(prefix: offload.prefix, relativePath: inside)
        else {
            throw ContentError.changedSinceHashed(representation.path)
        }
        var headers = extraHeaders
        headers[.contentType] = representation.contentType
        headers[.eTag] = representation.etag
        headers[.reprDigest] = representation.reprDigest
        headers[.accelRedirect] = target
        return Response(status: .ok, headers: headers, body: ResponseBody())
    }
}

extension HTTPField.Name {
    /// nginx's internal redirect to a file in an `internal` location.
    static let accelRedirect = Self("X-Accel-Redirect")!
}
