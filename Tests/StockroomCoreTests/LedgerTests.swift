import Foundation
import GRDB
import StockroomPostgresTestSupport
import StockroomTestSupport
import Testing
@testable import StockroomCore
@testable import StockroomSQLite

/// Each ledger's rules and its schema's guards, on both engines (a real SQLite file, a real
/// PostgreSQL database of its own); then what only SQLite has: its migration, its file mode.
@Suite struct LedgerTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    static func proof(
        _ id: String, original: String? = nil, product: String = "com.example.book", proof: String = "cmVjZWlwdA==",
        expiresAt: Date? = nil, revokedAt: Date? = nil, account: String? = nil
    ) -> VerifiedProof {
        VerifiedProof(
            transactionID: id, originalTransactionID: original ?? id, productID: product, bundleID: "com.example.app",
            environment: .production, expiresAt: expiresAt, revokedAt: revokedAt, appAccountToken: account, kind: .receipt, proof: proof)
    }

    static func download(_ product: String = "com.example.book", account: String? = nil) -> ProofTerms {
        ProofTerms(requestedProductID: product, appAccountToken: account, checksAccount: true, countsAttempt: true)
    }

    @Test(arguments: LedgerEngine.allCases) func theHappyPathMovesThroughEveryState(_ engine: LedgerEngine) async throws {
        try await TestLedger.with(engine) { (test: TestLedger) async throws in
            let ledger = test.ledger
            guard case .entitled(let row) = try await ledger.recordProof(Self.proof("1"), terms: Self.download(), now: Self.now) else {
                Issue.record("a verified proof entitles")
                return
            }
            #expect(row.state == .verified && row.attempts == 1 && row.proofDigest == VerifiedProof.digest(of: "cmVjZWlwdA=="))
            try await ledger.recordDelivery(
                "1", report: DeliveryReport(range: 0...99, bytesSent: 100, complete: true), fileSize: 100, now: Date())
            #expect(
                try await ledger.acknowledge("1", productID: "com.example.book", now: Self.now)
                    == .entitled(try #require(try await ledger.fulfilment("1"))))
            #expect(try await ledger.fulfilment("1")?.state == .acknowledged)
        }
    }

    @Test(arguments: LedgerEngine.allCases) func aClaimForAnotherProductThanTheProofsIsRefusedAndWritesNothing(_ engine: LedgerEngine)
        async throws
    {
        try await TestLedger.with(engine) { (test: TestLedger) async throws in
            let ledger = test.ledger
            let decision = try await ledger.recordProof(
                Self.proof("1", product: "com.example.cheap"), terms: Self.download("com.example.dear"), now: Self.now)
            #expect(decision == .refused(.rejected(.productMismatch(transactionID: "1", productID: "com.example.dear"))))
            #expect(try await ledger.fulfilment("1") == nil)
        }
    }

    @Test(arguments: LedgerEngine.allCases) func theProofDecidesTheProductOnReverification(_ engine: LedgerEngine) async throws {
        try await TestLedger.with(engine) { (test: TestLedger) async throws in
            let ledger = test.ledger
            _ = try await ledger.recordProof(Self.proof("1"), terms: Self.download(), now: Self.now)
            // A row recorded wrongly by an older version: the verified proof corrects it.
            try await test.execute("UPDATE fulfilments SET product_id = 'com.example.dear'")
            _ = try await ledger.recordProof(Self.proof("1"), terms: .reverification, now: Self.now)
            #expect(try await ledger.fulfilment("1")?.productID == "com.example.book")
        }
    }

    @Test(arguments: LedgerEngine.allCases) func anOperatorsRevocationIsLiftedOnlyByReinstateAndARefundsOnlyByItsReversal(
        _ engine: LedgerEngine
    ) async throws {
        try await TestLedger.with(engine) { (test: TestLedger) async throws in
            let ledger = test.ledger
            _ = try await ledger.recordProof(Self.proof("1"), terms: Self.download(), now: Self.now)
            _ = try await ledger.recordProof(Self.proof("2", original: "1"), terms: Self.download(), now: Self.now)
            let purchase = RevokedPurchase(transactionID: "1", originalTransactionID: "1", productID: nil, bundleID: nil, environment: nil)
            #expect(
                try await ledger.revoke(purchase, cause: .operatorAction, reason: "chargeback", now: Self.now).map(\.transactionID) == [
                    "1", "2",
                ])
            // A verified proof does not undo it, nor does a refund's reversal.
            #expect(
                try await ledger.recordProof(Self.proof("1"), terms: .reverification, now: Self.now)
                    == .refused(.revoked(transactionID: "1")))
            #expect(try await ledger.reverseRefund(originalTransactionID: "1", now: Self.now).isEmpty)
            #expect(try await ledger.fulfilment("2")?.state == .revoked)
            // A refund on top: reinstating lifts the operator's cause only.
            _ = try await ledger.revoke(purchase, cause: .refund, reason: "refund", now: Self.now)
            #expect(try await ledger.reinstate("2", reason: "mistake", now: Self.now).isEmpty)
            #expect(try await ledger.fulfilment("1")?.state == .revoked)
            #expect(try await ledger.reverseRefund(originalTransactionID: "1", now: Self.now).map(\.transactionID) == ["1", "2"])
            #expect(try await ledger.fulfilment("1")?.state == .verified)
        }
    }

    @Test(arguments: LedgerEngine.allCases) func aRestoreOfARevokedPurchaseIsRecordedRevoked(_ engine: LedgerEngine) async throws {
        try await TestLedger.with(engine) { (test: TestLedger) async throws in
            let ledger = test.ledger
            _ = try await ledger.recordProof(Self.proof("1", revokedAt: Self.now), terms: Self.download(), now: Self.now)
            #expect(try await ledger.fulfilment("1")?.state == .revoked)
            #expect(
                try await ledger.recordProof(Self.proof("2", original: "1"), terms: Self.download(), now: Self.now)
                    == .refused(.revoked(transactionID: "2")))
            let restore = try #require(try await ledger.fulfilment("2"))
            #expect(restore.state == .revoked && restore.revokedByRefundAt != nil)
        }
    }

    @Test(arguments: LedgerEngine.allCases) func aBoundAccountMustBeNamedOnEveryClaimAndServe(_ engine: LedgerEngine) async throws {
        try await TestLedger.with(engine) { (test: TestLedger) async throws in
            let ledger = test.ledger
            let owner = "8f2e6a4c-0000-4000-8000-000000000001"
            _ = try await ledger.recordProof(Self.proof("1", account: owner), terms: Self.download(account: owner), now: Self.now)
            #expect(
                try await ledger.recordProof(Self.proof("1"), terms: Self.download(), now: Self.now)
                    == .refused(.claimed(transactionID: "1")))
            let digest = VerifiedProof.digest(of: "cmVjZWlwdA==")
            #expect(
                try await ledger.serveRecordedProof(
                    .init(transactionID: "1", digest: digest, productID: "com.example.book", appAccountToken: nil), now: Self.now) == nil)
            #expect(
                try await ledger.serveRecordedProof(
                    .init(transactionID: "1", digest: digest, productID: "com.example.book", appAccountToken: owner.uppercased()),
                    now: Self.now) != nil)
        }
    }

    @Test(arguments: LedgerEngine.allCases) func anExpiredSubscriptionIsNeitherClaimedNorResumed(_ engine: LedgerEngine) async throws {
        try await TestLedger.with(engine) { (test: TestLedger) async throws in
            let ledger = test.ledger
            let later = Self.now.addingTimeInterval(3600)
            #expect(
                try await ledger.recordProof(Self.proof("1", expiresAt: later), terms: Self.download(), now: Self.now)
                    != .refused(.expired(transactionID: "1")))
            #expect(try await ledger.resume("1", productID: "com.example.book", now: later) == .refused(.expired(transactionID: "1")))
            #expect(
                try await ledger.recordProof(Self.proof("1", expiresAt: later), terms: Self.download(), now: later)
                    == .refused(.expired(transactionID: "1")))
        }
    }

    @Test(arguments: LedgerEngine.allCases) func pendingProofsAreBoundedPerTransaction(_ engine: LedgerEngine) async throws {
        try await TestLedger.with(engine) { (test: TestLedger) async throws in
            let ledger = test.ledger
            for index in 0..<(PendingProof.perTransaction + 3) {
                let draft = PendingProofDraft(
                    transactionID: "1", digest: "d\(index)", kind: .receipt, proof: "p\(index)", requestedProductID: "com.example.book",
                    appAccountToken: nil, error: "down")
                #expect(try await ledger.keepPendingProof(draft, now: Self.now) == (index < PendingProof.perTransaction))
            }
            #expect(try await ledger.pendingProofs(status: .pending, limit: 100).count == PendingProof.perTransaction)
            #expect(try await ledger.fulfilment("1") == nil, "a pending proof is no entitlement")
        }
    }

    @Test(arguments: LedgerEngine.allCases) func theAttemptsLogStaysBounded(_ engine: LedgerEngine) async throws {
        try await TestLedger.with(engine) { (test: TestLedger) async throws in
            let ledger = test.ledger
            _ = try await ledger.recordProof(Self.proof("1"), terms: Self.download(), now: Self.now)
            for start in 0..<Int64(60) {
                try await ledger.recordDelivery(
                    "1", report: DeliveryReport(range: start...start, bytesSent: 1, complete: true), fileSize: 100, now: Date())
            }
            #expect(try await ledger.attempts(of: "1").count == DownloadAttempt.keptPerTransaction)
            #expect(try await ledger.fulfilment("1")?.bytesDelivered == 60)
        }
    }

    @Test(arguments: LedgerEngine.allCases) func anInterruptedOrPartialBodyDoesNotDeliver(_ engine: LedgerEngine) async throws {
        try await TestLedger.with(engine) { (test: TestLedger) async throws in
            let ledger = test.ledger
            _ = try await ledger.recordProof(Self.proof("1"), terms: Self.download(), now: Self.now)
            try await ledger.recordDelivery(
                "1", report: DeliveryReport(range: 0...99, bytesSent: 40, complete: false), fileSize: 100, now: Date())
            try await ledger.recordDelivery(
                "1", report: DeliveryReport(range: 0...49, bytesSent: 50, complete: true), fileSize: 100, now: Date())
            #expect(try await ledger.fulfilment("1")?.state == .verified)
            try await ledger.recordDelivery(
                "1", report: DeliveryReport(range: 50...99, bytesSent: 50, complete: true), fileSize: 100, now: Date())
            let row = try await ledger.fulfilment("1")
            #expect(row?.state == .delivered)
            #expect(row?.bytesDelivered == 140)
        }
    }

    @Test(arguments: LedgerEngine.allCases) func theSchemaRefusesUnknownStatesAndDuplicates(_ engine: LedgerEngine) async throws {
        try await TestLedger.with(engine) { (test: TestLedger) async throws in
            let ledger = test.ledger
            _ = try await ledger.recordProof(Self.proof("1"), terms: Self.download(), now: Self.now)
            // The same SQL on both engines; each must be refused by the schema, not by a typo.
            let refused = [
                "UPDATE fulfilments SET state = 'gift'",
                "UPDATE fulfilments SET attempts = -1",
                "UPDATE fulfilments SET proof = NULL",
                """
                INSERT INTO pending_proofs (transaction_id, proof_digest, proof_kind, proof, requested_product_id, status, \
                created_at, updated_at) VALUES ('1', 'd', 'receipt', 'p', 'x', 'lost', CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)
                """,
                """
                INSERT INTO notifications (notification_uuid, notification_type, outcome, received_at) VALUES ('n-1', 'REFUND', \
                'revoked', CURRENT_TIMESTAMP)
                """,
            ]
            try await test.execute(
                """
                INSERT INTO notifications (notification_uuid, notification_type, outcome, received_at) VALUES ('n-1', 'REFUND', \
                'revoked', CURRENT_TIMESTAMP)
                """
            )
            for sql in refused {
                let error = await #expect(throws: (any Error).self, "\(sql)") { try await test.execute(sql) }
                #expect(error.map(TestLedger.isConstraintViolation) == true, "\(sql): \(String(describing: error))")
            }
            #expect(try await ledger.fulfilment("1")?.state == .verified)
        }
    }

    @Test(arguments: LedgerEngine.allCases) func concurrentClaimsOfOneTransactionOnTwoInstancesMakeOneEntitlementAndCountEveryAttempt(
        _ engine: LedgerEngine
    ) async throws {
        try await TestLedger.with(engine) { (test: TestLedger) async throws in
            try await test.another { second in
                let decisions = try await withThrowingTaskGroup(of: LedgerDecision.self) { group in
                    for index in 0..<32 {
                        let ledger = index.isMultiple(of: 2) ? test.ledger : second
                        group.addTask { try await ledger.recordProof(Self.proof("1"), terms: Self.download(), now: Self.now) }
                    }
                    return try await group.reduce(into: [LedgerDecision]()) { $0.append($1) }
                }
                #expect(decisions.allSatisfy { if case .entitled = $0 { true } else { false } })
                let rows = try await test.ledger.list(FulfilmentListQuery())
                #expect(rows.count == 1)
                #expect(rows.first?.attempts == 32)
            }
        }
    }

    @Test(arguments: LedgerEngine.allCases) func aRefundOnOneInstanceIsSeenByTheNextResumeOnTheOther(_ engine: LedgerEngine) async throws {
        try await TestLedger.with(engine) { (test: TestLedger) async throws in
            _ = try await test.ledger.recordProof(Self.proof("1"), terms: Self.download(), now: Self.now)
            try await test.another { second in
                #expect(
                    try await second.resume("1", productID: "com.example.book", now: Self.now) != .refused(.revoked(transactionID: "1")))
                let purchase = RevokedPurchase(
                    transactionID: "1", originalTransactionID: "1", productID: nil, bundleID: nil, environment: nil)
                _ = try await test.ledger.revoke(purchase, cause: .refund, reason: "refund", now: Self.now)
                #expect(
                    try await second.resume("1", productID: "com.example.book", now: Self.now) == .refused(.revoked(transactionID: "1")))
            }
        }
    }

    @Test func theLedgerFileIsReadableByItsOwnerOnly() async throws {
        let folder = try TemporaryFolder()
        let path = folder.path + "/ledger.sqlite"
        _ = FileManager.default.createFile(atPath: path, contents: nil, attributes: [.posixPermissions: 0o644])
        let ledger = SQLiteLedger(database: try SQLiteDatabase(path: path))
        _ = try await ledger.recordProof(Self.proof("1"), terms: Self.download(), now: Self.now)
        for file in [path, path + "-wal"] where FileManager.default.fileExists(atPath: file) {
            let mode = try FileManager.default.attributesOfItem(atPath: file)[.posixPermissions] as? Int
            #expect(mode == 0o600, "\(file)")
        }
    }

    @Test func migratingMovesPendingRowsApartAndKeepsRevocationCauses() async throws {
        let folder = try TemporaryFolder()
        let path = folder.path + "/old.sqlite"
        // A ledger as version 3 of the schema left it.
        let queue = try DatabaseQueue(path: path)
        try SQLiteDatabase.migrator.migrate(queue, upTo: "v3: App Store notifications")
        try await queue.write { db in
            for (id, state, error) in [
                ("1", "pending", "down"), ("2", "verified", nil), ("3", "revoked", "revoked by operator: fraud"),
                ("4", "revoked", "refunded"),
            ] {
                try db.execute(
                    sql: """
                        INSERT INTO fulfilments (transaction_id, original_transaction_id, product_id, bundle_id, proof_kind, proof, state,
                          attempts, bytes_delivered, last_error, created_at, updated_at, revoked_at) VALUES (?, ?, 'com.example.dear', \
                        'b', 'receipt', ' cmVj ZWlwdA== ', ?, 1, 0, ?, ?, ?, ?)
                        """,
                    arguments: [id, id, state, error, Self.now, Self.now, state == "revoked" ? Self.now : nil])
            }
        }
        try queue.close()
        let ledger = SQLiteLedger(database: try SQLiteDatabase(path: path))
        #expect(try await ledger.fulfilment("1") == nil, "an unverified row is no entitlement")
        let kept = try await ledger.pendingProofs(status: .pending, limit: 10)
        #expect(kept.map(\.transactionID) == ["1"])
        #expect(kept.first?.requestedProductID == "com.example.dear")
        #expect(try await ledger.fulfilment("3")?.revokedByOperatorAt != nil)
        #expect(try await ledger.fulfilment("4")?.revokedByRefundAt != nil)
        #expect(try await ledger.fulfilment("2")?.proofDigest != nil)
    }
}
