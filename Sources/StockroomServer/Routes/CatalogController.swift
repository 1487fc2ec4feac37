import Foundation
import Hummingbird
import StockroomCore
import StockroomHTTP

/// `GET /v1/catalog` and `GET /v1/catalog/{productId}`: the catalogue sync endpoints.
///
/// Bodies are rendered once per catalogue version; a request with a matching `If-None-Match`
/// gets a bodiless 304, so clients can poll cheaply. On a live connection `CatalogFastPath`
/// answers a plain `GET /v1/catalog` before it reaches this route, from the same `CatalogAnswer`.
struct CatalogController<Context: RequestContext> {
    let store: CatalogStore

    func addRoutes(to group: RouterGroup<Context>) {
        group.get("catalog", use: list)
        group.get("catalog/:productId", use: product)
    }

    @Sendable func list(_ request: Request, context: Context) async throws -> Response {
        let (status, fields, body) = store.answer.answer(ifNoneMatch: request.headers[.ifNoneMatch])
        return Response(status: status, headers: fields, body: body.map { .init(byteBuffer: $0) } ?? .init())
    }

    @Sendable func product(_ request: Request, context: Context) async throws -> Response {
        let id = try context.parameters.require("productId")
        guard ProductID.isValid(id) else { throw CatalogRequestError.invalidProductID }
        let catalog = store.catalog
        guard let body = catalog.body(ofProduct: id) else { throw CatalogRequestError.unknownProduct(id) }
        return Self.respond(to: request, etag: catalog.etag, body: body)
    }

    private static func respond(to request: Request, etag: String, body: [UInt8]) -> Response {
        if let ifNoneMatch = request.headers[.ifNoneMatch], EntityTag.list(ifNoneMatch, matches: etag) {
            return Response(status: .notModified, headers: CatalogAnswer.fields(etag: etag))
        }
        return Response(
            status: .ok, headers: CatalogAnswer.fields(etag: etag, length: body.count), body: .init(byteBuffer: ByteBuffer(bytes: body)))
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

/// Entity-tag comparison for `If-None-Match` (RFC 9110 §13.1.2: weak comparison), read byte by
/// byte: it runs on every catalogue revalidation, and splitting and trimming strings cost a
/// tenth of the server's time under a flood of them.
enum EntityTag {
    static func list(_ field: String, matches etag: String) -> Bool {
        let ours = opaque(etag.utf8[...])
        var rest = field.utf8[...]
        while true {
            let comma = rest.firstIndex(of: UInt8(ascii: ","))
            var tag = rest[..<(comma ?? rest.endIndex)]
            while let first = tag.first, first == UInt8(ascii: " ") || first == UInt8(ascii: "\t") { tag = tag.dropFirst() }
            while let last = tag.last, last == UInt8(ascii: " ") || last == UInt8(ascii: "\t") { tag = tag.dropLast() }
            if tag.elementsEqual("*".utf8) || opaque(tag).elementsEqual(ours) { return true }
            guard let comma else { return false }
            rest = rest[rest.index(after: comma)...]
        }
    }

    private static func opaque(_ tag: Substring.UTF8View) -> Substring.UTF8View {
        tag.starts(with: "W/".utf8) ? tag.dropFirst(2) : tag
    }
}
