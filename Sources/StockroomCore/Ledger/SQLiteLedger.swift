import Foundation
import GRDB

/// The `Ledger` on SQLite, through GRDB: each decision is one write transaction that re-reads
/// the rows it depends on, so a refund or an operator's revocation that lands meanwhile is seen.
public struct SQLiteLedger: Ledger {
    public let database: AppDatabase
    /// When set, a transaction reaching this point is queued for Finish Transaction in the same write.
    public let finishOn: FinishTrigger?

    public init(database: AppDatabase, finishOn: FinishTrigger? = nil) {
        self.database = database
        self.finishOn = finishOn
    }

    // MARK: Reads

    public func fulfilment(_ transactionID: String) async throws -> Fulfilment? {
        try await database.writer.read { db in try Self.row(db, transactionID) }
    }

    public func list(_ filter: FulfilmentFilter) async throws -> [Fulfilment] {
        try await database.writer.read { db in
            var request = Fulfilment.all()
            if let states = filter.states { request = request.filter(states.map(\.rawValue).contains(Fulfilment.Columns.state)) }
            if let product = filter.productID { request = request.filter(Fulfilment.Columns.productID == product) }
            if let since = filter.since { request = request.filter(Fulfilment.Columns.updatedAt >= since) }
            if filter.unfinished {
                request = request.filter(
                    sql: "transaction_id IN (SELECT transaction_id FROM server_calls WHERE kind = 'finish' AND status = 'queued')")
            }
            return try request.order(Fulfilment.Columns.updatedAt.desc).limit(filter.limit).fetchAll(db)
        }
    }

    public func attempts(of transactionID: String) async throws -> [DownloadAttempt] {
        try await database.writer.read { db in
            try DownloadAttempt.filter(Column("transaction_id") == transactionID).order(Column("id")).fetchAll(db)
        }
    }

    public func pendingProofs(status: PendingProof.Status?, limit: Int) async throws -> [PendingProof] {
        try await database.writer.read { db in
            var request = PendingProof.all()
            if let status { request = request.filter(Column("status") == status.rawValue) }
            return try request.order(Column("id")).limit(limit).fetchAll(db)
        }
    }

    public func stateCounts() async throws -> [FulfilmentState: Int] {
        try await database.writer.read { db in
            var counts: [FulfilmentState: Int] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT state, COUNT(*) AS count FROM fulfilments GROUP BY state") {
                if let state = FulfilmentState(rawValue: row["state"]) { counts[state] = row["count"] }
            }
            return counts
        }
    }

    // MARK: Decisions

    public func claim(_ proof: VerifiedProof, terms: ClaimTerms, now: Date) async throws -> LedgerDecision {
        try await database.writer.write { db in
            var purchase = try Self.purchase(db, transactionID: proof.transactionID, originalTransactionID: proof.originalTransactionID)
            let decision = try EntitlementRules.claim(proof, terms: terms, purchase: &purchase, now: now)
            try purchase.save(db)
            if case .entitled = decision {
                try db.cachedStatement(sql: "DELETE FROM pending_proofs WHERE transaction_id = ? AND proof_digest = ?")
                    .execute(arguments: [proof.transactionID, proof.digest])
            }
            return decision
        }
    }

    public func serveRecordedProof(_ request: RecordedProofRequest, now: Date) async throws -> Fulfilment? {
        try await database.writer.write { db in
            guard let row = try Self.row(db, request.transactionID) else { return nil }
            var purchase = try Self.purchase(db, transactionID: row.transactionID, originalTransactionID: row.originalTransactionID)
            guard let served = EntitlementRules.serveRecordedProof(request, purchase: &purchase, now: now) else { return nil }
            try purchase.save(db)
            return served
        }
    }

    public func keepPendingProof(_ draft: PendingProofDraft, bounds: PendingProofBounds, now: Date) async throws -> PendingProofKeeping {
        try await database.writer.write { db in
            try Self.purgeRejected(db, before: bounds.purgeCutoff(now: now), limit: PendingProofBounds.purgeBatch)
            if var existing = try PendingProof
                .filter(Column("transaction_id") == draft.transactionID && Column("proof_digest") == draft.digest).fetchOne(db)
            {
                existing.lastError = draft.error
                existing.updatedAt = now
                try existing.update(db)
                return .refreshed
            }
            let count = { (sql: String, arguments: StatementArguments) in try Int.fetchOne(db.cachedStatement(sql: sql), arguments: arguments) ?? 0 }
            let kept = PendingProofCounts(
                transaction: try count("SELECT COUNT(*) FROM pending_proofs WHERE transaction_id = ?", [draft.transactionID]),
                client: try draft.client.map { try count("SELECT COUNT(*) FROM pending_proofs WHERE client = ?", [$0]) } ?? 0,
                total: try count("SELECT COUNT(*) FROM pending_proofs", []))
            let verdict = bounds.admit(draft, kept: kept)
            guard verdict == .kept else { return verdict }
            let proof = PendingProof(
                id: nil, transactionID: draft.transactionID, proofDigest: draft.digest, proofKind: draft.kind, proof: draft.proof,
                requestedProductID: draft.requestedProductID, appAccountToken: draft.appAccountToken, client: draft.client, status: .pending,
                lastError: draft.error, createdAt: now, updatedAt: now)
            try proof.insert(db)
            return .kept
        }
    }

    public func purgeRejectedPendingProofs(before: Date, limit: Int) async throws -> Int {
        try await database.writer.write { db in try Self.purgeRejected(db, before: before, limit: limit) }
    }

    /// Deletes up to `limit` rejected proofs last changed before `before`.
    @discardableResult
    private static func purgeRejected(_ db: Database, before: Date, limit: Int) throws -> Int {
        try db.cachedStatement(
            sql: """
                DELETE FROM pending_proofs WHERE id IN
                  (SELECT id FROM pending_proofs WHERE status = 'rejected' AND updated_at < ? ORDER BY updated_at LIMIT ?)
                """
        ).execute(arguments: [before, max(0, limit)])
        return db.changesCount
    }

    public func leasePendingProofs(of transactionID: String?, limit: Int, until: Date, now: Date) async throws -> [PendingProof] {
        try await database.writer.write { db in
            try PendingProof.fetchAll(
                db,
                sql: """
                    UPDATE pending_proofs SET leased_until = ? WHERE id IN
                      (SELECT id FROM pending_proofs WHERE status = 'pending' AND (leased_until IS NULL OR leased_until <= ?)
                       AND (? IS NULL OR transaction_id = ?) ORDER BY id LIMIT ?)
                    RETURNING *
                    """,
                arguments: [until, now, transactionID, transactionID, limit]
            ).sorted { ($0.id ?? 0) < ($1.id ?? 0) }
        }
    }

    public func rejectPendingProof(id: Int64, reason: String, now: Date) async throws {
        try await database.writer.write { db in
            try db.execute(
                sql: "UPDATE pending_proofs SET status = 'rejected', last_error = ?, updated_at = ?, leased_until = NULL WHERE id = ?",
                arguments: [reason, now, id])
        }
    }

    public func notePendingProof(id: Int64, error: String, now: Date) async throws {
        try await database.writer.write { db in
            try db.execute(
                sql: "UPDATE pending_proofs SET last_error = ?, updated_at = ?, leased_until = NULL WHERE id = ?", arguments: [error, now, id])
        }
    }

    public func resume(_ transactionID: String, productID: String, now: Date) async throws -> LedgerDecision {
        try await database.writer.write { db in
            guard let row = try Self.row(db, transactionID), row.productID == productID else {
                return .refused(.unknownTransaction(transactionID))
            }
            var purchase = try Self.purchase(db, transactionID: row.transactionID, originalTransactionID: row.originalTransactionID)
            let decision = EntitlementRules.resume(transactionID, purchase: &purchase, now: now)
            try purchase.save(db)
            return decision
        }
    }

    public func acknowledge(_ transactionID: String, productID: String, now: Date) async throws -> LedgerDecision {
        try await database.writer.write { db in
            guard let row = try Self.row(db, transactionID), row.productID == productID else {
                return .refused(.unknownTransaction(transactionID))
            }
            var purchase = try Self.purchase(db, transactionID: row.transactionID, originalTransactionID: row.originalTransactionID)
            let decision = try EntitlementRules.acknowledge(transactionID, purchase: &purchase, now: now)
            try purchase.save(db)
            if case .entitled(let after) = decision { try queueFinishIfDue(db, before: row.state, after: after, now: now) }
            return decision
        }
    }

    public func reject(_ transactionID: String, digest: String?, reason: String, now: Date) async throws -> Fulfilment? {
        try await database.writer.write { db in
            guard var row = try Self.row(db, transactionID) else { throw LedgerError.unknownTransaction(transactionID) }
            guard EntitlementRules.reject(&row, digest: digest, reason: reason, now: now) else { return nil }
            try row.update(db)
            return row
        }
    }

    public func noteError(_ transactionID: String, _ error: String, now: Date) async throws {
        try await database.writer.write { db in
            try db.execute(
                sql: "UPDATE fulfilments SET last_error = ?, updated_at = ? WHERE transaction_id = ?", arguments: [error, now, transactionID])
            guard db.changesCount == 1 else { throw LedgerError.unknownTransaction(transactionID) }
        }
    }

    public func revoke(_ revoked: RevokedPurchase, cause: RevocationCause, reason: String, now: Date) async throws -> [Fulfilment] {
        try await database.writer.write { db in
            var purchase = try Self.purchase(db, transactionID: revoked.transactionID, originalTransactionID: revoked.originalTransactionID)
            let changed = try EntitlementRules.revoke(revoked, cause: cause, reason: reason, purchase: &purchase, now: now)
            try purchase.save(db)
            return changed
        }
    }

    public func reinstate(_ transactionID: String, reason: String, now: Date) async throws -> [Fulfilment] {
        try await database.writer.write { db in
            guard let row = try Self.row(db, transactionID) else { throw LedgerError.unknownTransaction(transactionID) }
            var purchase = try Self.purchase(db, transactionID: row.transactionID, originalTransactionID: row.originalTransactionID)
            let changed = try EntitlementRules.lift(.operatorAction, reason: reason, purchase: &purchase, now: now)
            try purchase.save(db)
            return changed
        }
    }

    public func reverseRefund(originalTransactionID: String, now: Date) async throws -> [Fulfilment] {
        try await database.writer.write { db in
            var purchase = try Self.purchase(db, transactionID: originalTransactionID, originalTransactionID: originalTransactionID)
            let changed = try EntitlementRules.lift(.refund, reason: "refund reversed", purchase: &purchase, now: now)
            try purchase.save(db)
            return changed
        }
    }

    public func recordDelivery(_ transactionID: String, report: DeliveryReport, fileSize: Int64) async throws {
        try await database.writer.write { db in
            guard var row = try Self.row(db, transactionID) else { throw LedgerError.unknownTransaction(transactionID) }
            let now = Date()
            let before = row.state
            let attempt = DownloadAttempt(
                id: nil, transactionID: transactionID, rangeStart: report.range?.lowerBound, rangeEnd: report.range?.upperBound,
                bytes: report.bytesSent, outcome: report.complete ? .complete : .interrupted, at: now)
            try attempt.insert(db)
            // Coalesce the log: the newest attempts stay, the counters keep the totals.
            try db.cachedStatement(
                sql: """
                    DELETE FROM download_attempts WHERE transaction_id = ? AND id NOT IN
                      (SELECT id FROM download_attempts WHERE transaction_id = ? ORDER BY id DESC LIMIT ?)
                    """
            ).execute(arguments: [transactionID, transactionID, DownloadAttempt.keptPerTransaction])
            EntitlementRules.recordDelivery(&row, report: report, fileSize: fileSize, now: now)
            try row.update(db)
            try queueFinishIfDue(db, before: before, after: row, now: now)
        }
    }

    public func notificationSeen(_ uuid: String) async throws -> Bool {
        try await database.writer.read { db in
            try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM notifications WHERE notification_uuid = ?", arguments: [uuid]) ?? 0 > 0
        }
    }

    public func recordNotification(_ notification: NotificationRecord, outcome: String, now: Date) async throws -> Bool {
        try await database.writer.write { db in
            try db.execute(
                sql: """
                    INSERT INTO notifications (notification_uuid, notification_type, subtype, transaction_id, original_transaction_id, outcome,
                      received_at, signed_payload, source)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (notification_uuid) DO NOTHING
                    """,
                arguments: [
                    notification.uuid, notification.type, notification.subtype, notification.transactionID,
                    notification.originalTransactionID, outcome, now, notification.signedPayload, notification.source,
                ])
            return db.changesCount == 1
        }
    }

    // MARK: Rows
    // The statements every download runs are prepared once per connection and kept: preparing
    // (and GRDB's authorizer pass) cost more than running them.

    /// One transaction's row.
    private static func row(_ db: Database, _ transactionID: String) throws -> Fulfilment? {
        try Fulfilment.fetchOne(db.cachedStatement(sql: "SELECT * FROM fulfilments WHERE transaction_id = ?"), arguments: [transactionID])
    }

    /// The transaction's row and every row of its purchase (restores), as the rules see them.
    private static func purchase(_ db: Database, transactionID: String, originalTransactionID: String) throws -> PurchaseRows {
        let statement = try db.cachedStatement(
            sql: "SELECT * FROM fulfilments WHERE original_transaction_id = ? OR transaction_id = ? OR transaction_id = ?")
        let rows = try Fulfilment.fetchAll(statement, arguments: [originalTransactionID, transactionID, originalTransactionID])
        return PurchaseRows(rows: rows)
    }
}

extension PurchaseRows {
    /// Writes the rows the rules inserted or changed.
    func save(_ db: Database) throws {
        for row in inserted { try row.insert(db) }
        for row in changed { try row.update(db) }
    }
}
