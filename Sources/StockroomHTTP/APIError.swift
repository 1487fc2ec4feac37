import StockroomCore
public import HTTPTypes
import Foundation
public import Hummingbird

/// An error the API reports to clients: an HTTP status, a stable snake_case `code`, and a
/// message, rendered in the one JSON shape `{"error": {"code", "message", ...details}}`.
///
/// Each area has its own error type conforming to this; the edge never invents codes.
public protocol APIError: HTTPResponseError {
    /// Stable, machine-readable; clients branch on it.
    var code: String { get }
    /// For people; may change wording between releases.
    var message: String { get }
    /// Extra fields of the error object (for example `retryAfter`).
    var details: [String: String] { get }
    /// Extra response headers (for example `Retry-After`, `Content-Range`).
    var headers: HTTPFields { get }
}

extension APIError {
    public var details: [String: String] { [:] }
    public var headers: HTTPFields { [:] }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        ErrorBody.response(status: status, code: code, message: message, details: details, headers: headers)
    }
}

/// The JSON error body shared by every error the API sends.
public enum ErrorBody {
    /// A complete JSON error response.
    public static func response(
        status: HTTPResponse.Status, code: String, message: String,
        details: [String: String] = [:], headers: HTTPFields = [:]
    ) -> Response {
        var fields = headers
        fields[.contentType] = "application/json; charset=utf-8"
        fields[.cacheControl] = fields[.cacheControl] ?? "no-store"
        return Response(
            status: status, headers: fields,
            body: .init(byteBuffer: ByteBuffer(bytes: encode(code: code, message: message, details: details))))
    }

    /// The body bytes: `{"error":{"code":…,"message":…,…}}`.
    public static func encode(code: String, message: String, details: [String: String] = [:]) -> [UInt8] {
        var object = details
        object["code"] = code
        object["message"] = message
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Encoding a dictionary of strings cannot fail.
        return Array((try? encoder.encode(["error": object])) ?? Data())
    }
}

/// A lost ledger database: 503 `ledger_unavailable` with `Retry-After`, on every route that
/// reads or writes the ledger. Nothing was decided, so the client retries the same request.
extension LedgerUnavailable: APIError {
    public var status: HTTPResponse.Status { .serviceUnavailable }
    public var code: String { "ledger_unavailable" }
    public var message: String { "The ledger is unavailable for a moment. Retry later." }
    public var details: [String: String] { ["retryAfter": String(retryAfterSeconds)] }
    public var headers: HTTPFields { [.retryAfter: String(retryAfterSeconds)] }

    /// Whole seconds, at least one.
    private var retryAfterSeconds: Int64 {
        let (seconds, attoseconds) = retryAfter.components
        return max(1, seconds + (attoseconds > 0 ? 1 : 0))
    }
}
