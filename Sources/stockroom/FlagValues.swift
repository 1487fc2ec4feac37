import ArgumentParser
import StockroomServer

/// One option group's values as `serve` reads them: the flag when given, else the variable
/// `STOCKROOM_<NAME>`; a malformed value is a usage error (exit 64) that names the flag.
struct FlagValues {
    let environment: [String: String]

    /// The flag's text, or the variable's.
    func text(_ flag: String?, _ name: String) -> String? {
        flag ?? environment["STOCKROOM_\(name)"]
    }

    /// A duration such as `30s` or `24h`.
    func duration(_ flag: String?, _ name: String, option: String) throws -> Duration? {
        guard let text = text(flag, name) else { return nil }
        do {
            return try DurationArgument.parse(text)
        } catch {
            throw ValidationError("--\(option): \(error)")
        }
    }

    /// A whole number within `range`.
    func number(_ flag: Int?, _ name: String, option: String, in range: ClosedRange<Int>) throws -> Int? {
        guard let text = text(flag.map(String.init), name) else { return nil }
        guard let number = Int(text), range.contains(number) else {
            throw ValidationError("--\(option) must be a number from \(range.lowerBound) to \(range.upperBound), not \"\(text)\"")
        }
        return number
    }
}
