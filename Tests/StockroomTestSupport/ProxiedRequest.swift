import Foundation

/// One HTTP request as it passed through a `TCPProxy`, for a test to say what reached a server:
/// its request line, its header fields as sent, and its body.
public struct ProxiedRequest: Sendable, CustomStringConvertible {
    public let method: String
    /// The request target: path and query.
    public let target: String
    public let fields: [(name: String, value: String)]
    public let body: Data

    /// The target without its query.
    public var path: String { String(target.prefix { $0 != "?" }) }

    /// The query, without the `?`; empty when none.
    public var query: String { target.firstIndex(of: "?").map { String(target[target.index(after: $0)...]) } ?? "" }

    /// The first value of the field `name`, whatever its case.
    public func header(_ name: String) -> String? {
        fields.first { $0.name.lowercased() == name.lowercased() }?.value
    }

    /// The whole request as text: its head and body, to look for a secret anywhere in it.
    public var text: String {
        "\(method) \(target)\r\n" + fields.map { "\($0.name): \($0.value)\r\n" }.joined() + "\r\n" + String(decoding: body, as: UTF8.self)
    }

    public var description: String { "\(method) \(path)" }
}

/// Reads the requests of one connection from the bytes a client sends, as they arrive: each head,
/// then a body of its `Content-Length`. A chunked body, a head that cannot be read, more than
/// `limit` bytes of one request, or bytes that are not HTTP at all (a PostgreSQL connection) end
/// the reading: the bytes still pass; only the record stops.
struct RequestReader {
    static let limit = 1 << 20
    private var buffered = Data()
    private var stopped = false

    /// The requests that `bytes` completes.
    mutating func read(_ bytes: Data) -> [ProxiedRequest] {
        guard !stopped else { return [] }
        buffered.append(bytes)
        var requests: [ProxiedRequest] = []
        while let end = buffered.range(of: Data("\r\n\r\n".utf8)) {
            let lines = String(decoding: buffered[buffered.startIndex..<end.lowerBound], as: UTF8.self).components(separatedBy: "\r\n")
            let parts = lines.first?.split(separator: " ", maxSplits: 2) ?? []
            guard parts.count == 3 else {
                stopped = true
                return requests
            }
            let fields = lines.dropFirst().compactMap { line -> (name: String, value: String)? in
                guard let colon = line.firstIndex(of: ":") else { return nil }
                return (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
            }
            let field = { (name: String) in fields.first { $0.name.lowercased() == name }?.value }
            if field("transfer-encoding") != nil {
                stopped = true
                return requests
            }
            let length = Int(field("content-length") ?? "0") ?? 0
            let bodyStart = end.upperBound
            guard (0...Self.limit).contains(length) else {
                stopped = true
                return requests
            }
            guard buffered.endIndex - bodyStart >= length else { break }
            let body = Data(buffered[bodyStart..<(bodyStart + length)])
            requests.append(ProxiedRequest(method: String(parts[0]), target: String(parts[1]), fields: fields, body: body))
            buffered = Data(buffered[(bodyStart + length)...])
        }
        if buffered.count > Self.limit {
            stopped = true
            buffered = Data()
        }
        return requests
    }
}
