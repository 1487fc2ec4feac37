/// What one attempt at an upstream call came to, for `RetryPolicy.run`.
enum UpstreamAttempt<Answer> {
    /// Done: a success, or a refusal that asking again will not change.
    case answered(Answer)
    /// A transient failure: try again after `after` (the upstream's `Retry-After`) or else the
    /// policy's backoff, while attempts and budget last.
    case retry(reason: String, after: Duration? = nil)
    /// Ask again at once somewhere else (the other environment): not counted as an attempt.
    case redirected(reason: String? = nil)
}

extension RetryPolicy {
    /// The one retry loop of Stockroom's upstream calls (verifyReceipt and the App Store Server
    /// API): `attempt` is called with the time left in `totalBudget` until it answers, or
    /// `maximumAttempts` are spent, or the next wait would end past the budget; then `givingUp`
    /// makes the answer from the attempts made and the last failure. An attempt starts only with
    /// more than `leastUseful` left; `beforeRetry` hears each retry before its wait.
    func run<Answer>(
        leastUseful: Duration = .zero,
        _ attempt: (_ timeout: Duration) async -> UpstreamAttempt<Answer>,
        beforeRetry: (_ attempts: Int, _ lastFailure: String) -> Void = { _, _ in },
        givingUp: (_ attempts: Int, _ lastFailure: String) -> Answer
    ) async -> Answer {
        let clock = ContinuousClock()
        let deadline = clock.now + totalBudget
        var attempts = 0
        var lastFailure = "no attempt made"
        while deadline - clock.now > leastUseful {
            attempts += 1
            switch await attempt(deadline - clock.now) {
            case .answered(let answer):
                return answer
            case .redirected(let reason):
                attempts -= 1  // a redirect, not a retry
                if let reason { lastFailure = reason }
            case .retry(let reason, let after):
                lastFailure = reason
                let wait = after ?? backoff(beforeRetry: attempts)
                guard attempts < maximumAttempts, clock.now + wait < deadline else { return givingUp(attempts, lastFailure) }
                beforeRetry(attempts, lastFailure)
                try? await Task.sleep(for: wait)
            }
        }
        return givingUp(attempts, lastFailure)
    }
}
