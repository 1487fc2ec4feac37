import Foundation
import Hummingbird
import StockroomCore
import StockroomEntitlement
import StockroomHTTP

/// `POST /v1/restores`: a restore without a receipt. The body names the customer by a StoreKit 2
/// signed transaction, or by a transaction ID with its app account; the answer lists each product
/// restored with a download token and the URL to fetch it from.
///
/// The entitlement component decides (`Entitlements.restore`); this controller parses and maps.
struct RestoreController<Context: ClientAddressContext> {
    let catalog: CatalogStore
    let entitlements: Entitlements

    func addRoutes(to group: RouterGroup<Context>) {
        group.post("restores", use: restore)
    }

    @Sendable func restore(_ request: Request, context: Context) async throws -> Response {
        let body = try await request.body.collect(upTo: context.maxUploadSize)
        let parsed = try RestoreBody.parse(Array(buffer: body))
        let catalogue = catalog.catalog
        let decision = try await entitlements.restore(
            RestoreRequest(proof: parsed.proof, appAccountToken: parsed.appAccountToken, client: context.clientAddress(of: request)),
            inCatalogue: { catalogue.product(id: $0) != nil })
        switch decision {
        case .restored(let report): return try Self.response(report)
        case .refused(let refusal): throw RestoreError.refused(refusal)
        case .unavailable(let retryAfter): throw RestoreError.upstreamUnavailable(retryAfter: retryAfter)
        case .limited(let retryAfter): throw RestoreError.rateLimited(retryAfter: retryAfter)
        }
    }

    /// One entry per product: its newest restored transaction, with a token for it.
    static func response(_ report: RestoreReport) throws -> Response {
        var newest: [String: RestoredFulfilment] = [:]
        var order: [String] = []
        for purchase in report.restored {
            if newest[purchase.fulfilment.productID] == nil { order.append(purchase.fulfilment.productID) }
            newest[purchase.fulfilment.productID] = purchase
        }
        let products = order.compactMap { newest[$0] }.map { purchase in
            let id = purchase.fulfilment.transactionID
            return RestoredProduct(
                productId: purchase.fulfilment.productID, transactionId: id, token: purchase.token, location: "/v1/downloads/\(id)/content")
        }
        let data = OperatorJSON.data(["products": products])
        return Response(
            status: .ok, headers: [.contentType: "application/json; charset=utf-8", .cacheControl: "no-store"],
            body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }
}

/// One product of a restore's answer. Names are the JSON keys.
struct RestoredProduct: Encodable {
    var productId: String
    var transactionId: String
    var token: String
    var location: String
}

/// The body of `POST /v1/restores`, validated: every refusal is a 400 with what is wrong.
struct RestoreBody: Sendable {
    var proof: RestoreProof
    var appAccountToken: String?

    private struct Fields: Decodable {
        var signedTransaction: String?
        var transactionId: String?
        var appAccountToken: String?
    }

    static func parse(_ bytes: [UInt8]) throws(RestoreError) -> RestoreBody {
        let fields: Fields
        guard JSONNesting.isShallow(bytes) else { throw .badRequest("The body is not a JSON object.") }
        do {
            fields = try JSONDecoder().decode(Fields.self, from: Data(bytes))
        } catch DecodingError.typeMismatch(_, let context) {
            throw .badRequest("\(context.codingPath.map(\.stringValue).joined(separator: ".")) must be a string.")
        } catch {
            throw .badRequest("The body is not a JSON object.")
        }
        if let token = fields.appAccountToken, UUID(uuidString: token) == nil { throw .badRequest("appAccountToken must be a UUID.") }
        switch (fields.signedTransaction, fields.transactionId) {
        case (nil, nil): throw .badRequest("Send exactly one of signedTransaction and transactionId.")
        case (.some, .some): throw .badRequest("Send exactly one of signedTransaction and transactionId, not both.")
        case (.some(let jws), nil):
            guard JWSVerifier.isCompact(jws) else {
                throw .badRequest("signedTransaction is not a compact JWS.")
            }
            return RestoreBody(proof: .signedTransaction(jws), appAccountToken: fields.appAccountToken)
        case (nil, .some(let id)):
            guard TransactionID.isValid(id) else { throw .badRequest("transactionId must be \(TransactionID.rule).") }
            return RestoreBody(proof: .transactionID(id), appAccountToken: fields.appAccountToken)
        }
    }
}
