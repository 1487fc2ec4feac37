import Foundation
import Logging
import PostgresNIO
import StockroomCore

/// Proofs kept while the App Store cannot be asked: apart from entitlements, bounded per transaction, per client and in total.
extension PostgresLedger {
    public func keepPendingProof(_ draft: PendingProofDraft, bounds: PendingProofBounds, now: Date) async throws -> PendingProofKeeping {
        try await database.transaction { connection in
            // The bounds count every kept proof (per transaction, per client, in all): keeps run one at a time.
            try await connection.query("SELECT pg_advisory_xact_lock(hashtextextended('pending_proofs', 0))", logger: logger).drain()
            try await Self.purgeRejected(connection, before: bounds.purgeCutoff(now: now), limit: PendingProofBounds.purgeBatch, logger: logger)
            if try await execute(.refresh(draft, now: now), on: connection) > 0 { return .refreshed }
            func count(_ query: PostgresQuery) async throws -> Int {
                Int(try await connection.query(query, logger: logger).decode(Int64.self).reduce(0, +))
            }
            var client = 0
            if let address = draft.client { client = try await count("SELECT count(*) FROM pending_proofs WHERE client = \(address)") }
            let kept = PendingProofCounts(
                transaction: try await count("SELECT count(*) FROM pending_proofs WHERE transaction_id = \(draft.transactionID)"),
                client: client, total: try await count("SELECT count(*) FROM pending_proofs"))
            let verdict = bounds.admit(draft, kept: kept)
            guard verdict == .kept else { return verdict }
            try await execute(.insert(PendingProof(draft, now: now)), on: connection)
            return .kept
        }
    }

    public func purgeRejectedPendingProofs(before: Date, limit: Int) async throws -> Int {
        try await database.read { connection in
            try await Self.purgeRejected(connection, before: before, limit: limit, logger: logger)
        }
    }

    /// Deletes up to `limit` rejected proofs last changed before `before`; returns how many.
    @discardableResult
    static func purgeRejected(_ connection: PostgresConnection, before: Date, limit: Int, logger: Logger) async throws -> Int {
        try await connection.query(
            """
            DELETE FROM pending_proofs WHERE id IN
              (SELECT id FROM pending_proofs WHERE status = 'rejected' AND updated_at < \(Timestamp(before))
               ORDER BY updated_at LIMIT \(max(0, limit)) FOR UPDATE SKIP LOCKED)
            RETURNING 1
            """, logger: logger
        ).collect().count
    }

    public func leasePendingProofs(of transactionID: String?, limit: Int, until: Date, now: Date) async throws -> [PendingProof] {
        try await database.read { connection in
            // SKIP LOCKED: a run that is leasing the same rows right now is passed over, not waited for.
            let leased = try await LedgerRows.decode(
                PendingProof.self,
                try await connection.query(
                    """
                    UPDATE pending_proofs p SET leased_until = \(Timestamp(until)) WHERE p.id IN
                      (SELECT id FROM pending_proofs WHERE status = 'pending' AND (leased_until IS NULL OR leased_until <= \(Timestamp(now)))
                       AND (\(transactionID)::text IS NULL OR transaction_id = \(transactionID))
                       ORDER BY id LIMIT \(max(0, limit)) FOR UPDATE SKIP LOCKED)
                    RETURNING \(unescaped: LedgerRows.pendingProof)
                    """, logger: logger))
            return leased.sorted { ($0.id ?? 0) < ($1.id ?? 0) }
        }
    }
}
