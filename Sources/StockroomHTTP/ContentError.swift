import StockroomCore
public import HTTPTypes
import Hummingbird

/// Why content could not be delivered.
public enum ContentError: Error, Equatable {
    /// The file's size or stamp moved since the catalogue hashed it (an edit in progress);
    /// the catalogue watcher will re-hash it shortly.
    case changedSinceHashed(String)
    /// No requested range overlaps the file.
    case rangeNotSatisfiable(size: Int64)
    /// The object store could not give the object (missing, refused, down or cut off); named
    /// by its key in the log and the metric, never to the client.
    case unavailable(key: String, reason: String)
}

extension ContentError: APIError {
    public var status: HTTPResponse.Status {
        switch self {
        case .changedSinceHashed, .unavailable: .serviceUnavailable
        case .rangeNotSatisfiable: .rangeNotSatisfiable
        }
    }

    public var code: String {
        switch self {
        case .changedSinceHashed: "content_changing"
        case .rangeNotSatisfiable: "range_not_satisfiable"
        case .unavailable: "content_unavailable"
        }
    }

    public var message: String {
        switch self {
        case .changedSinceHashed: "The content file is being updated; retry shortly."
        case .rangeNotSatisfiable(let size): "The requested range does not overlap the \(size)-byte file."
        case .unavailable: "The content cannot be read from storage right now; retry shortly."
        }
    }

    public var headers: HTTPFields {
        switch self {
        case .changedSinceHashed: [.retryAfter: "2"]
        case .rangeNotSatisfiable(let size): [.contentRange: "bytes */\(size)"]
        case .unavailable: [.retryAfter: "5"]
        }
    }
}
