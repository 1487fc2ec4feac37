/// Who sends content bytes once a download is authorised: nginx, told by an
/// `X-Accel-Redirect` header (`--offload x-accel-redirect`), instead of Stockroom itself.
///
/// Stockroom still makes every decision and sets every header; nginx only reads the file with
/// sendfile, applies `Range`, and reports how each response ended to `report`.
public struct ContentOffload: Sendable, Equatable {
    /// How the front is told which file to send; nginx's `X-Accel-Redirect` is the one kind.
    public enum Mode: String, Sendable, Equatable, CaseIterable {
        case xAccelRedirect = "x-accel-redirect"
    }

    public var mode: Mode
    /// The URI prefix of nginx's `internal` location aliased to the content folder: starts and
    /// ends with `/`, letters, digits, `-`, `_`, `.` and `/` only.
    public var prefix: String
    /// Where nginx's delivery reports arrive (syslog over UDP, loopback only).
    public var report: OffloadReportAddress

    /// The prefix `stockroom deploy nginx` and `serve` use when none is given.
    public static let defaultPrefix = "/_protected/"

    public init(mode: Mode = .xAccelRedirect, prefix: String = ContentOffload.defaultPrefix, report: OffloadReportAddress = .default) {
        self.mode = mode
        self.prefix = prefix
        self.report = report
    }

    /// The offload named by `--offload` (`x-accel-redirect`, or `off` for nil), with a checked
    /// `--offload-prefix` and `--offload-report`; a usage error names the bad value.
    public static func parse(mode: String, prefix: String?, report: String?) throws(OffloadSettingError) -> ContentOffload? {
        if mode == "off" { return nil }
        guard let kind = Mode(rawValue: mode) else { throw .mode(mode) }
        let prefix = prefix ?? defaultPrefix
        guard isValidPrefix(prefix) else { throw .prefix(prefix) }
        var address = OffloadReportAddress.default
        if let report { address = try OffloadReportAddress(parsing: report) }
        return ContentOffload(mode: kind, prefix: prefix, report: address)
    }

    /// Whether `prefix` can name an nginx location and begin an internal URI unchanged: `/`, a
    /// safe segment or more, `/`; no `.` or `..` segment, at most 128 bytes.
    public static func isValidPrefix(_ prefix: String) -> Bool {
        let bytes = Array(prefix.utf8)
        guard (2...128).contains(bytes.count), bytes.first == UInt8(ascii: "/"), bytes.last == UInt8(ascii: "/") else { return false }
        guard bytes.allSatisfy(isPrefixByte) else { return false }
        let segments = prefix.split(separator: "/", omittingEmptySubsequences: false).dropFirst().dropLast()
        return !segments.isEmpty && segments.allSatisfy { !$0.isEmpty && $0 != "." && $0 != ".." }
    }

    private static func isPrefixByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
            UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."), UInt8(ascii: "/"):
            true
        default: false
        }
    }
}

/// Why an offload setting was refused; the executable prints it as a usage error.
public enum OffloadSettingError: Error, Equatable, CustomStringConvertible {
    case mode(String)
    case prefix(String)
    case report(String)

    public var description: String {
        switch self {
        case .mode(let text): "--offload must be x-accel-redirect or off, not \"\(text)\""
        case .prefix(let text):
            "--offload-prefix must start and end with / and hold only letters, digits, -, _, . and / (no . or .. segment), not \"\(text)\""
        case .report(let text): "--offload-report must be a loopback address and port (127.0.0.1:5514, [::1]:5514), not \"\(text)\""
        }
    }
}
