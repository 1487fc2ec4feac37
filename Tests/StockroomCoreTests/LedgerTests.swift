import Foundation
import GRDB
import StockroomTestSupport
import Testing
@testable import StockroomCore

/// The SQLite ledger on a real file: the state machine, the schema's guards, revocation.
@Suite struct LedgerTests {
    static func record(_ id: String, original: String? = nil, proof: String = "cmVjZWlwdA==") -> VerifiedRecord {
        VerifiedRecord(
            transactionID: id, originalTransactionID: original ?? id, productID: "com.example.book", bundleID: "com.example.app",
            environment: .production, proofKind: .receipt, proof: proof)
    }

    static func ledger(_ folder: TemporaryFolder) throws -> SQLiteLedger {
        SQLiteLedger(database: try AppDatabase(path: folder.path + "/ledger.sqlite"))
    }

    @Test func theHappyPathMovesThroughEveryState() async throws {
        let folder = try TemporaryFolder()
        let ledger = try Self.ledger(folder)
        _ = try await ledger.recordPending(Self.record("1"), error: "upstream down")
        #expect(try await ledger.fulfilment("1")?.state == .pending)
        _ = try await ledger.recordVerified(Self.record("1"), countAttempt: true)
        try await ledger.recordDelivery("1", report: DeliveryReport(range: 0...99, bytesSent: 100, complete: true), fileSize: 100)
        let acknowledged = try await ledger.transition("1", to: .acknowledged, error: nil)
        #expect(acknowledged.state == .acknowledged)
        #expect(acknowledged.attempts == 2)
        #expect(acknowledged.deliveredAt != nil && acknowledged.acknowledgedAt != nil)
    }

    @Test(arguments: [
        (FulfilmentState.verified, FulfilmentState.acknowledged), (.verified, .pending), (.delivered, .verified),
        (.delivered, .rejected), (.acknowledged, .delivered), (.rejected, .delivered), (.revoked, .delivered),
    ])
    func illegalTransitionsAreRefusedAndChangeNothing(from: FulfilmentState, to: FulfilmentState) async throws {
        let folder = try TemporaryFolder()
        let ledger = try Self.ledger(folder)
        _ = try await ledger.recordVerified(Self.record("1"), countAttempt: true)
        try await ledger.database.writer.write { db in
            try db.execute(sql: "UPDATE fulfilments SET state = ? WHERE transaction_id = '1'", arguments: [from.rawValue])
        }
        let before = try await ledger.fulfilment("1")
        await #expect(throws: LedgerError.illegalTransition(transactionID: "1", from: from, to: to)) {
            _ = try await ledger.transition("1", to: to, error: nil)
        }
        #expect(try await ledger.fulfilment("1") == before)
    }

    @Test func theSchemaRefusesUnknownStatesAndMissingFields() async throws {
        let folder = try TemporaryFolder()
        let ledger = try Self.ledger(folder)
        _ = try await ledger.recordVerified(Self.record("1"), countAttempt: true)
        await #expect(throws: DatabaseError.self) {
            try await ledger.database.writer.write { db in
                try db.execute(sql: "UPDATE fulfilments SET state = 'shipped' WHERE transaction_id = '1'")
            }
        }
        await #expect(throws: DatabaseError.self) {
            try await ledger.database.writer.write { db in
                try db.execute(sql: "INSERT INTO fulfilments (transaction_id, state) VALUES ('2', 'verified')")
            }
        }
        let integrity = try await ledger.database.writer.read { db in try String.fetchOne(db, sql: "PRAGMA integrity_check") }
        #expect(integrity == "ok")
    }

    @Test func revokingAPurchaseRevokesItsRestores() async throws {
        let folder = try TemporaryFolder()
        let ledger = try Self.ledger(folder)
        _ = try await ledger.recordVerified(Self.record("1"), countAttempt: true)
        _ = try await ledger.recordVerified(Self.record("2", original: "1"), countAttempt: true)
        _ = try await ledger.recordVerified(Self.record("3"), countAttempt: true)
        let changed = try await ledger.revokePurchase(originalTransactionID: "1", reason: "refund")
        #expect(Set(changed.map(\.transactionID)) == ["1", "2"])
        #expect(try await ledger.isRevoked(originalTransactionID: "1"))
        #expect(try await !ledger.isRevoked(originalTransactionID: "3"))
        #expect(try await ledger.revokePurchase(originalTransactionID: "1", reason: "again").isEmpty)
    }

    @Test func aPendingTransactionKeepsItsFirstProof() async throws {
        let folder = try TemporaryFolder()
        let ledger = try Self.ledger(folder)
        _ = try await ledger.recordPending(Self.record("1", proof: "Zmlyc3Q="), error: "down")
        let again = try await ledger.recordPending(Self.record("1", proof: "c2Vjb25k"), error: "still down")
        #expect(again.proof == "Zmlyc3Q=")
        #expect(again.attempts == 2)
        #expect(again.lastError == "still down")
    }

    @Test func anInterruptedOrPartialBodyDoesNotDeliver() async throws {
        let folder = try TemporaryFolder()
        let ledger = try Self.ledger(folder)
        _ = try await ledger.recordVerified(Self.record("1"), countAttempt: true)
        try await ledger.recordDelivery("1", report: DeliveryReport(range: 0...99, bytesSent: 40, complete: false), fileSize: 100)
        try await ledger.recordDelivery("1", report: DeliveryReport(range: 0...49, bytesSent: 50, complete: true), fileSize: 100)
        #expect(try await ledger.fulfilment("1")?.state == .verified)
        try await ledger.recordDelivery("1", report: DeliveryReport(range: 50...99, bytesSent: 50, complete: true), fileSize: 100)
        let row = try await ledger.fulfilment("1")
        #expect(row?.state == .delivered)
        #expect(row?.bytesDelivered == 140)
    }
}
