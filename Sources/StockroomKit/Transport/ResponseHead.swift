import Foundation

/// A response's head as libcurl hands it over, one line at a time: the status line, the fields,
/// the blank line, and again after an interim 1xx.
///
/// A status line counts only where a head begins (libcurl passes `HTTP/1.1 200 OK:` inside a
/// head, or in a trailer, on as a header line: it has a colon), its code is three digits from 100
/// to 599, nothing after the final head is part of it (trailers), and a head of more than
/// `maximumFields` fields is refused. Pure, so the `client` fuzz target reads heads through it.
struct ResponseHead: Sendable {
    /// More fields than any answer of Stockroom's, or of a proxy in front of it, carries.
    static let maximumFields = 256

    /// What a line did.
    enum Event: Equatable {
        case none
        /// A status line: a head began.
        case began
        /// The blank line after a final (2xx–5xx) status: the head is complete.
        case ended
    }

    private(set) var status = 0
    private(set) var fields: [(name: String, value: String)] = []
    private(set) var isComplete = false
    /// More than `maximumFields` fields came: the answer is refused.
    private(set) var isOversized = false
    private var awaitingStatusLine = true

    /// Reads one line, without its line break.
    mutating func read(_ line: String) -> Event {
        guard !isComplete else { return .none }
        if awaitingStatusLine {
            guard line.hasPrefix("HTTP/") else { return .none }
            awaitingStatusLine = false
            let parts = line.split(separator: " ", maxSplits: 2)
            status = parts.count > 1 ? Self.code(parts[1]) : 0
            fields = []
            return .began
        }
        if line.isEmpty {
            guard status >= 200 else {
                awaitingStatusLine = true  // an interim 1xx's head ended (or a status that is no code)
                return .none
            }
            isComplete = true
            return .ended
        }
        guard let colon = line.firstIndex(of: ":") else { return .none }
        guard fields.count < Self.maximumFields else {
            isOversized = true
            return .none
        }
        let name = String(line[..<colon]).trimmingCharacters(in: .whitespaces)
        let value = String(line[line.index(after: colon)...]).trimmingCharacters(in: .whitespaces)
        fields.append((name, value))
        return .none
    }

    /// The fields with names merged regardless of case, as HTTP allows (`a, b`); the first
    /// spelling of a name is kept.
    var mergedFields: [String: String] {
        var spelling: [String: String] = [:]
        var merged: [String: String] = [:]
        for (name, value) in fields {
            let key = name.lowercased()
            if let first = spelling[key] {
                merged[first] = (merged[first] ?? "") + ", " + value
            } else {
                spelling[key] = name
                merged[name] = value
            }
        }
        return merged
    }

    /// Three digits from 100 to 599; 0 for anything else.
    private static func code(_ text: Substring) -> Int {
        guard text.utf8.count == 3, text.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }), let code = Int(text),
            (100...599).contains(code)
        else { return 0 }
        return code
    }
}
