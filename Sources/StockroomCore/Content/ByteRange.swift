/// One range of a `Range: bytes=…` header (RFC 9110 §14.1.2), before it meets a file size.
public enum ByteRangeSpec: Sendable, Equatable {
    /// `first-last`: both inclusive.
    case bounded(first: Int64, last: Int64)
    /// `first-`: from `first` to the end.
    case from(first: Int64)
    /// `-length`: the last `length` bytes.
    case suffix(length: Int64)

    /// The bytes this range selects in a representation of `size` bytes; nil when unsatisfiable.
    public func resolve(size: Int64) -> ClosedRange<Int64>? {
        switch self {
        case .bounded(let first, let last):
            // Parsed specs hold first ≤ last and no negatives; built ones are checked all the same.
            guard first >= 0, first <= last, first < size else { return nil }
            return first...min(last, size - 1)
        case .from(let first):
            guard first >= 0, first < size else { return nil }
            return first...(size - 1)
        case .suffix(let length):
            // RFC 9110 §14.1.3: a zero suffix, or any suffix of an empty representation, is unsatisfiable.
            guard length > 0, size > 0 else { return nil }
            return max(0, size - length)...(size - 1)
        }
    }
}

/// Parsing of the `Range` header field.
public enum ByteRangeHeader {
    /// The range specs of `value`, or nil when the field is not a valid `bytes` range set:
    /// RFC 9110 §14.2 has a server ignore such a field and send the whole representation.
    public static func parse(_ value: String) -> [ByteRangeSpec]? {
        let trimmed = value.trimmingWhitespace()
        guard let equals = trimmed.firstIndex(of: "=") else { return nil }
        guard trimmed[..<equals].lowercased() == "bytes" else { return nil }
        var specs: [ByteRangeSpec] = []
        for element in trimmed[trimmed.index(after: equals)...].split(separator: ",", omittingEmptySubsequences: false) {
            let item = element.trimmingWhitespace()
            if item.isEmpty { continue }  // the #rule list allows empty elements
            guard let spec = parseSpec(item) else { return nil }
            specs.append(spec)
        }
        return specs.isEmpty ? nil : specs
    }

    private static func parseSpec(_ item: Substring) -> ByteRangeSpec? {
        guard let dash = item.firstIndex(of: "-") else { return nil }
        let head = item[..<dash]
        let tail = item[item.index(after: dash)...]
        if head.isEmpty {
            guard let length = parseDigits(tail) else { return nil }
            return .suffix(length: length)
        }
        guard let first = parseDigits(head) else { return nil }
        if tail.isEmpty { return .from(first: first) }
        guard let last = parseDigits(tail), last >= first else { return nil }
        return .bounded(first: first, last: last)
    }

    /// Non-negative decimal digits; values past Int64.max saturate (they exceed any file).
    private static func parseDigits(_ text: Substring) -> Int64? {
        guard !text.isEmpty else { return nil }
        var value: Int64 = 0
        for byte in text.utf8 {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
            let (times, overflow1) = value.multipliedReportingOverflow(by: 10)
            let (sum, overflow2) = times.addingReportingOverflow(Int64(byte - UInt8(ascii: "0")))
            value = overflow1 || overflow2 ? Int64.max : sum
        }
        return value
    }
}

extension StringProtocol {
    /// The text without leading and trailing spaces and tabs (HTTP's optional white space).
    func trimmingWhitespace() -> Substring {
        let isWhitespace: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        let text = self[...]
        guard let start = text.firstIndex(where: { !isWhitespace($0) }),
            let end = text.lastIndex(where: { !isWhitespace($0) })
        else { return Substring() }
        return Substring(text[start...end])
    }
}
