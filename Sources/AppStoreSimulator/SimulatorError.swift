import Hummingbird
import StockroomCore
import StockroomHTTP

/// Errors of the simulator's control API, in Stockroom's JSON error shape.
enum SimulatorError: APIError {
    case badRequest(String)
    case unknownTransaction(String)
    case `internal`(String)

    var status: HTTPResponse.Status {
        switch self {
        case .badRequest: .badRequest
        case .unknownTransaction: .notFound
        case .internal: .internalServerError
        }
    }

    var code: String {
        switch self {
        case .badRequest: "bad_request"
        case .unknownTransaction: "unknown_transaction"
        case .internal: "internal_error"
        }
    }

    var message: String {
        switch self {
        case .badRequest(let detail): detail
        case .unknownTransaction(let id): "The simulator sold no transaction \(id)."
        case .internal(let detail): detail
        }
    }
}
