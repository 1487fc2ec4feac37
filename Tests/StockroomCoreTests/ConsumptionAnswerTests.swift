import Foundation
import StockroomCore
import Testing

/// The consumption answer as a rule, where it lives: what the ledger knows of a transaction's
/// delivery decides the status Apple is told, the percentage, whether there is consent, and
/// whether anything is said at all.
@Suite struct ConsumptionAnswerTests {
    static let at = Date(timeIntervalSince1970: 1_800_000_000)

    static func row(
        state: FulfilmentState, attempts: Int = 1, delivered: Bool = false, consented: Bool? = true, sent: [ClosedRange<Int64>]? = [],
        ending: DeliveryEnding? = nil, handedOff: Bool = false
    ) -> Fulfilment {
        var bytes = sent.map { SentBytes(ranges: $0) }
        if sent == nil { bytes = nil }
        return Fulfilment(
            transactionID: "1", originalTransactionID: "1", productID: "com.example.level", bundleID: "com.example.app",
            environment: .production,
            proofKind: .signedTransaction, proof: "a.b.c", proofDigest: nil, appAccountToken: nil, expiresAt: nil, state: state,
            verifiedAt: at, attempts: attempts, bytesDelivered: bytes?.count ?? (attempts > 0 ? 5 : 0), lastError: nil, createdAt: at,
            updatedAt: at, deliveredAt: delivered ? at : nil, acknowledgedAt: nil, revokedAt: nil, revokedByOperatorAt: nil,
            revokedByRefundAt: nil, customerConsented: consented, sentBytes: bytes, lastDeliveryEnding: ending,
            handedOffAt: handedOff ? at : nil)
    }

    static func product(_ type: ProductType) -> Product {
        Product(
            productId: "com.example.level", title: "Level", type: type, contentVersion: "1", contentType: "application/octet-stream",
            size: 10,
            sha256: String(repeating: "0", count: 64), file: "level.pak")
    }

    static func answer(_ row: Fulfilment?, pending: Bool = false, _ type: ProductType = .consumable) -> ConsumptionAnswer {
        ConsumptionAnswer.build(row: row, pendingProof: pending, product: product(type), refundPreference: nil)
    }

    static func status(_ row: Fulfilment?, pending: Bool = false) -> ConsumptionInformation.DeliveryStatus? {
        guard case .send(let information) = answer(row, pending: pending) else { return nil }
        return information.deliveryStatus
    }

    static func withheld(_ row: Fulfilment?) -> String? {
        guard case .withhold(let reason) = answer(row) else { return nil }
        return reason
    }

    @Test func eachStatusIsSaidOnlyWhenTheRecordSupportsIt() {
        #expect(Self.status(Self.row(state: .acknowledged, delivered: true)) == .delivered)
        #expect(Self.status(Self.row(state: .revoked, delivered: true)) == .delivered, "a copy went out before the revocation")
        #expect(Self.status(nil, pending: true) == .undeliveredServerOutage, "a proof kept while the App Store could not be asked")
        #expect(
            Self.status(Self.row(state: .verified, attempts: 2, sent: [0...3], ending: .server)) == .undeliveredServerOutage,
            "the last attempt ended by Stockroom's own failure")
        #expect(Self.status(Self.row(state: .verified, attempts: 0, sent: [])) == .undeliveredOther, "never asked for")
        #expect(Self.status(Self.row(state: .verified, attempts: 3, sent: [], ending: .client)) == .undeliveredOther, "no byte went out")
        #expect(Self.status(nil) == .undeliveredOther)
    }

    @Test func whatTheLedgerCannotTellIsNotSaid() throws {
        // All but the last byte, the client ending every attempt: the buyer may hold the file.
        let most = try #require(Self.withheld(Self.row(state: .verified, attempts: 2, sent: [0...8], ending: .complete)))
        #expect(most.contains("9 of 10 bytes went out (0-8)"))
        #expect(Self.withheld(Self.row(state: .verified, attempts: 1, sent: [0...2], ending: .client)) != nil)
        // A presigned URL: the store sent the bytes, and the app never acknowledged.
        let handedOff = try #require(Self.withheld(Self.row(state: .verified, attempts: 1, sent: [], handedOff: true)))
        #expect(handedOff.contains("presigned URL"))
        // A failure of ours after a presigned URL was handed out: the store may have sent it all.
        #expect(Self.withheld(Self.row(state: .verified, sent: [], ending: .server, handedOff: true)) != nil)
        // A proof kept during an App Store outage is anyone's claim: it does not make an
        // entitled purchase with bytes out an outage of ours.
        guard case .withhold = Self.answer(Self.row(state: .verified, attempts: 1, sent: [0...3], ending: .client), pending: true) else {
            Issue.record("a stranger's pending proof decided the answer")
            return
        }
        // Downloaded before the ledger kept its bytes.
        let legacy = try #require(Self.withheld(Self.row(state: .verified, attempts: 2, sent: nil)))
        #expect(legacy.contains("schema v12"))
        #expect(Self.status(Self.row(state: .verified, attempts: 0, sent: nil)) == .undeliveredOther, "an old row never asked for")
    }

    @Test func aDownloadUnderWayIsWaitedFor() {
        guard case .notYet(let reason) = Self.answer(Self.row(state: .verified, attempts: 1, sent: [], ending: nil)) else {
            Issue.record("an attempt that has not ended was answered")
            return
        }
        #expect(reason.contains("has not reported its end"))
        #expect(Self.status(Self.row(state: .verified, attempts: 1, sent: [], ending: .client)) == .undeliveredOther, "once it ended")
    }

    @Test func thePercentageIsZeroOnlyWhenNothingWentOutAndNeverForSubscriptions() {
        let undelivered = Self.row(state: .verified, attempts: 0)
        let delivered = Self.row(state: .delivered, delivered: true)
        func percentage(_ row: Fulfilment, _ type: ProductType) -> Int?? {
            guard case .send(let information) = Self.answer(row, type) else { return .none }
            return .some(information.consumptionPercentage)
        }
        #expect(percentage(undelivered, .consumable) == .some(0))
        #expect(percentage(delivered, .consumable) == .some(nil), "not known, so left out")
        #expect(percentage(undelivered, .autoRenewable) == .some(nil))
    }

    @Test func consentIsWhatTheLedgerRecordedAndTheRefundPreferencePassesThrough() {
        for (recorded, expected) in [(Bool?.some(true), true), (false, false), (nil, false)] {
            let answer = ConsumptionAnswer.build(
                row: Self.row(state: .verified, attempts: 0, consented: recorded), pendingProof: false, product: Self.product(.consumable),
                refundPreference: .grantProrated)
            guard case .send(let information) = answer else {
                Issue.record("nothing went out: an answer is due")
                continue
            }
            #expect(information.customerConsented == expected)
            #expect(information.refundPreference == .grantProrated)
        }
        guard case .send(let information) = ConsumptionAnswer.build(row: nil, pendingProof: true, product: nil, refundPreference: nil)
        else {
            Issue.record("a pending proof is an outage of ours")
            return
        }
        #expect(!information.customerConsented, "no row, no consent")
    }
}

@Suite struct SentBytesTests {
    @Test func rangesMergeAndCoverTheFileOnlyWhenEveryByteWentOut() {
        var sent = SentBytes()
        sent.add(0...8)
        #expect(!sent.covers(size: 10), "all but the last byte")
        sent.add(9...9)
        #expect(sent.covers(size: 10))
        #expect(sent.description == "0-9")

        var cut = SentBytes()
        cut.add(0...99)
        cut.add(299...299)
        #expect(!cut.covers(size: 300), "a cut download and its last byte")
        #expect(cut.description == "0-99,299-299")
        cut.add(100...298)
        #expect(cut.description == "0-299")
        #expect(cut.count == 300)
    }

    @Test func itStaysBoundedAndForgetsOnlyWhatMakesItClaimLess() {
        var sent = SentBytes()
        for start in stride(from: Int64(0), to: 10_000, by: 10) {
            sent.add(start...(start + (start == 5000 ? 8 : 4)))
        }
        #expect(sent.ranges.count == SentBytes.limit)
        #expect(sent.ranges.contains(5000...5008), "the largest is kept")
        #expect(sent.count <= 1000 * 5 + 4, "never more than went out")
        #expect(!sent.covers(size: 10_000))
    }

    @Test func itsTextRoundTripsAndRefusesAnythingElse() {
        var sent = SentBytes()
        sent.add(5...9)
        sent.add(20...30)
        #expect(SentBytes(text: sent.description) == sent)
        #expect(SentBytes(text: "0-9223372036854775807")?.count == .max, "saturates, never traps")
        #expect(SentBytes(text: "") == SentBytes())
        for bad in [
            "5-", "-5", "9-5", "0-5,3-8", "0-5,6-8", "10-20,0-5", "a-b", "0-5,", "+1-2", String(repeating: "1-1,", count: 40) + "99-99",
        ] {
            #expect(SentBytes(text: bad) == nil, "\(bad)")
        }
    }
}

extension SentBytes {
    /// The bytes of `ranges`, added in turn.
    init(ranges: [ClosedRange<Int64>]) {
        self.init()
        for range in ranges { add(range) }
    }
}
