/// How hard to try an upstream that answers with a transient failure.
public struct RetryPolicy: Sendable {
    /// Calls per verification at most, environment switches (21007/21008) not counted.
    public var maximumAttempts: Int
    /// The first backoff; each retry doubles it, up to `maximumBackoff`, with jitter.
    public var initialBackoff: Duration
    public var maximumBackoff: Duration
    /// The whole verification, retries and waits included, ends within this.
    public var totalBudget: Duration
    /// What an unavailable verdict tells the client to wait before retrying.
    public var retryAfter: Duration

    public init(
        maximumAttempts: Int = 4, initialBackoff: Duration = .milliseconds(250), maximumBackoff: Duration = .seconds(2),
        totalBudget: Duration = .seconds(20), retryAfter: Duration = .seconds(30)
    ) {
        self.maximumAttempts = maximumAttempts
        self.initialBackoff = initialBackoff
        self.maximumBackoff = maximumBackoff
        self.totalBudget = totalBudget
        self.retryAfter = retryAfter
    }

    /// The longest wait a `Retry-After` field can ask for; a longer one is read as this.
    public static let longestRetryAfter: Duration = .seconds(3600)

    /// The wait an upstream's `Retry-After` field asks for, in delay-seconds (RFC 9110 §10.2.3;
    /// fractions tolerated), capped at `longestRetryAfter`; nil when the field is absent, an
    /// HTTP-date, negative or not a finite number. Outside text never reaches an integer
    /// conversion unbounded: `1e30` is an hour, `nan` is nil.
    public static func wait(retryAfter field: String?) -> Duration? {
        // Digits, a point and an exponent only: `Double(_:)` alone would also take "nan", "inf", "0x1p9".
        let numeric: (UInt8) -> Bool = { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || Array(".eE+".utf8).contains($0) }
        guard let text = field?.trimmingWhitespace(), !text.isEmpty, text.utf8.count <= 32, text.utf8.allSatisfy(numeric),
            let seconds = Double(text), seconds.isFinite, seconds >= 0
        else { return nil }
        let longest = Double(longestRetryAfter.components.seconds)
        guard let milliseconds = Int64(exactly: (min(seconds, longest) * 1000).rounded()) else { return nil }
        return .milliseconds(milliseconds)
    }

    /// The wait before retry number `retry` (1-based): exponential, capped, jittered to 50–100%
    /// so that many clients failing together do not retry together.
    func backoff(beforeRetry retry: Int) -> Duration {
        let exponential = initialBackoff * (1 << min(retry - 1, 20))
        let capped = min(exponential, maximumBackoff)
        return capped * Double.random(in: 0.5...1.0)
    }
}
