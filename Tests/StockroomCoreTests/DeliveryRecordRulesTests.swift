import Foundation
import Testing
@testable import StockroomCore

/// The delivery record's rules, where they live: bytes of one version of the content only, an
/// attempt under way until it reports its end.
@Suite struct DeliveryRecordRulesTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    static func row() -> Fulfilment {
        Fulfilment(
            transactionID: "1", originalTransactionID: "1", productID: "p", bundleID: "b", environment: .production, proofKind: .receipt,
            proof: "r", proofDigest: nil, appAccountToken: nil, expiresAt: nil, state: .verified, verifiedAt: now, attempts: 1,
            bytesDelivered: 0, lastError: nil, createdAt: now, updatedAt: now, deliveredAt: nil, acknowledgedAt: nil, revokedAt: nil,
            revokedByOperatorAt: nil, revokedByRefundAt: nil, sentBytes: SentBytes())
    }

    @Test func bytesOfTwoVersionsNeverAddUpToADelivery() {
        var row = Self.row()
        // 80 of version 1's 100 bytes, then the operator publishes a 50-byte version 2.
        EntitlementRules.recordDelivery(
            &row, report: DeliveryReport(range: 0...99, bytesSent: 80, ending: .client, version: "\"v1\""), fileSize: 100, now: Self.now)
        #expect(row.sentBytes?.description == "0-79")
        EntitlementRules.recordDelivery(
            &row, report: DeliveryReport(range: nil, bytesSent: 0, ending: .server, version: "\"v2\""), fileSize: 50, now: Self.now)
        #expect(row.state == .verified, "no byte of version 2 went out")
        #expect(row.sentBytes == SentBytes())
        #expect(row.sentVersion == "\"v2\"")
        EntitlementRules.recordDelivery(
            &row, report: DeliveryReport(range: 0...49, bytesSent: 50, ending: .complete, version: "\"v2\""), fileSize: 50, now: Self.now)
        #expect(row.state == .delivered)
    }

    @Test func anAttemptIsUnderWayFromItsStartToItsEnd() throws {
        var work = PurchaseWork(rows: [Self.row()])
        var row = try #require(work["1"])
        row.lastDeliveryEnding = .client
        work.update(row)
        guard case .entitled(let resumed) = EntitlementRules.resume("1", purchase: &work, now: Self.now) else {
            Issue.record("an entitled row resumes")
            return
        }
        #expect(resumed.lastDeliveryEnding == nil, "started, not ended")
        #expect(resumed.attempts == 2)
        var ended = resumed
        EntitlementRules.recordDelivery(
            &ended, report: DeliveryReport(range: 0...9, bytesSent: 4, ending: .client), fileSize: 10, now: Self.now)
        #expect(ended.lastDeliveryEnding == .client)
        #expect(ended.sentBytes?.description == "0-3")
    }
}
