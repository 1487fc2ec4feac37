import Foundation
import Hummingbird
import StockroomCore
import StockroomHTTP

/// `GET /v1/catalog` and `GET /v1/catalog/{productId}`: the catalogue sync endpoints.
///
/// Bodies are rendered once per catalogue version; a request with a matching `If-None-Match`
/// gets a bodiless 304, so clients can poll cheaply.
struct CatalogController<Context: RequestContext> {
    let store: CatalogStore

    /// Clients may keep a copy but must revalidate (cheaply, by ETag) before using it.
    static var cacheControl: String { "public, no-cache" }

    func addRoutes(to group: RouterGroup<Context>) {
        group.get("catalog", use: list)
        group.get("catalog/:productId", use: product)
    }

    @Sendable func list(_ request: Request, context: Context) async throws -> Response {
        let catalog = store.catalog
        return Self.respond(to: request, etag: catalog.etag, body: catalog.body)
    }

    @Sendable func product(_ request: Request, context: Context) async throws -> Response {
        let id = try context.parameters.require("productId")
        guard ProductID.isValid(id) else { throw CatalogRequestError.invalidProductID }
        let catalog = store.catalog
        guard let body = catalog.body(ofProduct: id) else { throw CatalogRequestError.unknownProduct(id) }
        return Self.respond(to: request, etag: catalog.etag, body: body)
    }

    private static func respond(to request: Request, etag: String, body: [UInt8]) -> Response {
        var headers: HTTPFields = [.eTag: etag, .cacheControl: cacheControl]
        if let ifNoneMatch = request.headers[.ifNoneMatch], EntityTag.list(ifNoneMatch, matches: etag) {
            return Response(status: .notModified, headers: headers)
        }
        headers[.contentType] = "application/json; charset=utf-8"
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: body)))
    }
}

/// Errors of the catalogue endpoints.
enum CatalogRequestError: APIError {
    case invalidProductID
    case unknownProduct(String)

    var status: HTTPResponse.Status {
        switch self {
        case .invalidProductID: .badRequest
        case .unknownProduct: .notFound
        }
    }

    var code: String {
        switch self {
        case .invalidProductID: "bad_request"
        case .unknownProduct: "unknown_product"
        }
    }

    var message: String {
        switch self {
        case .invalidProductID: "The product ID must be 1–255 reverse-DNS characters (letters, digits, \".\", \"-\", \"_\")."
        case .unknownProduct(let id): "No product \"\(id)\" in the catalogue."
        }
    }
}

/// Entity-tag comparison for `If-None-Match` (RFC 9110 §13.1.2: weak comparison).
enum EntityTag {
    static func list(_ field: String, matches etag: String) -> Bool {
        let ours = opaque(etag)
        return field.split(separator: ",").contains { candidate in
            let tag = candidate.trimmingCharacters(in: .whitespaces)
            return tag == "*" || opaque(tag) == ours
        }
    }

    private static func opaque(_ tag: some StringProtocol) -> Substring {
        let text = Substring(tag)
        return text.hasPrefix("W/") ? text.dropFirst(2) : text
    }
}
