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

    public func rejectPendingProof(id: Int64, reason: String, now: Date) async throws {
        try await database.read { connection in
            try await connection.query(
                "UPDATE pending_proofs SET status = 'rejected', last_error = \(reason), updated_at = \(Timestamp(now)) WHERE id = \(id)", logger: logger
            ).drain()
        }
    }

    public func notePendingProof(id: Int64, error: String, now: Date) async throws {
        try await database.read { connection in
            try await connection.query(
                "UPDATE pending_proofs SET last_error = \(error), updated_at = \(Timestamp(now)) WHERE id = \(id)", logger: logger
            ).drain()
        }
    }
}
