import Foundation
import Testing
@testable import StockroomCore

/// Issue 19: the one retry loop every upstream call goes through (verifyReceipt, Get Transaction
/// Info, Get Transaction History, Get Notification History).
@Suite struct RetryPolicyRunTests {
    /// Waits of a millisecond and a budget no stall of a loaded test machine uses up.
    static let quick = RetryPolicy(
        maximumAttempts: 3, initialBackoff: .milliseconds(1), maximumBackoff: .milliseconds(1), totalBudget: .seconds(60))

    @Test func attemptsStopAtTheMaximumAndGivingUpHearsTheLastFailure() async {
        var calls = 0
        let answer = await Self.quick.run { _ -> UpstreamAttempt<String> in
            calls += 1
            return .retry(reason: "failure \(calls)")
        } givingUp: { attempts, last in
            "gave up after \(attempts): \(last)"
        }
        #expect(answer == "gave up after 3: failure 3")
        #expect(calls == 3)
    }

    @Test func aRedirectIsNotCountedAsAnAttempt() async {
        var calls = 0
        let answer = await Self.quick.run { _ -> UpstreamAttempt<String> in
            calls += 1
            return calls == 1 ? .redirected(reason: "elsewhere") : .retry(reason: "down")
        } givingUp: { attempts, last in
            "\(attempts) \(last)"
        }
        #expect(answer == "3 down")
        #expect(calls == 4)
    }

    @Test func anAnswerEndsTheLoopAtOnce() async {
        var calls = 0
        let answer = await Self.quick.run { _ -> UpstreamAttempt<Int> in
            calls += 1
            return calls == 2 ? .answered(42) : .retry(reason: "once")
        } givingUp: { _, _ in
            0
        }
        #expect(answer == 42 && calls == 2)
    }

    @Test func aRetryAfterPastTheBudgetGivesUpWithoutWaiting() async {
        let start = ContinuousClock.now
        var retries = 0
        let answer = await Self.quick.run { _ -> UpstreamAttempt<String> in
            .retry(reason: "rate limited", after: .seconds(3600))
        } beforeRetry: { _, _ in
            retries += 1
        } givingUp: { attempts, _ in
            "\(attempts)"
        }
        #expect(answer == "1" && retries == 0)
        #expect(ContinuousClock.now - start < .seconds(30))
    }

    @Test func eachAttemptIsGivenWhatIsLeftOfTheBudget() async {
        var timeouts: [Duration] = []
        _ = await Self.quick.run { timeout -> UpstreamAttempt<Bool> in
            timeouts.append(timeout)
            return .retry(reason: "again")
        } givingUp: { _, _ in
            false
        }
        #expect(timeouts.count == 3)
        #expect(timeouts.allSatisfy { $0 <= .seconds(60) && $0 > .seconds(45) })
        #expect(timeouts == timeouts.sorted(by: >))
    }
}
