import Foundation
import StockroomCore
import Testing

/// The consumption answer as a rule, where it lives: what the ledger knows of a transaction
/// decides the delivery status Apple is told, the percentage, and whether there is consent.
@Suite struct ConsumptionAnswerTests {
    static let at = Date(timeIntervalSince1970: 1_800_000_000)

    static func row(state: FulfilmentState, attempts: Int = 1, delivered: Bool = false, consented: Bool? = true) -> Fulfilment {
        Fulfilment(
            transactionID: "1", originalTransactionID: "1", productID: "com.example.level", bundleID: "com.example.app",
            environment: .production,
            proofKind: .signedTransaction, proof: "a.b.c", proofDigest: nil, appAccountToken: nil, expiresAt: nil, state: state,
            verifiedAt: at,
            attempts: attempts, bytesDelivered: 0, lastError: nil, createdAt: at, updatedAt: at, deliveredAt: delivered ? at : nil,
            acknowledgedAt: nil, revokedAt: nil, revokedByOperatorAt: nil, revokedByRefundAt: nil, customerConsented: consented)
    }

    static func product(_ type: ProductType) -> Product {
        Product(
            productId: "com.example.level", title: "Level", type: type, contentVersion: "1", contentType: "application/octet-stream",
            size: 10,
            sha256: String(repeating: "0", count: 64), file: "level.pak")
    }

    static func status(_ row: Fulfilment?, pending: Bool = false, handedOff: Bool = false) -> ConsumptionInformation.DeliveryStatus {
        ConsumptionAnswer.build(
            row: row, pendingProof: pending, product: product(.consumable), refundPreference: nil, contentHandedOff: handedOff
        )
        .deliveryStatus
    }

    @Test func theDeliveryStatusFollowsWhatTheLedgerKnows() {
        #expect(Self.status(Self.row(state: .acknowledged, delivered: true)) == .delivered)
        #expect(Self.status(Self.row(state: .revoked, delivered: true)) == .delivered, "a copy went out before the revocation")
        #expect(Self.status(nil, pending: true) == .undeliveredServerOutage, "a proof kept while the App Store could not be asked")
        #expect(Self.status(Self.row(state: .verified, attempts: 2)) == .undeliveredServerOutage, "downloads started and never completed")
        #expect(
            Self.status(Self.row(state: .verified, attempts: 2), handedOff: true) == .undeliveredOther,
            "the store sent the bytes: no outage claimed")
        #expect(Self.status(Self.row(state: .verified, attempts: 0)) == .undeliveredOther)
        #expect(Self.status(nil) == .undeliveredOther)
    }

    @Test func thePercentageIsZeroOnlyWhenNothingWentOutAndNeverForSubscriptions() {
        let undelivered = Self.row(state: .verified, attempts: 0)
        let delivered = Self.row(state: .delivered, delivered: true)
        func percentage(_ row: Fulfilment, _ type: ProductType) -> Int? {
            ConsumptionAnswer.build(row: row, pendingProof: false, product: Self.product(type), refundPreference: .decline)
                .consumptionPercentage
        }
        #expect(percentage(undelivered, .consumable) == 0)
        #expect(percentage(delivered, .consumable) == nil, "not known, so left out")
        #expect(percentage(undelivered, .autoRenewable) == nil)
    }

    @Test func consentIsWhatTheLedgerRecordedAndTheRefundPreferencePassesThrough() {
        for (recorded, expected) in [(Bool?.some(true), true), (false, false), (nil, false)] {
            let answer = ConsumptionAnswer.build(
                row: Self.row(state: .verified, consented: recorded), pendingProof: false, product: Self.product(.consumable),
                refundPreference: .grantProrated)
            #expect(answer.customerConsented == expected)
            #expect(answer.refundPreference == .grantProrated)
        }
        #expect(
            !ConsumptionAnswer.build(row: nil, pendingProof: true, product: nil, refundPreference: nil).customerConsented,
            "no row, no consent")
    }
}
