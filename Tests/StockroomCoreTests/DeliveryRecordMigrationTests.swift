import Foundation
import GRDB
@testable import StockroomSQLite
import StockroomTestSupport
import Testing
@testable import StockroomCore

/// Schema v12 keeps which bytes went out: a ledger written before it keeps its rows, and what it
/// did not record is not made up. A row never asked for sent nothing; any other row's bytes are
/// unknown, and a consumption answer says nothing for it.
@Suite struct DeliveryRecordMigrationTests {
    static let now = LedgerTests.now

    @Test func aLedgerFromBeforeV12KeepsItsRowsAndClaimsNothingItDidNotRecord() async throws {
        let folder = try TemporaryFolder()
        let path = folder.path + "/v11.sqlite"
        let queue = try DatabaseQueue(path: path)
        try SQLiteDatabase.migrator.migrate(queue, upTo: "v11: the event log's IDs without SQLite's AUTOINCREMENT counter")
        try await queue.write { db in
            for (id, attempts, bytes, delivered) in [("never", 0, 0, false), ("partly", 2, 5000, false), ("whole", 1, 20_000, true)] {
                try db.execute(
                    sql: """
                        INSERT INTO fulfilments (transaction_id, original_transaction_id, product_id, bundle_id, environment,
                          proof_kind, proof, state, verified_at, attempts, bytes_delivered, created_at, updated_at, delivered_at,
                          customer_consented)
                        VALUES (?, ?, 'com.example.book', 'com.example.app', 'Production', 'receipt', 'r', ?, ?, ?, ?, ?, ?, ?, 1)
                        """,
                    arguments: [
                        id, id, delivered ? "delivered" : "verified", Self.now, attempts, bytes, Self.now, Self.now,
                        delivered ? Self.now : nil,
                    ])
            }
        }
        try queue.close()
        let ledger = SQLiteLedger(database: try SQLiteDatabase(path: path))
        let never = try #require(try await ledger.fulfilment("never"))
        let partly = try #require(try await ledger.fulfilment("partly"))
        let whole = try #require(try await ledger.fulfilment("whole"))
        #expect(never.sentBytes == SentBytes(), "never asked for: nothing went out")
        #expect(partly.sentBytes == nil, "its bytes were not kept")
        #expect(whole.state == .delivered && whole.deliveredAt != nil)

        func answer(_ row: Fulfilment) -> ConsumptionAnswer {
            ConsumptionAnswer.build(row: row, pendingProof: false, product: nil, refundPreference: nil)
        }
        guard case .send(let nothing) = answer(never), case .send(let delivered) = answer(whole),
            case .withhold(let reason) = answer(partly)
        else {
            Issue.record("never: \(answer(never)); whole: \(answer(whole)); partly: \(answer(partly))")
            return
        }
        #expect(nothing.deliveryStatus == .undeliveredOther)
        #expect(delivered.deliveryStatus == .delivered)
        #expect(reason.contains("schema v12"))

        // The old row's tail alone does not deliver it: its earlier bytes are not known.
        try await ledger.recordDelivery(
            "partly", report: DeliveryReport(range: 5000...19_999, bytesSent: 15_000, complete: true), fileSize: 20_000, now: Self.now)
        let resumed = try #require(try await ledger.fulfilment("partly"))
        #expect(resumed.state == .verified)
        #expect(resumed.sentBytes?.description == "5000-19999")
        #expect(resumed.lastDeliveryEnding == .complete)
    }
}
