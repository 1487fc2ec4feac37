import Foundation
import PostgresNIO
import StockroomCore

/// Proofs kept while the App Store cannot be asked: apart from entitlements, bounded per transaction, per client and in total.
extension PostgresLedger {
    public func keepPendingProof(_ draft: PendingProofDraft, bounds: PendingProofBounds, now: Date) async throws -> PendingProofKeeping {
        try await database.transaction { connection in
            // The bounds count every kept proof (per transaction, per client, in all): keeps run one at a time.
            try await connection.query("SELECT pg_advisory_xact_lock(hashtextextended('pending_proofs', 0))", logger: logger).drain()
            let cutoff = bounds.purgeCutoff(now: now)
            try await execute(.purgeRejectedPendingProofs(before: cutoff, limit: PendingProofBounds.purgeBatch, .postgres), on: connection)
            if try await execute(.refresh(draft, now: now), on: connection) > 0 { return .refreshed }
            let kept = try await fetch(.pendingProofCounts(draft), as: PendingProofCounts.self, on: connection)
            let verdict = try bounds.admit(draft, counted: kept)
            guard verdict == .kept else { return verdict }
            try await execute(.insert(PendingProof(draft, now: now)), on: connection)
            return .kept
        }
    }
}
