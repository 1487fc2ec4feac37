import Hummingbird
import NIOCore
import NIOHTTP1
import Logging
import StockroomCore
import StockroomHTTP

/// Renders every error in the API's JSON shape: ours render themselves; Hummingbird's
/// (unknown route, body too large, bad request) get a code from their status; anything else
/// is logged at `.error` with the request id and answered 500 without details.
struct ErrorMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as any APIError {
            return try error.response(from: request, context: context)
        } catch let error as HTTPError {
            return ErrorBody.response(
                status: error.status, code: Self.code(for: error.status),
                message: error.body ?? Self.message(for: error.status, request: request),
                headers: error.headers)
        } catch let error as any HTTPResponseError {
            return ErrorBody.response(status: error.status, code: Self.code(for: error.status), message: error.status.reasonPhrase)
        } catch let error as HTTPParserError {
            // Malformed framing (a bad chunk size, say) found while reading the body: the client's
            // fault, and the connection cannot be trusted to carry another request.
            context.logger.debug("malformed request framing", metadata: ["error": "\(error)"])
            return ErrorBody.response(
                status: .badRequest, code: "bad_request", message: "The request's HTTP framing is malformed.",
                headers: [.connection: "close"])
        } catch let error as ChannelError where error == .ioOnClosedChannel || error == .eof || error == .inputClosed {
            // The client went away, or a limit closed its connection: nothing to answer, nothing wrong here.
            context.logger.debug("client connection closed during the request", metadata: ["error": "\(error)"])
            throw error
        } catch {
            context.logger.error("unhandled error", metadata: ["error": "\(String(reflecting: error))"])
            return ErrorBody.response(
                status: .internalServerError, code: "internal_error",
                message: "Internal server error; the request id is in the X-Request-Id header.")
        }
    }

    static func code(for status: HTTPResponse.Status) -> String {
        switch status {
        case .badRequest: "bad_request"
        case .unauthorized: "unauthorized"
        case .forbidden: "forbidden"
        case .notFound: "not_found"
        case .methodNotAllowed: "method_not_allowed"
        case .contentTooLarge: "body_too_large"
        case .unsupportedMediaType: "unsupported_media_type"
        case .rangeNotSatisfiable: "range_not_satisfiable"
        case .serviceUnavailable: "service_unavailable"
        default: status.code >= 500 ? "internal_error" : "http_\(status.code)"
        }
    }

    static func message(for status: HTTPResponse.Status, request: Request) -> String {
        switch status {
        case .notFound: "No route for \(request.method) \(request.uri.path)."
        case .contentTooLarge: "The request body is larger than 1 MiB."
        default: status.reasonPhrase
        }
    }
}
