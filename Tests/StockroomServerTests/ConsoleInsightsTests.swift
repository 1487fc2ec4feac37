import Foundation
import StockroomPostgresTestSupport
import StockroomTestSupport
import Testing
@testable import StockroomCore

/// The ledger reads behind the console (`LedgerViews`), on both engines: hourly attempts,
/// product tallies, a filtered and paged list, and what is on record about one transaction.
@Suite struct ConsoleInsightsTests {
    static let now = Date()

    static func proof(_ id: String, original: String? = nil, product: String = "com.example.book") -> VerifiedProof {
        VerifiedProof(
            transactionID: id, originalTransactionID: original ?? id, productID: product, bundleID: "com.example.app",
            environment: .production, expiresAt: nil, revokedAt: nil, appAccountToken: nil, kind: .receipt, proof: "cmVjZWlwdC0" + id)
    }

    static let download = ProofTerms(requestedProductID: nil, appAccountToken: nil, checksAccount: false, countsAttempt: true)

    @Test(arguments: LedgerEngine.allCases) func attemptsAreCountedPerHourAndProductsTallied(_ engine: LedgerEngine) async throws {
        try await TestLedger.with(engine) { (test: TestLedger) async throws in
            let ledger = test.ledger
            for (id, product) in [("1", "com.example.book"), ("2", "com.example.book"), ("3", "com.example.film")] {
                _ = try await ledger.recordProof(Self.proof(id, product: product), terms: Self.download, now: Self.now)
            }
            try await ledger.recordDelivery(
                "1", report: DeliveryReport(range: 0...99, bytesSent: 100, complete: true), fileSize: 100, now: Date())
            try await ledger.recordDelivery(
                "2", report: DeliveryReport(range: 0...99, bytesSent: 40, complete: false), fileSize: 100, now: Date())
            try await ledger.recordDelivery(
                "3", report: DeliveryReport(range: 0...9, bytesSent: 10, complete: true), fileSize: 10, now: Date())
            let insights = test.ledger

            let hours = try await insights.deliveriesPerHour(since: Date().addingTimeInterval(-24 * 3600))
            #expect(hours.reduce(0) { $0 + $1.complete } == 2)
            #expect(hours.reduce(0) { $0 + $1.interrupted } == 1)
            #expect(hours.reduce(Int64(0)) { $0 + $1.bytes } == 150)
            #expect(
                hours.allSatisfy { $0.hour.timeIntervalSince1970.truncatingRemainder(dividingBy: 3600) == 0 }, "buckets start on the hour")
            #expect(try await insights.deliveriesPerHour(since: Date().addingTimeInterval(3600)).isEmpty, "nothing after now")

            let tallies = try await insights.productTallies(limit: 1)
            #expect(tallies.top == [ProductTally(productID: "com.example.book", fulfilments: 2, bytesDelivered: 140)])
            #expect(tallies.fulfilments == 3 && tallies.bytesDelivered == 150)
        }
    }

    @Test(arguments: LedgerEngine.allCases) func pagesAreFilteredOrderedAndBounded(_ engine: LedgerEngine) async throws {
        try await TestLedger.with(engine) { (test: TestLedger) async throws in
            let ledger = test.ledger
            let day = Date(timeIntervalSince1970: 1_800_000_000)
            for index in 1...5 {
                _ = try await ledger.recordProof(
                    Self.proof("t\(index)", product: index == 5 ? "com.example.film" : "com.example.book"), terms: Self.download,
                    now: day.addingTimeInterval(Double(index) * 3600))
            }
            _ = try await ledger.revoke(
                RevokedPurchase(transactionID: "t2", originalTransactionID: "t2", productID: nil, bundleID: nil, environment: nil),
                cause: .operatorAction, reason: "test", now: day.addingTimeInterval(9 * 3600))
            let insights = test.ledger

            let first = try await insights.fulfilmentPage(FulfilmentPageQuery(page: 1, pageSize: 2))
            #expect(first.total == 5)
            #expect(first.rows.map(\.transactionID) == ["t5", "t4"], "newest first")
            let second = try await insights.fulfilmentPage(FulfilmentPageQuery(page: 2, pageSize: 2))
            #expect(second.rows.map(\.transactionID) == ["t3", "t2"])
            let last = try await insights.fulfilmentPage(FulfilmentPageQuery(page: 3, pageSize: 2))
            #expect(last.rows.map(\.transactionID) == ["t1"])

            #expect(try await insights.fulfilmentPage(FulfilmentPageQuery(state: .revoked)).rows.map(\.transactionID) == ["t2"])
            #expect(
                try await insights.fulfilmentPage(FulfilmentPageQuery(productID: "com.example.film")).rows.map(\.transactionID) == ["t5"])
            let window = FulfilmentPageQuery(from: day.addingTimeInterval(2 * 3600), to: day.addingTimeInterval(4 * 3600))
            #expect(try await insights.fulfilmentPage(window).rows.map(\.transactionID) == ["t3", "t2"], "from is inclusive, to exclusive")

            let hostile = FulfilmentPageQuery(page: Int.max, pageSize: Int.max)
            #expect(hostile.page == FulfilmentPageQuery.maximumPage && hostile.pageSize == FulfilmentPageQuery.maximumPageSize)
            #expect(try await insights.fulfilmentPage(hostile).rows.isEmpty)
        }
    }

    @Test(arguments: LedgerEngine.allCases) func notificationsAndKeptProofsOfATransactionAreFound(_ engine: LedgerEngine) async throws {
        try await TestLedger.with(engine) { (test: TestLedger) async throws in
            let ledger = test.ledger
            _ = try await ledger.recordProof(Self.proof("r1", original: "o1"), terms: Self.download, now: Self.now)
            _ = try await ledger.recordNotification(
                NotificationRecord(uuid: "n1", type: "REFUND", subtype: nil, transactionID: "o1", originalTransactionID: "o1"),
                outcome: "revoked",
                now: Self.now)
            _ = try await ledger.recordNotification(
                NotificationRecord(uuid: "n2", type: "REFUND", subtype: nil, transactionID: "x", originalTransactionID: "x"),
                outcome: "revoked",
                now: Self.now)
            _ = try await ledger.keepPendingProof(
                PendingProofDraft(
                    transactionID: "r1", digest: "d1", kind: .receipt, proof: "p", requestedProductID: "com.example.book",
                    appAccountToken: nil,
                    error: "upstream down"), now: Self.now)
            let insights = test.ledger

            let found = try await insights.notifications(transactionID: "r1", originalTransactionID: "o1", limit: 10)
            #expect(found.map(\.uuid) == ["n1"], "the purchase's notification, not another's")
            #expect(found.first?.type == "REFUND" && found.first?.outcome == "revoked")
            #expect(abs((found.first?.receivedAt.timeIntervalSince1970 ?? 0) - Self.now.timeIntervalSince1970) < 1)
            let kept = try await insights.pendingProofs(keptUnder: "r1", limit: 10)
            #expect(kept.map(\.lastError) == ["upstream down"])
            #expect(try await insights.pendingProofs(keptUnder: "other", limit: 10).isEmpty)
        }
    }
}
