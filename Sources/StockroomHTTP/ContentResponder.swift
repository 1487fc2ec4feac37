import StockroomCore
public import HTTPTypes
public import Hummingbird
import Synchronization

/// Turns a content file into an HTTP response: 200, 206 or 416 by `Range`/`If-Range`, with
/// the strong ETag, `Accept-Ranges`, `Repr-Digest`, and a body streamed in bounded memory.
///
/// The download routes and the tests use it alike; it knows nothing of routing.
public struct ContentResponder<Store: ContentStore>: Sendable {
    public let store: Store

    public init(store: Store) {
        self.store = store
    }

    /// The response to `request` for `representation`, with `extraHeaders` added.
    ///
    /// `onFinish` runs once the body has been written or has failed (a client that went away, or
    /// content that could not be read: a `ContentError`, reported as Stockroom's failure), with
    /// what was sent; it is not called for HEAD, which gets the headers of GET and no body.
    /// `prepared` is the content as `store.prepare` already checked it (the download routes check
    /// it before the ledger hears of the download); nil checks it here. `direct` is the
    /// connection's way below Hummingbird's writer (`DirectBody.of(channel)`), nil to write
    /// through Hummingbird.
    public func response(
        to request: HTTPRequest,
        representation: ContentRepresentation,
        prepared checked: PreparedContent? = nil,
        direct: DirectBody? = nil,
        extraHeaders: HTTPFields = [:],
        onFinish: (@Sendable (DeliveryReport) async -> Void)? = nil
    ) async throws -> Response {
        let plan = ContentPlan(fields: request.headerFields, representation: representation)
        let range: ClosedRange<Int64>?
        let status: HTTPResponse.Status
        switch plan {
        case .unsatisfiable:
            throw ContentError.rangeNotSatisfiable(size: representation.size)
        case .whole:
            status = .ok
            range = representation.size > 0 ? 0...(representation.size - 1) : nil
        case .partial(let partial):
            status = .partialContent
            range = partial
        }
        let prepared: PreparedContent
        if let checked, checked.representation == representation {
            prepared = checked
        } else {
            prepared = try await store.prepare(representation)
        }

        var headers = extraHeaders
        headers[.contentType] = representation.contentType
        headers[.eTag] = representation.etag
        headers[.acceptRanges] = "bytes"
        headers[.reprDigest] = representation.reprDigest
        if status == .partialContent, let range {
            headers[.contentRange] = "bytes \(range.lowerBound)-\(range.upperBound)/\(representation.size)"
        }
        let length = range.map { Int($0.upperBound - $0.lowerBound + 1) } ?? 0
        if request.method == .head {
            headers[.contentLength] = String(length)
            return Response(status: status, headers: headers, body: ResponseBody())
        }
        let store = self.store
        let body = ResponseBody(contentLength: length) { writer in
            let sent = Atomic<Int64>(0)
            do {
                if let range {
                    try await store.write(prepared, range: range, to: &writer, direct: direct) { count in
                        sent.add(Int64(count), ordering: .relaxed)
                    }
                }
                try await writer.finish(nil)
                await onFinish?(
                    DeliveryReport(
                        range: range, bytesSent: sent.load(ordering: .relaxed), ending: .complete, version: representation.etag))
            } catch {
                // The content's own failure (the store down or cut off, bytes failing their check,
                // the file changed) is Stockroom's side; anything else is the connection's.
                let ending: DeliveryEnding = error is ContentError ? .server : .client
                await onFinish?(
                    DeliveryReport(range: range, bytesSent: sent.load(ordering: .relaxed), ending: ending, version: representation.etag))
                throw error
            }
        }
        return Response(status: status, headers: headers, body: body)
    }
}

extension HTTPField.Name {
    /// RFC 9530's digest of the whole representation.
    public static let reprDigest = Self("Repr-Digest")!
}
