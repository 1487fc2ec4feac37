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
}

extension ContentError: APIError {
    public var status: HTTPResponse.Status {
        switch self {
        case .changedSinceHashed: .serviceUnavailable
        case .rangeNotSatisfiable: .rangeNotSatisfiable
        }
    }

    public var code: String {
        switch self {
        case .changedSinceHashed: "content_changing"
        case .rangeNotSatisfiable: "range_not_satisfiable"
        }
    }

    public var message: String {
        switch self {
        case .changedSinceHashed: "The content file is being updated; retry shortly."
        case .rangeNotSatisfiable(let size): "The requested range does not overlap the \(size)-byte file."
        }
    }

    public var headers: HTTPFields {
        switch self {
        case .changedSinceHashed: [.retryAfter: "2"]
        case .rangeNotSatisfiable(let size): [.contentRange: "bytes */\(size)"]
        }
    }
}
