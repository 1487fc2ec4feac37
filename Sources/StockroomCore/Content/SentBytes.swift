/// The bytes of a transaction's content that went out, over every attempt: the union of the
/// ranges written to the client, as disjoint ranges in order.
///
/// Bounded whatever the number of requests: past `SentBytes.limit` ranges the smallest is
/// forgotten. Forgetting can only make Stockroom claim less than went out, never more, so
/// "every byte went out" stays true whenever it is said.
public struct SentBytes: Sendable, Equatable, Codable, CustomStringConvertible {
    /// The most disjoint ranges kept (a row's column stays under about 1.3 KB).
    public static let limit = 32

    /// Disjoint, not adjacent, in ascending order.
    public private(set) var ranges: [ClosedRange<Int64>]

    /// Nothing went out.
    public init() { ranges = [] }

    /// Whether no byte went out.
    public var isEmpty: Bool { ranges.isEmpty }

    /// How many bytes went out (each counted once).
    public var count: Int64 {
        ranges.reduce(0) { total, range in
            let (sum, overflow) = total.addingReportingOverflow(range.count)
            return overflow ? .max : sum
        }
    }

    /// Whether every byte of content of `size` bytes went out (an empty file: always).
    public func covers(size: Int64) -> Bool {
        size <= 0 || (ranges.first.map { $0.lowerBound <= 0 && $0.upperBound >= size - 1 } ?? false)
    }

    /// Adds the bytes of `range`, merging what overlaps or touches it.
    public mutating func add(_ range: ClosedRange<Int64>) {
        guard range.lowerBound >= 0 else { return }
        var merged = range
        var kept: [ClosedRange<Int64>] = []
        kept.reserveCapacity(ranges.count + 1)
        var placed = false
        for existing in ranges {
            if existing.upperBound < merged.lowerBound - 1 {
                kept.append(existing)
            } else if existing.lowerBound > merged.upperBound + 1 {
                if !placed {
                    kept.append(merged)
                    placed = true
                }
                kept.append(existing)
            } else {
                merged = min(existing.lowerBound, merged.lowerBound)...max(existing.upperBound, merged.upperBound)
            }
        }
        if !placed { kept.append(merged) }
        while kept.count > Self.limit {
            let smallest = kept.indices.min { kept[$0].count < kept[$1].count }!
            kept.remove(at: smallest)
        }
        ranges = kept
    }

    /// `first-last` per range, comma-separated (`0-1023,4096-8191`); empty when nothing went out.
    public var description: String {
        ranges.map { "\($0.lowerBound)-\($0.upperBound)" }.joined(separator: ",")
    }

    /// Reads `description`'s form; nil when the text is not that form (unordered, overlapping,
    /// negative, or more than `limit` ranges).
    public init?(text: String) {
        ranges = []
        guard !text.isEmpty else { return }
        let parts = text.split(separator: ",", omittingEmptySubsequences: false)
        guard parts.count <= Self.limit else { return nil }
        for part in parts {
            let bounds = part.split(separator: "-", omittingEmptySubsequences: false)
            guard bounds.count == 2, bounds.allSatisfy({ !$0.isEmpty && $0.utf8.allSatisfy { $0 >= 48 && $0 <= 57 } }),
                let first = Int64(bounds[0]), let last = Int64(bounds[1]), first <= last
            else { return nil }
            if let previous = ranges.last, previous.upperBound >= first - 1 { return nil }
            ranges.append(first...last)
        }
    }

    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        guard let sent = SentBytes(text: text) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "not a list of byte ranges"))
        }
        self = sent
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }
}

extension ClosedRange where Bound == Int64 {
    /// How many values the range holds, saturating.
    fileprivate var count: Int64 {
        let (difference, overflow) = upperBound.subtractingReportingOverflow(lowerBound)
        return overflow || difference == .max ? .max : difference + 1
    }
}
