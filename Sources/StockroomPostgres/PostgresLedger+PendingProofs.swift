import Foundation
import PostgresNIO
import StockroomCore

/// Proofs kept while the App Store cannot be asked: apart from entitlements, bounded per transaction.
extension PostgresLedger {
    public func keepPendingProof(_ draft: PendingProofDraft, now: Date) async throws -> Bool {
        try await database.transaction { connection in
            // The bound counts the transaction's kept proofs: keeps of one transaction run one at a time.
            try await connection.query(
                "SELECT pg_advisory_xact_lock(hashtextextended(\("pending:" + draft.transactionID), 0))", logger: logger
            ).drain()
            let updated = try await connection.query(
                """
                UPDATE pending_proofs SET last_error = \(draft.error), updated_at = \(Timestamp(now))
                WHERE transaction_id = \(draft.transactionID) AND proof_digest = \(draft.digest) RETURNING 1
                """, logger: logger
            ).collect().count
            if updated > 0 { return true }
            let kept = try await connection.query(
                "SELECT count(*) FROM pending_proofs WHERE transaction_id = \(draft.transactionID) AND status = 'pending'", logger: logger
            ).decode(Int64.self).reduce(0, +)
            guard kept < PendingProof.perTransaction else { return false }
            try await connection.query(
                """
                INSERT INTO pending_proofs (transaction_id, proof_digest, proof_kind, proof, requested_product_id, app_account_token,
                  status, last_error, created_at, updated_at)
                VALUES (\(draft.transactionID), \(draft.digest), \(draft.kind.rawValue), \(draft.proof), \(draft.requestedProductID),
                  \(draft.appAccountToken), 'pending', \(draft.error), \(Timestamp(now)), \(Timestamp(now)))
                """, logger: logger
            ).drain()
            return true
        }
    }

    public func leasePendingProofs(limit: Int, until: Date, now: Date) async throws -> [PendingProof] {
        try await database.read { connection in
            // SKIP LOCKED: a run that is leasing the same rows right now is passed over, not waited for.
            let leased = try await LedgerRows.decode(
                PendingProof.self,
                try await connection.query(
                    """
                    UPDATE pending_proofs p SET leased_until = \(Timestamp(until)) WHERE p.id IN
                      (SELECT id FROM pending_proofs WHERE status = 'pending' AND (leased_until IS NULL OR leased_until <= \(Timestamp(now)))
                       ORDER BY id LIMIT \(max(0, limit)) FOR UPDATE SKIP LOCKED)
                    RETURNING \(unescaped: LedgerRows.pendingProof)
                    """, logger: logger))
            return leased.sorted { ($0.id ?? 0) < ($1.id ?? 0) }
        }
    }

    public func rejectPendingProof(id: Int64, reason: String, now: Date) async throws {
        try await database.read { connection in
            try await connection.query(
                "UPDATE pending_proofs SET status = 'rejected', last_error = \(reason), updated_at = \(Timestamp(now)), leased_until = NULL WHERE id = \(id)", logger: logger
            ).drain()
        }
    }

    public func notePendingProof(id: Int64, error: String, now: Date) async throws {
        try await database.read { connection in
            try await connection.query(
                "UPDATE pending_proofs SET last_error = \(error), updated_at = \(Timestamp(now)), leased_until = NULL WHERE id = \(id)", logger: logger
            ).drain()
        }
    }
}
