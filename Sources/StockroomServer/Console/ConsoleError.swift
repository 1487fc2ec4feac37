import Foundation
import HTTPTypes
import StockroomCore

/// Why the console refused a request: each case a status and a stable `code`, shown as an HTML
/// page (the console's users are people in a browser, not API clients).
enum ConsoleError: Error, Equatable {
    /// An action without a session.
    case notSignedIn
    /// A form post whose CSRF token is missing or wrong.
    case csrfRefused
    case badRequest(String)
    case unknownTransaction(String)
    case unknownDelivery
    case formTooLarge
    case unsupportedForm
    case ledgerUnavailable(retryAfter: Duration)

    var status: HTTPResponse.Status {
        switch self {
        case .notSignedIn: .unauthorized
        case .csrfRefused: .forbidden
        case .badRequest: .badRequest
        case .unknownTransaction, .unknownDelivery: .notFound
        case .formTooLarge: .contentTooLarge
        case .unsupportedForm: .unsupportedMediaType
        case .ledgerUnavailable: .serviceUnavailable
        }
    }

    var code: String {
        switch self {
        case .notSignedIn: "console_session_missing"
        case .csrfRefused: "csrf_token_invalid"
        case .badRequest: "bad_request"
        case .unknownTransaction: "unknown_transaction"
        case .unknownDelivery: "not_found"
        case .formTooLarge: "body_too_large"
        case .unsupportedForm: "unsupported_media_type"
        case .ledgerUnavailable: "ledger_unavailable"
        }
    }

    var message: String {
        switch self {
        case .notSignedIn: "Sign in to the console first."
        case .csrfRefused: "This form is stale or was not sent from the console: go back, reload the page and try again."
        case .badRequest(let detail): detail
        case .unknownTransaction(let id): "There is no transaction \(id) in the ledger."
        case .unknownDelivery: "No webhook delivery has this ID."
        case .formTooLarge: "The form is larger than \(ConsoleForm.maximumBodySize / 1024) KiB."
        case .unsupportedForm: "Send the console's forms as application/x-www-form-urlencoded."
        case .ledgerUnavailable: "The ledger database cannot be reached just now; try again in a few seconds."
        }
    }

    /// The page that says it, with `session` for the navigation when there is one.
    func page(session: ConsoleSession?) -> ConsoleResponse {
        var body = "<h1>\(HTML.escape(status.reasonPhrase))</h1>\n"
        body += "<p class=\"error\" data-code=\"\(HTML.escape(code))\">\(HTML.escape(message))</p>\n"
        body +=
            session == nil ? "<p><a href=\"/console/login\">Sign in</a></p>\n" : "<p><a href=\"/console\">Back to the dashboard</a></p>\n"
        var response = ConsoleResponse.page(title: status.reasonPhrase, body: body, session: session, status: status)
        if case .ledgerUnavailable(let retryAfter) = self { response.headers[.retryAfter] = "\(max(1, retryAfter.components.seconds))" }
        return response
    }
}
