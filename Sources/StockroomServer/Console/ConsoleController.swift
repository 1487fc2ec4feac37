import Foundation
import Hummingbird
import Logging
import StockroomCore
import StockroomEntitlement

/// `/console`: the operator's web console, server-rendered HTML with no script, behind a
/// sign-in with the admin token. Not mounted at all when no admin token is configured.
///
/// Pages without a session redirect to the sign-in form; actions without one are 401, and a
/// form post without the session's CSRF token is 403. Every action goes through `Entitlements`,
/// the same calls the admin API makes: the console has no path of its own to the ledger.
struct ConsoleController<Context: RemoteAddressRequestContext & ClientAddressContext>: Sendable {
    let entitlements: Entitlements
    let sessions: ConsoleSessions
    /// The configured webhook endpoints, for `/console/webhooks`.
    let webhooks: [WebhookEndpoint]

    init(entitlements: Entitlements, adminToken: String, webhooks: [WebhookEndpoint] = []) {
        self.entitlements = entitlements
        self.sessions = ConsoleSessions(adminToken: adminToken)
        self.webhooks = webhooks
    }

    func addRoutes(to router: Router<Context>) {
        let pages = ConsolePages(entitlements: entitlements)
        let actions = ConsoleActions(entitlements: entitlements)
        router.get("console/login") { request, context in loginForm(request, context: context).response }
        router.post("console/login") { request, context in await signIn(request, context: context).response }
        router.post("console/logout") { request, context in
            await action(request, context: context) { _, _ in
                ConsoleResponse.redirect(to: "/console/login", cookies: [signOutCookie(request, context: context)])
            }
        }
        router.get("console") { request, context in await page(request, context: context) { try await pages.dashboard(session: $0) } }
        router.get("console/fulfilments") { request, context in
            await page(request, context: context) { try await pages.list(request, session: $0) }
        }
        router.get("console/fulfilments/:transactionId") { request, context in
            await page(request, context: context) { session in
                try await pages.detail(try Self.transactionID(context), request: request, session: session)
            }
        }
        router.get("console/webhooks") { request, context in
            await page(request, context: context) { session in
                try await pages.webhooks(try Self.deliveryQuery(request), endpoints: webhooks, session: session)
            }
        }
        router.post("console/webhooks/deliveries/:deliveryId/redeliver") { request, context in
            await action(request, context: context) { _, _ in
                guard let id = context.parameters.get("deliveryId").flatMap(Int64.init), id > 0 else {
                    throw ConsoleError.badRequest("The delivery ID is a positive number.")
                }
                guard try await entitlements.ledger.redeliver(id, now: Date()) else { throw ConsoleError.unknownDelivery }
                return .redirect(to: "/console/webhooks?status=queued")
            }
        }
        for kind in ConsoleActions.Kind.allCases {
            router.post("console/fulfilments/:transactionId/\(kind.rawValue)") { request, context in
                await action(request, context: context) { form, _ in
                    try await actions.perform(kind, on: try Self.transactionID(context), form: form)
                }
            }
        }
    }

    // MARK: Sign-in

    private func loginForm(_ request: Request, context: Context, error: String? = nil, status: HTTPResponse.Status = .ok) -> ConsoleResponse
    {
        var body = "<h1>Sign in</h1>\n"
        if let error { body += "<p class=\"error\" role=\"alert\">\(HTML.escape(error))</p>\n" }
        body += """
            <form method="post" action="/console/login" class="card" id="login">
            <label>Admin token <input type="password" name="token" autocomplete="current-password" required autofocus></label>
            <p><button type="submit">Sign in</button></p>
            </form>
            <p class="muted">The token is the server's <code>STOCKROOM_ADMIN_TOKEN</code>; a session lasts \
            \(sessions.lifetime.components.seconds / 3600) hours.</p>

            """
        return .page(title: "Sign in", body: body, session: nil, status: status)
    }

    private func signIn(_ request: Request, context: Context) async -> ConsoleResponse {
        let form: ConsoleForm
        do {
            form = try await ConsoleForm.read(request)
        } catch {
            return error.page(session: nil)
        }
        guard let token = form["token"], !token.isEmpty, token.utf8.count <= 4096, sessions.accepts(adminToken: token) else {
            context.logger.notice("console sign-in refused", metadata: ["client": .string(context.clientAddress)])
            return loginForm(request, context: context, error: "That is not the admin token.", status: .unauthorized)
        }
        let cookie = sessionCookie(sessions.issue(), maxAge: sessions.lifetime.components.seconds, request: request, context: context)
        return .redirect(to: "/console", cookies: [cookie])
    }

    private func signOutCookie(_ request: Request, context: Context) -> String {
        sessionCookie("", maxAge: 0, request: request, context: context)
    }

    /// `HttpOnly; SameSite=Strict; Path=/console`, and `Secure` when the request came over TLS.
    private func sessionCookie(_ value: String, maxAge: Int64, request: Request, context: Context) -> String {
        var cookie = "\(ConsoleSessions.cookieName)=\(value); Max-Age=\(maxAge); Path=/console; HttpOnly; SameSite=Strict"
        if ConsoleTransport.isSecure(request, fromTrustedProxy: context.isFromTrustedProxy) { cookie += "; Secure" }
        return cookie
    }

    // MARK: Sessions

    private func session(_ request: Request) -> ConsoleSession? {
        ConsoleTransport.cookie(ConsoleSessions.cookieName, in: request).flatMap { sessions.session(from: $0) }
    }

    /// A page: without a session, 303 to the sign-in form.
    private func page(_ request: Request, context: Context, _ render: (ConsoleSession) async throws -> ConsoleResponse) async -> Response {
        guard let session = session(request) else { return ConsoleResponse.redirect(to: "/console/login").response }
        return await Self.rendering(session: session, context: context) { try await render(session) }.response
    }

    /// A form post: 401 without a session, 403 without its CSRF token; then `perform`.
    private func action(
        _ request: Request, context: Context, _ perform: (ConsoleForm, ConsoleSession) async throws -> ConsoleResponse
    ) async -> Response {
        guard let session = session(request) else { return ConsoleError.notSignedIn.page(session: nil).response }
        return await Self.rendering(session: session, context: context) {
            let form = try await ConsoleForm.read(request)
            guard sessions.isCSRFToken(form["csrf"], of: session) else {
                context.logger.notice("console form refused: CSRF token missing or wrong", metadata: ["path": .string(request.uri.path)])
                throw ConsoleError.csrfRefused
            }
            return try await perform(form, session)
        }.response
    }

    /// Runs `body`, answering our errors and a lost ledger with an HTML page.
    private static func rendering(session: ConsoleSession, context: Context, _ body: () async throws -> ConsoleResponse) async
        -> ConsoleResponse
    {
        do {
            return try await body()
        } catch let error as ConsoleError {
            return error.page(session: session)
        } catch let error as LedgerUnavailable {
            return ConsoleError.ledgerUnavailable(retryAfter: error.retryAfter).page(session: session)
        } catch {
            context.logger.error("console request failed", metadata: ["error": "\(String(reflecting: error))"])
            var page = ConsoleResponse.page(
                title: "Internal error",
                body:
                    """
                    <h1>Internal error</h1>\n<p class=\"error\" data-code=\"internal_error\">Something went wrong; the request id is \
                    in the server's log.</p>\n
                    """,
                session: session, status: .internalServerError)
            page.headers[.cacheControl] = "no-store"
            return page
        }
    }

    /// `?endpoint=` and `?status=` of the webhooks page; the 50 newest.
    private static func deliveryQuery(_ request: Request) throws -> WebhookDeliveryQuery {
        var query = WebhookDeliveryQuery(endpoint: request.uri.queryParameters.get("endpoint"), limit: 50)
        if let status = request.uri.queryParameters.get("status"), !status.isEmpty {
            guard let parsed = WebhookDelivery.Status(rawValue: status) else {
                throw ConsoleError.badRequest("The status is queued, sent or parked.")
            }
            query.status = parsed
        }
        return query
    }

    private static func transactionID(_ context: Context) throws -> String {
        let id = try context.parameters.require("transactionId")
        guard TransactionID.isValid(id) else { throw ConsoleError.badRequest("The transaction ID is malformed.") }
        return id
    }
}
