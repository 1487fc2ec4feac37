import Foundation
import PostgresNIO
import StockroomCore

/// Every decision: one transaction, the purchase locked, the rules of `EntitlementRules`.
extension PostgresLedger {
    /// Runs `decide` on the purchase of `originalTransactionID`, locked, in one transaction.
    private func deciding<Value: Sendable>(
        transactionID: String, originalTransactionID: String,
        _ decide: @escaping @Sendable (inout PurchaseRows, PostgresConnection) async throws -> Value
    ) async throws -> Value {
        try await database.transaction { connection in
            try await Self.lockPurchase(originalTransactionID, on: connection, logger: logger)
            var purchase = try await Self.purchase(
                transactionID: transactionID, originalTransactionID: originalTransactionID, on: connection, logger: logger)
            let value = try await decide(&purchase, connection)
            try await purchase.save(connection, logger: logger)
            return value
        }
    }

    /// As `deciding`, for a transaction on record: its purchase is the one its row names.
    /// Nil when there is no such transaction (nothing is locked or written then).
    private func decidingOnRecord<Value: Sendable>(
        _ transactionID: String, _ decide: @escaping @Sendable (inout PurchaseRows) throws -> Value
    ) async throws -> Value? {
        try await database.transaction { connection in
            guard let row = try await Self.fulfilment(transactionID, on: connection, logger: logger) else { return nil }
            try await Self.lockPurchase(row.originalTransactionID, on: connection, logger: logger)
            var purchase = try await Self.purchase(
                transactionID: row.transactionID, originalTransactionID: row.originalTransactionID, on: connection, logger: logger)
            guard purchase[transactionID] != nil else { return nil }
            let value = try decide(&purchase)
            try await purchase.save(connection, logger: logger)
            return value
        }
    }

    public func claim(_ proof: VerifiedProof, terms: ClaimTerms, now: Date) async throws -> LedgerDecision {
        try await deciding(transactionID: proof.transactionID, originalTransactionID: proof.originalTransactionID) { purchase, connection in
            let decision = try EntitlementRules.claim(proof, terms: terms, purchase: &purchase, now: now)
            if case .entitled = decision {
                try await connection.query(
                    "DELETE FROM pending_proofs WHERE transaction_id = \(proof.transactionID) AND proof_digest = \(proof.digest)", logger: logger
                ).drain()
            }
            return decision
        }
    }

    public func serveRecordedProof(_ request: RecordedProofRequest, now: Date) async throws -> Fulfilment? {
        let served: Fulfilment?? = try await decidingOnRecord(request.transactionID) { purchase in
            EntitlementRules.serveRecordedProof(request, purchase: &purchase, now: now)
        }
        return served ?? nil
    }

    public func resume(_ transactionID: String, productID: String, now: Date) async throws -> LedgerDecision {
        try await decidingOnRecord(transactionID) { purchase -> LedgerDecision in
            guard purchase[transactionID]?.productID == productID else { return .refused(.unknownTransaction(transactionID)) }
            return EntitlementRules.resume(transactionID, purchase: &purchase, now: now)
        } ?? .refused(.unknownTransaction(transactionID))
    }

    public func acknowledge(_ transactionID: String, productID: String, now: Date) async throws -> LedgerDecision {
        try await database.transaction { connection -> LedgerDecision in
            guard let row = try await Self.fulfilment(transactionID, on: connection, logger: logger) else { return .refused(.unknownTransaction(transactionID)) }
            try await Self.lockPurchase(row.originalTransactionID, on: connection, logger: logger)
            var purchase = try await Self.purchase(
                transactionID: row.transactionID, originalTransactionID: row.originalTransactionID, on: connection, logger: logger)
            guard let before = purchase[transactionID], before.productID == productID else { return .refused(.unknownTransaction(transactionID)) }
            let decision = try EntitlementRules.acknowledge(transactionID, purchase: &purchase, now: now)
            try await purchase.save(connection, logger: logger)
            if case .entitled(let after) = decision { try await queueFinishIfDue(connection, before: before.state, after: after, now: now) }
            return decision
        }
    }

    public func revoke(_ revoked: RevokedPurchase, cause: RevocationCause, reason: String, now: Date) async throws -> [Fulfilment] {
        try await deciding(transactionID: revoked.transactionID, originalTransactionID: revoked.originalTransactionID) { purchase, _ in
            try EntitlementRules.revoke(revoked, cause: cause, reason: reason, purchase: &purchase, now: now)
        }
    }

    public func reinstate(_ transactionID: String, reason: String, now: Date) async throws -> [Fulfilment] {
        guard
            let lifted = try await decidingOnRecord(transactionID, { purchase in
                try EntitlementRules.lift(.operatorAction, reason: reason, purchase: &purchase, now: now)
            })
        else { throw LedgerError.unknownTransaction(transactionID) }
        return lifted
    }

    public func reverseRefund(originalTransactionID: String, now: Date) async throws -> [Fulfilment] {
        try await deciding(transactionID: originalTransactionID, originalTransactionID: originalTransactionID) { purchase, _ in
            try EntitlementRules.lift(.refund, reason: "refund reversed", purchase: &purchase, now: now)
        }
    }

    public func reject(_ transactionID: String, digest: String?, reason: String, now: Date) async throws -> Fulfilment? {
        try await database.transaction { connection in
            guard var row = try await Self.fulfilment(transactionID, on: connection, logger: logger, locking: true) else {
                throw LedgerError.unknownTransaction(transactionID)
            }
            guard EntitlementRules.reject(&row, digest: digest, reason: reason, now: now) else { return nil }
            try await connection.query(LedgerRows.update(row), logger: logger).drain()
            return row
        }
    }

    public func noteError(_ transactionID: String, _ error: String, now: Date) async throws {
        let changed = try await database.read { connection in
            try await connection.query(
                "UPDATE fulfilments SET last_error = \(error), updated_at = \(Timestamp(now)) WHERE transaction_id = \(transactionID) RETURNING 1",
                logger: logger
            ).collect().count
        }
        guard changed == 1 else { throw LedgerError.unknownTransaction(transactionID) }
    }

    public func recordDelivery(_ transactionID: String, report: DeliveryReport, fileSize: Int64) async throws {
        try await database.transaction { connection in
            guard var row = try await Self.fulfilment(transactionID, on: connection, logger: logger, locking: true) else {
                throw LedgerError.unknownTransaction(transactionID)
            }
            let now = Date()
            let before = row.state
            let outcome: DownloadAttempt.Outcome = report.complete ? .complete : .interrupted
            try await connection.query(
                """
                INSERT INTO download_attempts (transaction_id, range_start, range_end, bytes, outcome, at)
                VALUES (\(transactionID), \(report.range?.lowerBound), \(report.range?.upperBound), \(report.bytesSent), \(outcome.rawValue), \(Timestamp(now)))
                """, logger: logger
            ).drain()
            // Coalesce the log: the newest attempts stay, the counters keep the totals.
            try await connection.query(
                """
                DELETE FROM download_attempts WHERE transaction_id = \(transactionID) AND id NOT IN
                  (SELECT id FROM download_attempts WHERE transaction_id = \(transactionID) ORDER BY id DESC LIMIT \(DownloadAttempt.keptPerTransaction))
                """, logger: logger
            ).drain()
            EntitlementRules.recordDelivery(&row, report: report, fileSize: fileSize, now: now)
            try await connection.query(LedgerRows.update(row), logger: logger).drain()
            try await queueFinishIfDue(connection, before: before, after: row, now: now)
        }
    }

    public func recordNotification(_ notification: NotificationRecord, outcome: String, now: Date) async throws -> Bool {
        try await database.read { connection in
            try await connection.query(
                """
                INSERT INTO notifications (notification_uuid, notification_type, subtype, transaction_id, original_transaction_id, outcome, received_at,
                  signed_payload, source)
                VALUES (\(notification.uuid), \(notification.type), \(notification.subtype), \(notification.transactionID),
                  \(notification.originalTransactionID), \(outcome), \(Timestamp(now)), \(notification.signedPayload), \(notification.source))
                ON CONFLICT (notification_uuid) DO NOTHING RETURNING 1
                """, logger: logger
            ).collect().count == 1
        }
    }
}
