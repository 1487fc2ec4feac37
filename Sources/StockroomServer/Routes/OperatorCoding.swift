import Foundation
import Hummingbird
import StockroomCore

/// How `request.decode` reads a JSON body (the admin API's): within the context's upload bound,
/// through the nesting check before Foundation parses it (`JSONNesting`); a body that is not the
/// expected object is a 400. The download, restore and notification routes read theirs by hand,
/// for their own error messages.
public struct OperatorJSONDecoder: RequestDecoder {
    public func decode<T: Decodable>(_ type: T.Type, from request: Request, context: some RequestContext) async throws -> T {
        let body = try await request.body.collect(upTo: context.maxUploadSize)
        guard JSONNesting.isShallow(body.readableBytesView), let value = try? JSONDecoder().decode(T.self, from: Data(buffer: body)) else {
            throw AdminError.badRequest("the body is not the JSON object this route reads")
        }
        return value
    }
}

/// How a route's `ResponseEncodable` value is written: `OperatorJSON` (sorted keys, slashes as
/// they are) with the headers every operator answer carries. Operator data is never cached.
public struct OperatorJSONEncoder: ResponseEncoder {
    public func encode(_ value: some Encodable, from request: Request, context: some RequestContext) throws -> Response {
        Response(
            status: .ok, headers: [.contentType: "application/json; charset=utf-8", .cacheControl: "no-store"],
            body: .init(byteBuffer: ByteBuffer(data: OperatorJSON.data(value))))
    }
}
