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

    /// The wait before retry number `retry` (1-based): exponential, capped, jittered to 50–100%
    /// so that many clients failing together do not retry together.
    func backoff(beforeRetry retry: Int) -> Duration {
        let exponential = initialBackoff * (1 << min(retry - 1, 20))
        let capped = min(exponential, maximumBackoff)
        return capped * Double.random(in: 0.5...1.0)
    }
}
