import Foundation
import PropertyBased
import Testing

@testable import StockroomCore

/// The entitlement rules as the pure functions they are, over generated histories of one
/// purchase (its original transaction and two restores), with no engine and no network: claims
/// (genuine, of another product, or of a proof Apple says is revoked), revocations by an
/// operator and by a refund, lifting each cause, deliveries and acknowledgements. After each
/// step the purchase's rows are checked against a model of what must hold.
@Suite struct EntitlementRulesPropertyTests {
    static let product = "com.example.level"
    static let original = "1000"
    static let transactions = ["1000", "1001", "1002"]
    static let size: Int64 = 1_000

    /// The purchase as the rules left it, and what the model says must hold.
    struct World {
        var rows: [String: Fulfilment] = [:]
        var revokedByOperator = false
        var revokedByRefund = false
        var clock = Date(timeIntervalSince1970: 1_800_000_000)

        /// Runs one rule over the purchase's rows, as an engine does, and keeps what it wrote.
        mutating func decide<Value>(_ rule: (inout PurchaseWork) throws -> Value) rethrows -> Value {
            clock += 1
            var work = PurchaseWork(rows: Array(rows.values))
            let value = try rule(&work)
            for row in work.writes.insertedRows + work.writes.changedRows { rows[row.transactionID] = row }
            return value
        }
    }

    /// Apple's word on a transaction of the purchase: always this product (a transaction has one).
    static func proof(_ transactionID: String, revoked: Bool = false, at now: Date) -> VerifiedProof {
        VerifiedProof(
            transactionID: transactionID, originalTransactionID: original, productID: product, bundleID: "com.example.app",
            environment: .production, expiresAt: nil, revokedAt: revoked ? now : nil, appAccountToken: nil, kind: .signedTransaction,
            proof: "jws-\(transactionID)-\(revoked)")
    }

    static func step(_ code: Int, _ world: inout World) throws {
        let id = transactions[(code / 10) % transactions.count]
        let now = world.clock + 1
        let terms = ProofTerms(requestedProductID: product, appAccountToken: nil, checksAccount: false, countsAttempt: true)
        switch code % 10 {
        case 0, 1:
            let decision = try world.decide { try EntitlementRules.recordProof(proof(id, at: now), terms: terms, purchase: &$0, now: now) }
            if world.revokedByOperator || world.revokedByRefund {
                #expect(decision == .refused(.revoked(transactionID: id)), "a claim on a revoked purchase is refused")
            } else {
                guard case .entitled(let row) = decision else { Issue.record("a genuine claim was refused: \(decision)"); return }
                #expect(row.productID == product)
            }
        case 2:
            // A request that names another product than Apple sold: never an entitlement to it.
            var other = terms
            other.requestedProductID = "com.example.other"
            let decision = try world.decide { try EntitlementRules.recordProof(proof(id, at: now), terms: other, purchase: &$0, now: now) }
            if case .entitled = decision { Issue.record("a request for another product was entitled under \(id)") }
        case 3:
            // Apple's answer says the transaction is revoked: the whole purchase is, for a refund.
            _ = try world.decide {
                try EntitlementRules.recordProof(proof(id, revoked: true, at: now), terms: terms, purchase: &$0, now: now)
            }
            world.revokedByRefund = true
        case 4:
            let onRecord = !world.rows.isEmpty
            _ = try world.decide {
                try EntitlementRules.revoke(
                    RevokedPurchase(transactionID: id, originalTransactionID: original, productID: nil, bundleID: nil, environment: nil),
                    cause: .operatorAction, reason: "operator", purchase: &$0, now: now)
            }
            // An operator names a transaction on record; with none, there is nothing to revoke.
            if onRecord { world.revokedByOperator = true }
        case 5:
            _ = try world.decide {
                try EntitlementRules.revoke(
                    RevokedPurchase(
                        transactionID: id, originalTransactionID: original, productID: product, bundleID: "com.example.app",
                        environment: .production),
                    cause: .refund, reason: "refund", purchase: &$0, now: now)
            }
            world.revokedByRefund = true
        case 6:
            _ = try world.decide { try EntitlementRules.lift(.operatorAction, reason: "reinstated", purchase: &$0, now: now) }
            world.revokedByOperator = false
        case 7:
            _ = try world.decide { try EntitlementRules.lift(.refund, reason: "refund reversed", purchase: &$0, now: now) }
            world.revokedByRefund = false
        case 8:
            guard var row = world.rows[id] else { return }
            let before = row.state
            world.clock += 1
            EntitlementRules.recordDelivery(
                &row, report: DeliveryReport(range: 0...(size - 1), bytesSent: size, complete: true), fileSize: size, now: now)
            world.rows[id] = row
            #expect(before != .verified || row.state == .delivered, "a whole copy of an entitled file is a delivery")
            #expect(before == .verified || row.state == before, "only an entitlement becomes delivered")
        default:
            guard world.rows[id] != nil else { return }
            let before = world.rows[id]?.state
            let decision = try world.decide { try EntitlementRules.acknowledge(id, purchase: &$0, now: now) }
            if case .entitled = decision {
                #expect(
                    before == .delivered || before == .acknowledged,
                    "acknowledged only once a whole copy went out (was \(String(describing: before)))")
            }
        }
    }

    /// What holds after every step: every row is of the product Apple sold; the revocation causes
    /// on record are the model's, the same on every row of the purchase; a row is revoked exactly
    /// when a cause stands; and every state is one the state machine allows.
    static func check(_ world: World) {
        for row in world.rows.values {
            #expect(row.productID == product, "no row is of a product Apple did not sell")
            #expect(row.originalTransactionID == original)
            #expect((row.revokedByOperatorAt != nil) == world.revokedByOperator, "the operator's cause on \(row.transactionID)")
            #expect((row.revokedByRefundAt != nil) == world.revokedByRefund, "the refund's cause on \(row.transactionID)")
            #expect((row.state == .revoked) == (world.revokedByOperator || world.revokedByRefund), "\(row.transactionID) is \(row.state)")
            #expect(row.state != .pending && row.state != .rejected, "these rules never make a pending or rejected row")
        }
    }

    /// The history the property found: an operator revokes the purchase; a restore is then first
    /// seen in a proof Apple says is refunded; the refund is reversed. The restore's row carried
    /// the refund alone, so the reversal gave it back while the operator's revocation stood.
    @Test func aRefundReversedNeverLiftsAnOperatorsRevocationOfARestoreFirstSeenRefunded() throws {
        var world = World()
        let terms = ProofTerms(requestedProductID: Self.product, appAccountToken: nil, checksAccount: false, countsAttempt: true)
        let now = world.clock
        _ = try world.decide { try EntitlementRules.recordProof(Self.proof("1000", at: now), terms: terms, purchase: &$0, now: now) }
        _ = try world.decide {
            try EntitlementRules.revoke(
                RevokedPurchase(
                    transactionID: "1000", originalTransactionID: Self.original, productID: nil, bundleID: nil, environment: nil),
                cause: .operatorAction, reason: "chargeback", purchase: &$0, now: now)
        }
        _ = try world.decide {
            try EntitlementRules.recordProof(Self.proof("1001", revoked: true, at: now), terms: terms, purchase: &$0, now: now)
        }
        #expect(world.rows["1001"]?.revokedByOperatorAt != nil, "the restore carries the operator's standing revocation")
        _ = try world.decide { try EntitlementRules.lift(.refund, reason: "refund reversed", purchase: &$0, now: now) }
        #expect(world.rows.values.allSatisfy { $0.state == .revoked }, "the operator's revocation still stands on every row")
    }

    @Test func noHistoryOfOnePurchaseBreaksTheRules() async {
        await propertyCheck(count: 2_000, input: Gen.int(in: 0...99_999).array(of: 1...40)) { steps in
            // A turn for the suite's other tasks between histories: they share two threads.
            await Task.yield()
            var world = World()
            for code in steps {
                try Self.step(code, &world)
                Self.check(world)
            }
        }
    }
}
