import Foundation
import Hummingbird
import StockroomCore
import StockroomHTTP
import StockroomEntitlement

/// `/v1/admin`: the operator's actions over HTTP (list, show, re-fulfil, revoke, reinstate),
/// behind a bearer token compared in constant time. Not mounted at all when no token is configured.
struct AdminController<Context: RequestContext> {
    let entitlements: Entitlements
    let token: String
    /// Re-fulfilments of the pending proofs, run apart from the requests that start them.
    let jobs: ReverificationJobs
    /// The configured webhook endpoints (`AdminController+Webhooks`).
    var webhooks: [WebhookEndpoint] = []

    var ledger: any Ledger { entitlements.ledger }

    func addRoutes(to group: RouterGroup<Context>) {
        let admin = group.group("admin").add(middleware: AdminAuthentication(token: token))
        admin.get("fulfilments", use: list)
        admin.get("fulfilments/:transactionId", use: show)
        admin.post("fulfilments/:transactionId/refulfil", use: refulfil)
        admin.post("fulfilments/:transactionId/revoke", use: revoke)
        admin.post("fulfilments/:transactionId/reinstate", use: reinstate)
        admin.get("pending-proofs", use: pending)
        admin.post("pending-proofs/refulfil", use: refulfilPending)
        admin.get("jobs/:jobId", use: job)
        addWebhookRoutes(to: admin)
    }

    @Sendable func list(_ request: Request, context: Context) async throws -> FulfilmentList {
        var filter = FulfilmentListQuery(productID: request.uri.queryParameters.get("product"))
        if let state = request.uri.queryParameters.get("state") {
            guard let parsed = FulfilmentState(rawValue: state) else { throw AdminError.badRequest("unknown state \"\(state)\"") }
            filter.states = [parsed]
        }
        if let since = request.uri.queryParameters.get("since") {
            guard let date = try? Date(since, strategy: .iso8601) else { throw AdminError.badRequest("since must be an ISO 8601 time") }
            filter.since = date
        }
        if let limit = request.uri.queryParameters.get("limit") {
            guard let value = Int(limit), (1...10_000).contains(value) else { throw AdminError.badRequest("limit must be 1–10000") }
            filter.limit = value
        }
        return FulfilmentList(fulfilments: try await ledger.list(filter).map { OperatorFulfilment($0) })
    }

    @Sendable func show(_ request: Request, context: Context) async throws -> OperatorFulfilment {
        let id = try Self.transactionID(context)
        guard let row = try await ledger.fulfilment(id) else { throw DownloadError.refused(.unknownTransaction(id)) }
        return OperatorFulfilment(
            row, attempts: try await ledger.attempts(of: id),
            calls: try await ledger.serverCalls(ServerCallListQuery(transactionID: id, limit: 10)),
            rescission: try await ledger.consentRescission(of: row))
    }

    @Sendable func refulfil(_ request: Request, context: Context) async throws -> Reverification {
        let id = try Self.transactionID(context)
        let dryRun = request.uri.queryParameters.get("dryRun") == "true"
        do {
            return try await entitlements.refulfil(id, dryRun: dryRun)
        } catch LedgerError.unknownTransaction {
            throw DownloadError.refused(.unknownTransaction(id))
        }
    }

    @Sendable func revoke(_ request: Request, context: Context) async throws -> Revoked {
        let id = try Self.transactionID(context)
        let reason = try await Self.reason(request, context: context)
        do {
            let changed = try await entitlements.revoke(id, reason: reason)
            return Revoked(revoked: changed.map(\.transactionID))
        } catch LedgerError.unknownTransaction {
            throw DownloadError.refused(.unknownTransaction(id))
        }
    }

    /// Lifts an operator's revocation; a refund's stays.
    @Sendable func reinstate(_ request: Request, context: Context) async throws -> Reinstated {
        let id = try Self.transactionID(context)
        let reason = try await Self.reason(request, context: context)
        do {
            let lifted = try await entitlements.reinstate(id, reason: reason)
            let row = try await ledger.fulfilment(id)
            return Reinstated(reinstated: lifted.map(\.transactionID), state: row?.state.rawValue ?? "unknown")
        } catch LedgerError.unknownTransaction {
            throw DownloadError.refused(.unknownTransaction(id))
        }
    }

    /// Proofs kept while the App Store was unreachable (`?status=pending|rejected`).
    @Sendable func pending(_ request: Request, context: Context) async throws -> PendingProofList {
        var status: PendingProof.Status?
        if let text = request.uri.queryParameters.get("status") {
            guard let parsed = PendingProof.Status(rawValue: text) else { throw AdminError.badRequest("unknown status \"\(text)\"") }
            status = parsed
        }
        return PendingProofList(pendingProofs: try await ledger.pendingProofs(status: status, limit: 10_000).map(PendingProofView.init))
    }

    /// Starts re-verifying every kept pending proof (`stockroom refulfil --pending`) as a job and
    /// answers at once (202) with it; while one runs, 409 names it.
    @Sendable func refulfilPending(_ request: Request, context: Context) async throws -> EditedResponse<ReverificationJobs.Job.View> {
        let dryRun = request.uri.queryParameters.get("dryRun") == "true"
        switch jobs.start(dryRun: dryRun) {
        case .started(let job):
            return EditedResponse(status: .accepted, headers: [.location: "/v1/admin/jobs/\(job.id)"], response: job.view)
        case .busy(let job):
            throw AdminError.jobRunning(job.id)
        }
    }

    /// A re-fulfilment job: its progress, and its outcomes once done.
    @Sendable func job(_ request: Request, context: Context) async throws -> ReverificationJobs.Job.View {
        let id = try context.parameters.require("jobId")
        guard let job = jobs.job(id) else { throw AdminError.unknownJob }
        return job.view
    }

    /// The `{"reason": "…"}` body of revoke and reinstate.
    private static func reason(_ request: Request, context: Context) async throws -> String {
        let malformed = AdminError.badRequest("the body must be {\"reason\": \"…\"}")
        let reason: String
        do {
            reason = try await request.decode(as: ReasonBody.self, context: context).reason
        } catch is AdminError {
            throw malformed  // a body past the upload bound stays 413
        }
        guard !reason.trimmingCharacters(in: .whitespaces).isEmpty else { throw malformed }
        // The reason is the event's `detail`, which a backend reads: bounded as the console bounds it.
        guard reason.unicodeScalars.count <= LedgerEvent.detailLimit else {
            throw AdminError.badRequest("the reason is at most \(LedgerEvent.detailLimit) characters")
        }
        return reason
    }

    private static func transactionID(_ context: Context) throws -> String {
        let id = try context.parameters.require("transactionId")
        guard TransactionID.isValid(id) else { throw AdminError.badRequest("the transaction ID is malformed") }
        return id
    }

}

// The admin API's answers, written by the context's `OperatorJSONEncoder`. Names are the JSON keys.

struct FulfilmentList: ResponseEncodable {
    var fulfilments: [OperatorFulfilment]
}

struct PendingProofList: ResponseEncodable {
    var pendingProofs: [PendingProofView]
}

struct Revoked: ResponseEncodable {
    var revoked: [String]
}

/// What reinstating lifted, and where the purchase stands.
struct Reinstated: ResponseEncodable {
    var reinstated: [String]
    var state: String
}

extension OperatorFulfilment: ResponseEncodable {}
extension Reverification: ResponseEncodable {}

/// The body of revoke and reinstate.
private struct ReasonBody: Decodable {
    var reason: String
}

/// Lets a request through only with `Authorization: Bearer <admin token>`.
struct AdminAuthentication<Context: RequestContext>: RouterMiddleware {
    let token: String

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let header = request.headers[.authorization], header.lowercased().hasPrefix("bearer ") else { throw AdminError.tokenMissing }
        guard constantTimeEquals(Array(header.dropFirst(7).utf8), Array(token.utf8)) else { throw AdminError.tokenInvalid }
        return try await next(request, context)
    }
}

/// Errors of the admin API.
enum AdminError: APIError {
    case badRequest(String)
    case tokenMissing
    case tokenInvalid
    /// A re-fulfilment job is queued or running already: this one.
    case jobRunning(String)
    case unknownJob
    case unknownDelivery

    var status: HTTPResponse.Status {
        switch self {
        case .badRequest: .badRequest
        case .tokenMissing: .unauthorized
        case .tokenInvalid: .forbidden
        case .jobRunning: .conflict
        case .unknownJob, .unknownDelivery: .notFound
        }
    }

    var code: String {
        switch self {
        case .badRequest: "bad_request"
        case .tokenMissing: "admin_token_missing"
        case .tokenInvalid: "admin_token_invalid"
        case .jobRunning: "job_running"
        case .unknownJob, .unknownDelivery: "not_found"
        }
    }

    var message: String {
        switch self {
        case .badRequest(let detail): detail
        case .tokenMissing: "Send \"Authorization: Bearer <STOCKROOM_ADMIN_TOKEN>\"."
        case .tokenInvalid: "The admin token is wrong."
        case .jobRunning(let id): "A re-fulfilment job is running: GET /v1/admin/jobs/\(id) for its progress."
        case .unknownJob: "No such job on this instance (jobs are remembered until it restarts)."
        case .unknownDelivery: "No webhook delivery has this ID."
        }
    }

    var details: [String: String] {
        if case .jobRunning(let id) = self { return ["jobId": id] }
        return [:]
    }

    var headers: HTTPFields {
        switch self {
        case .tokenMissing: [.wwwAuthenticate: "Bearer"]
        case .jobRunning(let id): [.location: "/v1/admin/jobs/\(id)"]
        default: [:]
        }
    }
}

extension AdminError: Equatable {}
