import Foundation
import StockroomCore
import StockroomEntitlement

/// The body of `POST /v1/downloads`, validated: every refusal is a 400 with what is wrong.
struct DownloadRequest: Sendable {
    var productID: String
    var transactionID: String?
    /// The purchase's first transaction, which a receipt lists even where its own transaction ID
    /// for a restore differs from StoreKit's (`originalTransactionId`).
    var originalTransactionID: String?
    var proof: PresentedProof
    /// The app's account for this purchase (StoreKit 2's `appAccountToken`), when it sends one.
    var appAccountToken: String?
    /// Whether the customer agreed to share consumption data with Apple on refund requests,
    /// when the app asked; kept with the entitlement.
    var consent: Bool?

    private struct Body: Decodable {
        var productId: String?
        var transactionId: String?
        var originalTransactionId: String?
        var receiptData: String?
        var signedTransaction: String?
        var appAccountToken: String?
        var consent: Bool?
    }

    static func parse(_ bytes: [UInt8]) throws(DownloadError) -> DownloadRequest {
        let body: Body
        guard JSONNesting.isShallow(bytes) else { throw .badRequest("The body is not a JSON object.") }
        do {
            body = try JSONDecoder().decode(Body.self, from: Data(bytes))
        } catch DecodingError.typeMismatch(_, let context) {
            let field = context.codingPath.map(\.stringValue).joined(separator: ".")
            throw .badRequest(field == "consent" ? "consent must be true or false." : "\(field) must be a string.")
        } catch {
            throw .badRequest("The body is not a JSON object.")
        }
        guard let productID = body.productId, !productID.isEmpty else { throw .badRequest("productId is missing.") }
        guard ProductID.isValid(productID) else {
            throw .badRequest("productId must be 1–255 reverse-DNS characters (letters, digits, \".\", \"-\", \"_\").")
        }
        if let transactionID = body.transactionId, !TransactionID.isValid(transactionID) {
            throw .badRequest("transactionId must be \(TransactionID.rule).")
        }
        if let original = body.originalTransactionId, !TransactionID.isValid(original) {
            throw .badRequest("originalTransactionId must be \(TransactionID.rule).")
        }
        if let token = body.appAccountToken, UUID(uuidString: token) == nil { throw .badRequest("appAccountToken must be a UUID.") }
        switch (body.receiptData, body.signedTransaction) {
        case (nil, nil): throw .badRequest("Send exactly one of receiptData and signedTransaction.")
        case (.some, .some): throw .badRequest("Send exactly one of receiptData and signedTransaction, not both.")
        case (nil, .some(let jws)):
            guard JWSVerifier.isCompact(jws) else {
                throw .badRequest("signedTransaction is not a compact JWS.")
            }
            return DownloadRequest(
                productID: productID, transactionID: body.transactionId, originalTransactionID: body.originalTransactionId,
                proof: .signedTransaction(jws),
                appAccountToken: body.appAccountToken, consent: body.consent)
        case (.some(let receipt), nil):
            // Only the alphabet here: the entitlement component decodes it once, as a receipt.
            guard Self.isBase64Text(receipt) else {
                throw .badRequest("receiptData is not base64.")
            }
            return DownloadRequest(
                productID: productID, transactionID: body.transactionId, originalTransactionID: body.originalTransactionId,
                proof: .receipt(receipt),
                appAccountToken: body.appAccountToken, consent: body.consent)
        }
    }

    /// Whether `text` holds only base64 or base64url letters, padding and whitespace, and not
    /// only whitespace. Over the string's contiguous bytes: its UTF-8 view byte by byte cost a
    /// receipt download a few tenths of a percent.
    private static func isBase64Text(_ text: String) -> Bool {
        var text = text
        return text.withUTF8 { bytes in bytes.contains { !isWhitespace($0) } && bytes.allSatisfy(isBase64Text) }
    }

    /// Base64 or base64url letters, padding, and the whitespace clients wrap lines with.
    private static func isBase64Text(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
            UInt8(ascii: "+"), UInt8(ascii: "/"), UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "="):
            true
        default: isWhitespace(byte)
        }
    }

    private static func isWhitespace(_ byte: UInt8) -> Bool {
        byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\n") || byte == UInt8(ascii: "\r") || byte == UInt8(ascii: "\t")
    }
}
