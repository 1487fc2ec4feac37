import Foundation

/// The App Store Server API's answers, as Stockroom reads them through `UpstreamJSON`: only the
/// fields it uses, each bounded. Nothing in them is trusted; signed parts are verified later.

/// Apple's error body: `errorCode` and `errorMessage`, each read on its own, so a broken one does
/// not hide the other. A code that is no integer (1e30, 4.5, "x", true) is no code; the message
/// is cut short.
///
/// See https://developer.apple.com/documentation/appstoreserverapi/error-codes
struct AppleErrorBody: Decodable {
    var errorCode: Int?
    var errorMessage: String?

    /// Apple's `errorMessage` as a log may carry it: printable ASCII, 200 characters at most
    /// (it is a stranger's text; it says why a token was refused).
    static func printable(_ message: String?) -> String {
        guard let message else { return "none given" }
        return String(
            String.UnicodeScalarView(message.unicodeScalars.filter { $0.isASCII && $0.value >= 0x20 && $0.value < 0x7F }.prefix(200)))
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        errorCode = (try? container.decodeIfPresent(Double.self, forKey: .errorCode)).flatMap { value -> Int? in
            guard value.isFinite, abs(value) < 1e12 else { return nil }
            return Int(exactly: value)
        }
        errorMessage = (try? container.decodeIfPresent(String.self, forKey: .errorMessage)).map { String($0.prefix(300)) }
    }

    private enum CodingKeys: String, CodingKey { case errorCode, errorMessage }

    /// The error in `body`, or nil when it is no JSON object.
    static func of(_ body: [UInt8]) -> AppleErrorBody? {
        UpstreamJSON.decode(AppleErrorBody.self, from: body)
    }
}

/// Get Transaction Info's answer: one signed transaction.
///
/// See https://developer.apple.com/documentation/appstoreserverapi/transactioninforesponse
struct TransactionInfoResponse: Decodable {
    var signedTransactionInfo: String
}

/// Get Transaction History v2's answer.
///
/// See https://developer.apple.com/documentation/appstoreserverapi/historyresponse
struct HistoryResponse: Decodable {
    var signedTransactions: [String]
    var hasMore: Bool?
    var revision: String?
    var bundleId: String?
}

/// Get Notification History's answer.
///
/// See https://developer.apple.com/documentation/appstoreserverapi/notificationhistoryresponse
struct NotificationHistoryResponse: Decodable {
    var notificationHistory: [Item]?
    var hasMore: Bool?
    var paginationToken: String?

    /// One notification Apple sent or tried to; `signedPayload` is checked by the page's reader.
    ///
    /// See https://developer.apple.com/documentation/appstoreserverapi/notificationhistoryresponseitem
    struct Item: Decodable {
        var signedPayload: String?
    }
}

/// The claims of the Server API's bearer token, and its header.
///
/// See https://developer.apple.com/documentation/appstoreserverapi/generating-json-web-tokens-for-api-requests
struct ServerAPITokenClaims: Encodable {
    var iss: String
    var iat: Int64
    var exp: Int64
    var aud = "appstoreconnect-v1"
    var bid: String

    struct Header: Encodable {
        var alg = "ES256"
        var kid: String
        var typ = "JWT"
    }
}

/// A JSON body Stockroom sends upstream, with sorted keys.
enum UpstreamBody {
    static func encode(_ value: some Encodable) -> [UInt8]? {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return (try? encoder.encode(value)).map(Array.init)
    }
}
