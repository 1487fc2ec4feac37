import Foundation
import HTTPTypes
import Testing
@testable import StockroomCore

/// Issue 8 item 1, the other ways in: ranges, `Retry-After`, and numbers in Apple's answers.
/// Each sends a number no integer can hold and expects a refusal or a bound, never a trap.
@Suite struct HostileUpstreamNumberTests {
    /// An upstream that answers every request with the same canned response. A fake because the
    /// simulator cannot be made to send numbers Apple never would.
    final class CannedTransport: UpstreamTransport {
        let response: UpstreamResponse
        init(status: Int = 200, headers: [String: String] = [:], body: String) {
            response = UpstreamResponse(status: status, headers: headers, body: Array(body.utf8))
        }
        func send(_ request: UpstreamRequest) async throws(UpstreamError) -> UpstreamResponse { response }
    }

    static let noWaiting = RetryPolicy(maximumAttempts: 2, initialBackoff: .zero, maximumBackoff: .zero, totalBudget: .seconds(5))

    @Test(arguments: [
        "bytes=99999999999999999999-", "bytes=-99999999999999999999", "bytes=0-99999999999999999999",
        "bytes=18446744073709551615-18446744073709551616", "bytes=9223372036854775807-9223372036854775807",
        "bytes=9223372036854775806-", "bytes=-9223372036854775808", "bytes=1e30-", "bytes=-1-5",
    ])
    func aHostileRangeIsPlannedNotTrapped(field: String) {
        let representation = ContentRepresentation(path: "a", size: 100, sha256: String(repeating: "ab", count: 32), contentType: "x")
        let plan = ContentPlan(fields: [.range: field], representation: representation)
        switch plan {
        case .whole, .unsatisfiable: break
        case .partial(let range): #expect(range.lowerBound >= 0 && range.upperBound <= 99, "\(field) → \(range)")
        }
    }

    @Test func hugeRangesAreUnsatisfiableOrTheWholeFile() {
        let representation = ContentRepresentation(path: "a", size: 100, sha256: String(repeating: "ab", count: 32), contentType: "x")
        func plan(_ field: String) -> ContentPlan { ContentPlan(fields: [.range: field], representation: representation) }
        #expect(plan("bytes=99999999999999999999-") == .unsatisfiable)
        #expect(plan("bytes=-99999999999999999999") == .partial(0...99))
        #expect(plan("bytes=0-99999999999999999999") == .partial(0...99))
    }

    @Test func rangesBuiltBackwardsOrNegativeResolveToNothing() {
        #expect(ByteRangeSpec.bounded(first: 5, last: 2).resolve(size: 10) == nil)
        #expect(ByteRangeSpec.bounded(first: -10, last: 5).resolve(size: 10) == nil)
        #expect(ByteRangeSpec.from(first: -1).resolve(size: 10) == nil)
        #expect(ByteRangeSpec.suffix(length: -1).resolve(size: 10) == nil)
        #expect(ByteRangeSpec.suffix(length: .max).resolve(size: 10) == 0...9)
    }

    @Test func retryAfterIsBoundedToAnHour() {
        #expect(RetryPolicy.wait(retryAfter: "1e30") == .seconds(3600))
        #expect(RetryPolicy.wait(retryAfter: "1e300") == .seconds(3600))
        #expect(RetryPolicy.wait(retryAfter: "99999999999999999999999999") == .seconds(3600))
        #expect(RetryPolicy.wait(retryAfter: "9223372036854775808") == .seconds(3600))
        #expect(RetryPolicy.wait(retryAfter: " 120 ") == .seconds(120))
        #expect(RetryPolicy.wait(retryAfter: "1.5") == .milliseconds(1500))
        #expect(RetryPolicy.wait(retryAfter: "0") == .zero)
    }

    @Test(arguments: [
        "nan", "NaN", "inf", "-inf", "infinity", "-1", "-1e30", "0x1p9", "", "   ", "Wed, 21 Oct 2015 07:28:00 GMT", "1e999", "12abc",
    ])
    func aRetryAfterThatIsNotDelaySecondsIsIgnored(field: String) {
        #expect(RetryPolicy.wait(retryAfter: field) == nil)
    }

    @Test func anAbsentRetryAfterIsIgnored() {
        #expect(RetryPolicy.wait(retryAfter: nil) == nil)
    }

    @Test(arguments: [
        #"{"status": 1e30}"#, #"{"status": -1e30}"#, #"{"status": "99999999999999999999"}"#, #"{"status": 9223372036854775808}"#,
        #"""
        {"status": 0, "receipt": {"bundle_id": "a.b", "in_app": [{"product_id": "p", "transaction_id": 1e30, "purchase_date_ms": \#
        1e30, "quantity": 1e30}]}}
        """#,
        #"""
        {"status": 0, "receipt": {"bundle_id": "a.b", "in_app": [{"product_id": "p", "transaction_id": "1", "purchase_date_ms": \#
        "99999999999999999999", "cancellation_date_ms": -1e300}]}}
        """#,
        #"{"status": 0, "latest_receipt_info": [{"product_id": "p", "transaction_id": "1", "quantity": "9223372036854775808"}]}"#,
        #"{"status": 21100.5, "is-retryable": 1e30}"#,
    ])
    func aVerifyReceiptAnswerWithHugeNumbersIsNotATrap(body: String) async {
        let client = VerifyReceiptClient(
            transport: CannedTransport(body: body), endpoints: .base("http://127.0.0.1:1"), policy: Self.noWaiting)
        // Reaching this line is most of the test: a trap would have ended the process. What comes
        // back must not carry the hostile numbers either (wrapped, saturated or truncated).
        if case .receipt(let receipt) = await client.verify(receiptData: "AAAA") {
            for transaction in receipt.inApp + receipt.latestReceiptInfo {
                #expect((0...4_102_444_800_000).contains(transaction.purchaseDate), "\(transaction)")
                #expect((0...1_000_000).contains(transaction.quantity), "\(transaction)")
                #expect(transaction.cancellationDate.map { (0...4_102_444_800_000).contains($0) } ?? true, "\(transaction)")
            }
        }
    }

    @Test(arguments: ["1e30", "-1e30", "1e300", "nan", "inf", "9223372036854775808", "99999999999999999999"])
    func aServerAPIRetryAfterOfAnySizeIsNotATrap(retryAfter: String) async throws {
        let credentials = AppStoreServerAPIClient.Credentials(issuerID: "i", keyID: "K", bundleID: "a.b", privateKey: try ECPrivateKey())
        let transport = CannedTransport(status: 429, headers: ["retry-after": retryAfter], body: "{}")
        let client = AppStoreServerAPIClient(
            credentials: credentials, endpoints: .base("http://127.0.0.1:1"), transport: transport,
            policy: RetryPolicy(maximumAttempts: 2, initialBackoff: .zero, maximumBackoff: .zero, totalBudget: .seconds(2)))
        let start = ContinuousClock.now
        guard case .unavailable = await client.transaction("2000000000000001") else {
            Issue.record("a 429 is unavailable")
            return
        }
        // The budget is 2 s; an hour's wait (1e30 obeyed, or capped but not checked against the
        // budget) would show. The margin is for a full suite sharing two cores.
        #expect(ContinuousClock.now - start < .seconds(20), "no wait past the budget, however long Retry-After asks")
    }

    @Test func durationsPastInt64MillisecondsSaturate() {
        #expect(Duration.seconds(Int64.max).milliseconds == Int64.max)
        #expect(Duration.seconds(Int64.min).milliseconds == 1)
        #expect(Duration.seconds(2).milliseconds == 2000)
        #expect(Duration.zero.milliseconds == 1)
    }
}
