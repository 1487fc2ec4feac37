import HTTPTypes
import Hummingbird
import Logging

/// Answers each request's id (Hummingbird's `hb.request.id` in every log line) in
/// `X-Request-Id`, and logs one line per request: method, path (never the query or body, which
/// may carry receipts), status, duration.
struct RequestLogMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let id = context.id
        let start = ContinuousClock.now
        var response = try await next(request, context)
        response.headers[.requestID] = id
        let elapsed = ContinuousClock.now - start
        context.logger.info(
            "request",
            metadata: [
                "method": .string(request.method.rawValue),
                "path": .string(request.uri.path),
                "status": .stringConvertible(response.status.code),
                "duration_us": .stringConvertible(
                    elapsed.components.seconds * 1_000_000 + elapsed.components.attoseconds / 1_000_000_000_000),
            ])
        return response
    }
}

extension HTTPField.Name {
    static let requestID = Self("X-Request-Id")!
}
