import Foundation
import StockroomCore

/// A view's top-level fields as `key: value` lines, keys sorted: the text form of what `--json`
/// prints, read back from the same encoding so the two never differ.
enum TextFields {
    static func lines(_ value: some Encodable, skipping: Set<String> = []) -> [String] {
        guard let fields = try? JSONDecoder().decode([String: Scalar].self, from: OperatorJSON.data(value)) else { return [] }
        return fields.keys.sorted().filter { !skipping.contains($0) }.map { "\($0): \(fields[$0]!)" }
    }

    /// A field's value as text; nested arrays and objects are not printed this way.
    private enum Scalar: Decodable, CustomStringConvertible {
        case text(String), flag(Bool), integer(Int64), number(Double), nested

        init(from decoder: any Decoder) throws {
            let value = try decoder.singleValueContainer()
            if let text = try? value.decode(String.self) {
                self = .text(text)
            } else if let flag = try? value.decode(Bool.self) {
                self = .flag(flag)
            } else if let integer = try? value.decode(Int64.self) {
                self = .integer(integer)
            } else if let number = try? value.decode(Double.self) {
                self = .number(number)
            } else {
                self = .nested
            }
        }

        var description: String {
            switch self {
            case .text(let text): text
            case .flag(let flag): "\(flag)"
            case .integer(let integer): "\(integer)"
            case .number(let number): "\(number)"
            case .nested: "…"
            }
        }
    }
}
