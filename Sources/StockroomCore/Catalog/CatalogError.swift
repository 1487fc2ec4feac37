/// Why a catalogue was refused: every problem found, one per line, each naming its product or line.
public struct CatalogError: Error, Equatable, CustomStringConvertible {
    public var problems: [String]

    public init(_ problems: [String]) {
        self.problems = problems
    }

    public var description: String { problems.joined(separator: "\n") }
}
