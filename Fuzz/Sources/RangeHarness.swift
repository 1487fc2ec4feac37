import HTTPTypes
import StockroomCore

/// `Range` and `If-Range` fields: the first line of the input is `Range`, the second (if any)
/// `If-Range`. Every plan is checked to stay inside the file, for sizes from empty to `Int64.max`.
enum RangeHarness {
    static let sizes: [Int64] = [0, 1, 2, 100, 512 << 10, 1 << 40, Int64.max]
    static let sha256 = String(repeating: "ab", count: 32)

    static func run(_ input: [UInt8]) {
        let lines = input.split(separator: 0x0A, maxSplits: 1, omittingEmptySubsequences: false)
        let range = String(decoding: lines.first ?? [], as: UTF8.self)
        let specs = ByteRangeHeader.parse(range) ?? []
        // HTTPField makes a value with control characters legal (they become spaces), as a server reads it.
        var fields: HTTPFields = [.range: range]
        if lines.count == 2 { fields[.ifRange] = String(decoding: lines[1], as: UTF8.self) }
        for size in sizes {
            for spec in specs {
                if let resolved = spec.resolve(size: size) { check(resolved, size: size, field: range) }
            }
            let representation = ContentRepresentation(path: "fuzz", size: size, sha256: sha256, contentType: "application/octet-stream")
            if case .partial(let resolved) = ContentPlan(fields: fields, representation: representation) {
                check(resolved, size: size, field: range)
            }
        }
    }

    private static func check(_ resolved: ClosedRange<Int64>, size: Int64, field: String) {
        guard resolved.lowerBound >= 0, resolved.upperBound < size else {
            fatalError("Range \(field) resolved to \(resolved) in a file of \(size) bytes")
        }
    }
}
