import Foundation
import StockroomCore
import StockroomEntitlement

/// The body of `POST /v1/downloads`, validated: every refusal is a 400 with what is wrong.
struct DownloadRequest: Sendable {
    var productID: String
    var transactionID: String?
    var proof: ClaimProof
    /// The app's account for this purchase (StoreKit 2's `appAccountToken`), when it sends one.
    var appAccountToken: String?

    private struct Body: Decodable {
        var productId: String?
        var transactionId: String?
        var receiptData: String?
        var signedTransaction: String?
        var appAccountToken: String?
    }

    static func parse(_ bytes: [UInt8]) throws(DownloadError) -> DownloadRequest {
        let body: Body
        do {
            body = try JSONDecoder().decode(Body.self, from: Data(bytes))
        } catch DecodingError.typeMismatch(_, let context) {
            throw .badRequest("\(context.codingPath.map(\.stringValue).joined(separator: ".")) must be a string.")
        } catch {
            throw .badRequest("The body is not a JSON object.")
        }
        guard let productID = body.productId, !productID.isEmpty else { throw .badRequest("productId is missing.") }
        guard ProductID.isValid(productID) else {
            throw .badRequest("productId must be 1–255 reverse-DNS characters (letters, digits, \".\", \"-\", \"_\").")
        }
        if let transactionID = body.transactionId, !TransactionID.isValid(transactionID) {
            throw .badRequest("transactionId must be 1–64 letters, digits, \".\", \"-\" or \"_\".")
        }
        if let token = body.appAccountToken, UUID(uuidString: token) == nil { throw .badRequest("appAccountToken must be a UUID.") }
        switch (body.receiptData, body.signedTransaction) {
        case (nil, nil): throw .badRequest("Send exactly one of receiptData and signedTransaction.")
        case (.some, .some): throw .badRequest("Send exactly one of receiptData and signedTransaction, not both.")
        case (nil, .some(let jws)):
            guard jws.split(separator: ".", omittingEmptySubsequences: false).count == 3, jws.utf8.count <= 64 * 1024 else {
                throw .badRequest("signedTransaction is not a compact JWS.")
            }
            return DownloadRequest(productID: productID, transactionID: body.transactionId, proof: .signedTransaction(jws), appAccountToken: body.appAccountToken)
        case (.some(let receipt), nil):
            guard !receipt.isEmpty, ByteEncoding.decodeBase64(receipt) != nil else { throw .badRequest("receiptData is not base64.") }
            return DownloadRequest(productID: productID, transactionID: body.transactionId, proof: .receipt(receipt), appAccountToken: body.appAccountToken)
        }
    }
}
