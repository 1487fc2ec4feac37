/// How many requests that reach the App Store one client address may make per period: `30/m`,
/// `100/h`, `10/30s` (`--upstream-rate`); `off` lifts the limit (for a front that already
/// limits, or a benchmark). A client may spend the whole allowance at once, then one more
/// request each `period / requests`.
public struct UpstreamRate: Sendable, Equatable, CustomStringConvertible {
    /// Requests per period, at least 1.
    public let requests: Int
    /// The period the allowance refills over.
    public let period: Duration

    /// Nil when `requests` is not 1...1,000,000 or `period` is not positive.
    public init?(requests: Int, per period: Duration) {
        guard (1...1_000_000).contains(requests), period > .zero else { return nil }
        self.requests = requests
        self.period = period
    }

    /// The default: 30 a minute per address.
    public static let `default` = UpstreamRate(requests: 30, per: .seconds(60))!

    /// `N/unit` or `N/duration` (`30/m`, `10/30s`), or nil for `off`; a usage error otherwise.
    public static func parse(_ text: String) throws(DurationArgumentError) -> UpstreamRate? {
        if text == "off" { return nil }
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, parts[0].count <= 7, let requests = Int(parts[0]) else { throw Self.error(text) }
        let periodText = parts[1].first?.isNumber == true ? String(parts[1]) : "1" + parts[1]
        let period: Duration
        do {
            period = try DurationArgument.parse(periodText)
        } catch {
            throw Self.error(text)
        }
        guard let rate = UpstreamRate(requests: requests, per: period) else { throw Self.error(text) }
        return rate
    }

    /// As written: `30/m` for one unit, `10/30s` otherwise.
    public var description: String {
        let period = DurationArgument.format(period)
        return "\(requests)/\(period.count == 2 && period.hasPrefix("1") ? String(period.dropFirst()) : period)"
    }

    private static func error(_ text: String) -> DurationArgumentError {
        DurationArgumentError(text: text, kind: .rate)
    }
}
