import Foundation
import StockroomPostgres
import StockroomPostgresTestSupport
import Testing
@testable import StockroomCore

/// `stockroom ledger export | import | check` on PostgreSQL: every row out and back in, the
/// same bytes; an import only into an empty ledger; a broken invariant named.
@Suite struct LedgerArchiveTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000.123)

    /// A row of each kind: an entitled, delivered purchase with its attempt, a revoked purchase
    /// (never seen before its refund), a pending proof, a notification.
    static func populate(_ ledger: any Ledger) async throws {
        let proof = VerifiedProof(
            transactionID: "1", originalTransactionID: "1", productID: "com.example.book", bundleID: "com.example.app",
            environment: .production,
            expiresAt: nil, revokedAt: nil, appAccountToken: nil, kind: .receipt, proof: "cmVjZWlwdA==")
        _ = try await ledger.recordProof(proof, terms: .reverification, now: now)
        try await ledger.recordDelivery("1", report: DeliveryReport(range: 0...9, bytesSent: 10, complete: true), fileSize: 10, now: Date())
        let refunded = RevokedPurchase(
            transactionID: "7", originalTransactionID: "7", productID: "com.example.book", bundleID: "b", environment: .sandbox)
        _ = try await ledger.revoke(refunded, cause: .refund, reason: "refund", now: now)
        let draft = PendingProofDraft(
            transactionID: "9", digest: VerifiedProof.digest(of: "p"), kind: .receipt, proof: "p", requestedProductID: "com.example.book",
            appAccountToken: nil, error: "down")
        #expect(try await ledger.keepPendingProof(draft, now: now))
        let notification = NotificationRecord(
            uuid: "n-1", type: "REFUND", subtype: nil, transactionID: "7", originalTransactionID: "7", signedPayload: "a.b.c",
            source: "push")
        #expect(try await ledger.recordNotification(notification, outcome: "revoked", now: now))
        #expect(try await ledger.queueConsumptionAnswer("1", environment: .production, requestedBy: "n-2", now: now) == .skippedNoConsent)
        #expect(try await ledger.fanOut(to: ["backend"], limit: 100, now: now) == 3)
        let rescission = ConsentRescission(
            appTransactionID: "704", environment: .sandbox, bundleID: "com.example.app", notificationUUID: "n-3", rescindedAt: now)
        #expect(try await ledger.recordConsentRescission(rescission))
        #expect(try await ledger.recordConsentRescission(rescission) == false, "once per app download and environment")
    }

    @Test func anExportImportedIntoAnEmptyLedgerGivesTheSameRowsAndBytes() async throws {
        try await ScratchPostgres.withLedger { source in
            try await Self.populate(source)
            let archive = try await source.archive()
            #expect(
                archive.summary
                    == "2 fulfilments, 1 download_attempts, 1 pending_proofs, 1 notifications, 1 server_calls, 3 ledger_events, "
                    + "3 webhook_deliveries, 1 consent_rescissions"
            )
            #expect(archive.problems.isEmpty, "\(archive.problems)")
            let lines = try archive.jsonLines()
            #expect(try LedgerArchive(jsonLines: lines) == archive, "the file reads back as written")
            try await ScratchPostgres.withLedger { target in
                try await target.restore(try LedgerArchive(jsonLines: lines))
                let copy = try await target.archive()
                #expect(copy.matches(archive))
                #expect(try copy.jsonLines() == lines, "microseconds survive PostgreSQL to PostgreSQL")
                #expect(try await target.notificationSeen("n-1"))
                #expect(try await target.storedNotification("n-1")?.signedPayload == "a.b.c")
                #expect(try await target.serverCalls(ServerCallListQuery()).map(\.requestedBy) == ["n-2"])
                #expect(try await target.fulfilment("7")?.state == .revoked)
                // An archive carries no line's mark: the import marks each line's first, and the queue goes on.
                let leased = try await target.leaseWebhookDeliveries(endpoint: "backend", limit: 10, until: Self.now + 60, now: Self.now)
                #expect(leased.map { "\($0.delivery.transactionID)#\($0.delivery.sequence)" }.sorted() == ["1#1", "7#1"])
                let error = await #expect(throws: LedgerArchive.Malformed.self) { try await target.restore(archive) }
                #expect(error?.description.contains("not empty") == true)
            }
        }
    }

    @Test func aBrokenInvariantIsNamedOnItsRow() throws {
        let notification = NotificationRecord(
            uuid: "n", type: "REFUND", subtype: nil, transactionID: nil, originalTransactionID: nil, outcome: "x", receivedAt: Self.now)
        var archive = LedgerArchive()
        archive.notifications = [notification, notification]
        archive.attempts = [
            DownloadAttempt(id: 1, transactionID: "404", rangeStart: nil, rangeEnd: nil, bytes: 1, outcome: .complete, at: Self.now)
        ]
        #expect(archive.problems == ["download attempt 1: no transaction 404", "notifications: a UUID is recorded twice"])
        #expect(throws: LedgerArchive.Malformed.self) { try LedgerArchive(jsonLines: Data(#"{"table": "gifts", "row": {}}"#.utf8)) }
    }
}
