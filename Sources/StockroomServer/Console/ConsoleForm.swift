import Foundation
import Hummingbird

/// An `application/x-www-form-urlencoded` body, as the console's forms post it: bounded in size,
/// fields and field length, so a hostile post costs little.
struct ConsoleForm: Sendable {
    /// Bodies past this are refused (413).
    static let maximumBodySize = 16 * 1024
    /// Fields past this many are ignored.
    static let maximumFields = 16

    private(set) var fields: [String: String] = [:]

    /// Parses `text`; a field named twice keeps its first value.
    init(_ text: String) {
        for pair in text.split(separator: "&", omittingEmptySubsequences: true).prefix(Self.maximumFields) {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let name = Self.decode(parts[0]) else { continue }
            let value = parts.count > 1 ? Self.decode(parts[1]) : ""
            if fields[name] == nil, let value { fields[name] = value }
        }
    }

    /// Reads the request's body as a form; 413 past `maximumBodySize`, 415 when it is not a form.
    static func read(_ request: Request) async throws(ConsoleError) -> ConsoleForm {
        let type = request.headers[.contentType]?.lowercased() ?? ""
        guard type.hasPrefix("application/x-www-form-urlencoded") else { throw .unsupportedForm }
        do {
            let body = try await request.body.collect(upTo: maximumBodySize)
            return ConsoleForm(String(decoding: body.readableBytesView, as: UTF8.self))
        } catch {
            throw .formTooLarge
        }
    }

    subscript(_ name: String) -> String? { fields[name] }

    /// `+` is a space; `%XX` a byte; text that is not UTF-8 after decoding is dropped.
    private static func decode(_ text: Substring) -> String? {
        text.replacingOccurrences(of: "+", with: " ").removingPercentEncoding
    }
}
