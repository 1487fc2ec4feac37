import Foundation
import StockroomTestSupport
import Testing

@testable import StockroomKit

/// A purchase delivered end to end through the live server and simulator, with each proof kind.
@Suite struct DeliveryTests {
    enum ProofKind: String, CaseIterable, Sendable { case signedTransaction, appReceipt, transactionReceipt }

    @Test(arguments: ProofKind.allCases, TransportTests.engines)
    func eachProofKindIsDeliveredCheckedAcknowledgedAndReportedOnce(_ kind: ProofKind, _ engine: HTTPTransport.Engine) async throws {
        try await KitFixture.run { fixture in
            let purchase: Purchase
            switch kind {
            case .signedTransaction: purchase = try await fixture.control.purchase(KitFixture.book).withSignedTransaction()
            case .appReceipt: purchase = try await fixture.control.purchase(KitFixture.book).withReceipt()
            case .transactionReceipt: purchase = try await fixture.control.transactionPurchase(KitFixture.book).withTransactionReceipt()
            }
            let events = EventLog()
            let delivery = try fixture.delivery(events: events) { $0.transportEngine = engine }
            let reports = Reports()
            reports.listen(delivery)

            let outcome = await delivery.deliver(purchase)
            #expect(outcome == .delivered(file: URL(fileURLWithPath: fixture.file(KitFixture.book))), "\(events.all)")
            #expect(outcome.transactionAction == .finish)
            let intact = fixture.holds(KitFixture.book, KitFixture.bookBytes)
            #expect(intact, "the file is identical")
            #expect(try await fixture.state(purchase.transactionID) == .acknowledged)
            #expect(events.requests == ["POST 200", "ack 200"])
            #expect(fixture.filesOnDisk() == [KitFixture.book], "no partial file is left")

            // Asked again: answered from the journal, with no request and no second report.
            #expect(await delivery.deliver(purchase) == outcome)
            #expect(events.requests == ["POST 200", "ack 200"])
            #expect(await reports.ids() == [purchase.transactionID], "safe to finish is reported exactly once")
        }
    }

    @Test func progressReportsBytesAndTotalUpToTheWholeFile() async throws {
        try await KitFixture.run { fixture in
            let purchase = try await fixture.control.purchase(KitFixture.big).withReceipt()
            let delivery = try fixture.delivery()
            let progress = delivery.progress(of: purchase.transactionID)
            let seen = Task {
                var all: [DeliveryProgress] = []
                for await step in progress { all.append(step) }
                return all
            }
            #expect(await delivery.deliver(purchase).code == "delivered")
            let steps = await seen.value
            #expect(
                steps.last
                    == DeliveryProgress(
                        transactionID: purchase.transactionID, bytes: Int64(KitFixture.bigBytes.count),
                        total: Int64(KitFixture.bigBytes.count)))
            #expect(steps.map(\.bytes) == steps.map(\.bytes).sorted(), "bytes only grow")
        }
    }

    @Test func severalPurchasesAtOnceAreEachDeliveredWithOneStreamPerTransaction() async throws {
        // One stream per purchase on the server: a second one at once would be a 429.
        try await KitFixture.run({ $0.maxDownloadsPerPurchase = 1 }) { fixture in
            var purchases: [Purchase] = []
            for _ in 0..<3 { purchases.append(try await fixture.control.purchase(KitFixture.big).withSignedTransaction()) }
            let events = EventLog()
            let delivery = try fixture.delivery(events: events) {
                $0.destination = { product, transaction in URL(fileURLWithPath: fixture.folder.path + "/files/\(transaction)-\(product)") }
            }
            let outcomes = await withTaskGroup(of: DeliveryOutcome.self) { group in
                for purchase in purchases {
                    group.addTask { await delivery.deliver(purchase) }
                    group.addTask { await delivery.deliver(purchase) }  // the same transaction twice: joined, not a second stream
                }
                return await group.reduce(into: []) { $0.append($1) }
            }
            #expect(outcomes.allSatisfy { $0.code == "delivered" })
            #expect(!events.requests.contains { $0.hasPrefix("POST 429") || $0.hasPrefix("GET 429") })
            #expect(events.requests.filter { $0 == "POST 200" }.count == 3)
            for purchase in purchases {
                #expect(try await fixture.state(purchase.transactionID) == .acknowledged)
                let intact = fixture.holds("\(purchase.transactionID)-\(KitFixture.big)", KitFixture.bigBytes)
                #expect(intact)
            }
        }
    }

    /// A restore that the receipt lists under another transaction ID than StoreKit's: the client
    /// sends the original transaction too, and acknowledges the transaction the server delivered.
    @Test func aRestoreTheReceiptListsUnderAnotherIDIsDeliveredAndAcknowledgedAsTheServerNamesIt() async throws {
        try await KitFixture.run { fixture in
            let bought = try await fixture.control.purchase(KitFixture.book)
            var restored = bought.withReceipt()
            restored.transactionID = "2999000000000001"  // StoreKit's ID for the restore, not the receipt's
            let events = EventLog()
            let delivery = try fixture.delivery(events: events)
            #expect(await delivery.deliver(restored).code == "delivered")
            #expect(fixture.holds(KitFixture.book, KitFixture.bookBytes))
            #expect(try await fixture.state(bought.transactionId) == .acknowledged)
            let acks = events.all.compactMap { event -> String? in
                if case .response(_, "POST", let path, _, let status) = event, path.hasSuffix("/ack") { return "\(path) \(status)" }
                return nil
            }
            #expect(acks == ["/v1/downloads/\(bought.transactionId)/ack 200"])
            #expect(await delivery.journalEntry("2999000000000001")?.serverTransactionID == bought.transactionId)

            var unknown = bought.withReceipt()
            unknown.transactionID = "2999000000000002"
            unknown.originalTransactionID = "2999000000000003"
            #expect(await delivery.deliver(unknown).code == "transaction_not_in_receipt", "another chain's original finds nothing")
        }
    }
}
