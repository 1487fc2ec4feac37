import Foundation

/// How Stockroom writes the JSON it answers and prints: keys sorted, slashes unescaped, times in
/// ISO 8601, so the same value always reads the same.
public enum OperatorJSON {
    public static func data(_ value: some Encodable) -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(value)) ?? Data("null".utf8)
    }

    public static func string(_ value: some Encodable) -> String {
        String(decoding: data(value), as: UTF8.self)
    }

    public static func date(_ date: Date) -> String { date.ISO8601Format() }
}
