import Foundation
import StockroomKit
import StockroomTestSupport
import Testing

/// Restores: from StoreKit's restored transactions, and through `POST /v1/restores`.
@Suite struct RestoreTests {
    @Test func aRestoreIntoAnEmptyFolderBringsBackEveryPurchaseAndDownloadsNothingTwice() async throws {
        try await KitFixture.run { fixture in
            let book = try await fixture.control.purchase(["productId": KitFixture.book, "deviceId": "device-a"])
            let big = try await fixture.control.purchase(["productId": KitFixture.big, "deviceId": "device-a"])
            _ = try await fixture.control.purchase(["productId": KitFixture.big, "deviceId": "device-b"])  // another customer's
            let events = EventLog()
            let delivery = try fixture.delivery(events: events)

            let answer = await delivery.restore(signedTransaction: book.signedTransaction)
            guard case .success(let restored) = answer else { Issue.record("\(answer)"); return }
            #expect(restored.map(\.productID) == [KitFixture.big, KitFixture.book])
            #expect(restored.map(\.transactionID) == [big.transactionId, book.transactionId])
            #expect(restored.allSatisfy { $0.downloaded && $0.outcome.code == "delivered" })
            let intact = fixture.holds(KitFixture.book, KitFixture.bookBytes)
            #expect(intact)
            let intactBig = fixture.holds(KitFixture.big, KitFixture.bigBytes)
            #expect(intactBig)
            #expect(try await fixture.state(book.transactionId) == .acknowledged)
            #expect(try await fixture.state(big.transactionId) == .acknowledged)

            // Again, with both files intact: nothing is downloaded.
            let downloads = events.requests.filter { $0.hasPrefix("GET") }.count
            let second = await delivery.restore(signedTransaction: book.signedTransaction)
            guard case .success(let again) = second else { Issue.record("\(second)"); return }
            #expect(again.allSatisfy { !$0.downloaded && $0.outcome.code == "delivered" })
            #expect(events.requests.filter { $0.hasPrefix("GET") }.count == downloads)
        }
    }

    @Test func aFileAlreadyOnDiskIntactIsNotDownloadedAgainEvenWithoutAJournal() async throws {
        try await KitFixture.run { fixture in
            let book = try await fixture.control.purchase(["productId": KitFixture.book, "deviceId": "device-a"])
            _ = try await fixture.control.purchase(["productId": KitFixture.big, "deviceId": "device-a"])
            // The book is on disk already (a backup restored it), the journal is empty.
            try fixture.folder.write("files/\(KitFixture.book)", KitFixture.bookBytes)
            let events = EventLog()
            let delivery = try fixture.delivery(events: events)
            let answer = await delivery.restore(signedTransaction: book.signedTransaction)
            guard case .success(let restored) = answer else { Issue.record("\(answer)"); return }
            #expect(restored.map(\.downloaded) == [true, false], "big downloaded, book left as it was")
            #expect(restored.allSatisfy { $0.outcome.code == "delivered" })
            // The book was never acknowledged: it is, before it counts as delivered. The server
            // records a delivery only once every byte went out, and it sent none of this copy:
            // the app asks which bytes it has on record, then fetches the rest (here, all) again,
            // dropping them. A resume that only reaches the end no longer counts.
            #expect(
                events.requests.filter { $0.hasPrefix("GET") }.sorted() == ["GET 200", "GET 200", "GET 206 from 0"], "\(events.requests)")
            #expect(try await fixture.state(book.transactionId) == .acknowledged)
            let intact = fixture.holds(KitFixture.big, KitFixture.bigBytes) && fixture.holds(KitFixture.book, KitFixture.bookBytes)
            #expect(intact)
        }
    }

    @Test func restoredTransactionsAreDeliveredOnlyWhenTheirFileIsNotOnDisk() async throws {
        try await KitFixture.run { fixture in
            let book = try await fixture.control.purchase(KitFixture.book).withSignedTransaction()
            let big = try await fixture.control.purchase(KitFixture.big).withSignedTransaction()
            let events = EventLog()
            let delivery = try fixture.delivery(events: events)
            #expect(await delivery.deliver(book).code == "delivered")
            let before = events.requests.count

            let restored = await delivery.deliverMissing([book, big])
            #expect(restored.map(\.downloaded) == [true, false], "big delivered, book already there")
            #expect(restored.allSatisfy { $0.outcome.code == "delivered" })
            #expect(events.requests.dropFirst(before).filter { $0.hasPrefix("POST") } == ["POST 200"])
            let intact = fixture.holds(KitFixture.big, KitFixture.bigBytes)
            #expect(intact)
        }
    }

    @Test func anExpiredRestoreTokenIsRenewedByAnotherRestore() async throws {
        try await KitFixture.run({ $0.tokenLifetime = .seconds(3) }) { fixture in
            let book = try await fixture.control.purchase(["productId": KitFixture.big, "deviceId": "device-a"])
            // Whichever connection carries the body is cut 1 MiB in (keep-alive may reuse the first).
            fixture.proxy.inject(Array(repeating: .cutAfterThenRefuse(1 << 20), count: 3))
            let clock = TestClock()
            let first = try fixture.delivery(now: clock.now, maximumInterruptions: 0)
            let answer = await first.restore(signedTransaction: book.signedTransaction)
            guard case .success(let interrupted) = answer else { Issue.record("\(answer)"); return }
            #expect(interrupted.first?.outcome.transactionAction == .keepUnfinishedAndRetry)
            try await Task.sleep(for: .milliseconds(3200))
            fixture.proxy.inject([])  // the faults left unused
            fixture.proxy.refuse(false)
            clock.advance(3600)
            let events = EventLog()
            let second = try fixture.delivery(now: clock.now, events: events)
            // The journal's restore proof renews the token; the partial file is resumed.
            let outcome = await second.deliver(
                Purchase(productID: KitFixture.big, transactionID: book.transactionId, proof: .signedTransaction(book.signedTransaction)))
            #expect(outcome.code == "delivered", "\(outcome) \(events.requests)")
            let intact = fixture.holds(KitFixture.big, KitFixture.bigBytes)
            #expect(intact)
            #expect(events.requests.first?.hasPrefix("GET 401") == true, "\(events.requests)")
        }
    }
}
