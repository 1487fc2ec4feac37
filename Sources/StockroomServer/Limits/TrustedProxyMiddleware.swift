import Hummingbird

/// Tells each request's context which proxies the operator trusts (`--trusted-proxy`), so that
/// the routes' per-client limits and the console's `Secure` cookie read forwarding headers only
/// from them.
struct TrustedProxyMiddleware: RouterMiddleware {
    typealias Context = AppRequestContext
    let proxies: TrustedProxies

    func handle(_ request: Request, context: AppRequestContext, next: (Request, AppRequestContext) async throws -> Response) async throws
        -> Response
    {
        var context = context
        context.trustedProxies = proxies
        return try await next(request, context)
    }
}
