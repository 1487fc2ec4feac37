public import HTTPTypes

/// What a GET or HEAD for a content file will answer, decided from `Range` and `If-Range`
/// before any byte is read (RFC 9110 §13.1.5, §14).
public enum ContentPlan: Sendable, Equatable {
    /// 200 with the whole file.
    case whole
    /// 206 with one range.
    case partial(ClosedRange<Int64>)
    /// 416: no requested range overlaps the file.
    case unsatisfiable

    /// Plans the answer to a request with `fields` for `representation`.
    ///
    /// A `Range` field that is not a valid `bytes` range set is ignored (whole file). `If-Range`
    /// is compared with the strong ETag only: a weak tag, a date or another tag sends the
    /// whole file. Several ranges are answered with the whole file (200) unless none is
    /// satisfiable (416); one range gets a 206.
    public init(fields: HTTPFields, representation: ContentRepresentation) {
        guard let rangeField = fields[.range], let specs = ByteRangeHeader.parse(rangeField) else {
            self = .whole
            return
        }
        if let ifRange = fields[.ifRange], ifRange.trimmingWhitespace() != representation.etag {
            self = .whole
            return
        }
        let satisfiable = specs.compactMap { $0.resolve(size: representation.size) }
        if satisfiable.isEmpty {
            self = .unsatisfiable
        } else if specs.count == 1 {
            self = .partial(satisfiable[0])
        } else {
            self = .whole
        }
    }
}
