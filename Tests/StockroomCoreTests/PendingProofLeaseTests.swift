import Foundation
import StockroomPostgresTestSupport
import StockroomTestSupport
import Testing
@testable import StockroomCore

/// Pending proofs are leased to one re-verification at a time: runs at the same time take
/// disjoint proofs, a lease ends when the proof is rejected, noted or its time runs out, and a
/// rejected proof is never leased again. On both engines: PostgreSQL is where several machines
/// share the proofs.
@Suite struct PendingProofLeaseTests {
    static let now = LedgerTests.now

    static func keep(_ ledger: any Ledger, count: Int) async throws {
        for index in 0..<count {
            let draft = PendingProofDraft(
                transactionID: "tx\(index)", digest: VerifiedProof.digest(of: "proof\(index)"), kind: .receipt, proof: "proof\(index)",
                requestedProductID: "com.example.book", appAccountToken: nil, error: "HTTP 503")
            #expect(try await ledger.keepPendingProof(draft, now: now))
        }
    }

    @Test(arguments: LedgerEngine.allCases) func concurrentLeasesTakeDisjointProofsAndTogetherAll(_ engine: LedgerEngine) async throws {
        try await TestLedger.with(engine) { (test: TestLedger) async throws in
            let ledger = test.ledger
            try await Self.keep(ledger, count: 40)
            let until = Self.now.addingTimeInterval(600)
            let leases = try await withThrowingTaskGroup(of: [Int64].self) { group in
                for _ in 0..<8 {
                    group.addTask { try await ledger.leasePendingProofs(limit: 7, until: until, now: Self.now).compactMap(\.id) }
                }
                return try await group.reduce(into: [[Int64]]()) { $0.append($1) }
            }
            let taken = leases.flatMap { $0 }
            #expect(taken.count == 40 && Set(taken).count == 40)
            #expect(try await ledger.leasePendingProofs(limit: 100, until: until, now: Self.now).isEmpty)
        }
    }

    @Test(arguments: LedgerEngine.allCases) func aLeaseEndsWhenTheProofIsNotedOrRejectedOrItsTimeRunsOut(_ engine: LedgerEngine)
        async throws
    {
        try await TestLedger.with(engine) { (test: TestLedger) async throws in
            let ledger = test.ledger
            try await Self.keep(ledger, count: 3)
            let held = try await ledger.leasePendingProofs(limit: 3, until: Self.now.addingTimeInterval(600), now: Self.now)
            let ids = held.compactMap(\.id)
            #expect(ids.count == 3)
            try await ledger.notePendingProof(id: ids[0], error: "HTTP 503 again", now: Self.now)
            try await ledger.rejectPendingProof(id: ids[1], reason: "21003", now: Self.now)
            // The noted one is free again; the rejected one never; the third is held until its time.
            #expect(
                try await ledger.leasePendingProofs(limit: 3, until: Self.now.addingTimeInterval(600), now: Self.now).compactMap(\.id) == [
                    ids[0]
                ])
            let later = Self.now.addingTimeInterval(601)
            #expect(
                try await ledger.leasePendingProofs(limit: 3, until: later.addingTimeInterval(600), now: later).compactMap(\.id) == [
                    ids[0], ids[2],
                ])
            #expect(try await ledger.pendingProofs(status: .rejected, limit: 10).compactMap(\.id) == [ids[1]])
        }
    }
}
