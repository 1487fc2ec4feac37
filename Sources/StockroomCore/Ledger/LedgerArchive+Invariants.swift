import Foundation

/// What every ledger must hold, whatever its engine: `stockroom ledger check` prints each
/// problem found, and `ledger import` refuses a file that has any.
extension LedgerArchive {
    /// One line per broken invariant, naming the row; empty when the ledger is sound.
    public var problems: [String] {
        var problems: [String] = []
        var purchases: [String: [Fulfilment]] = [:]
        for row in fulfilments {
            purchases[row.originalTransactionID, default: []].append(row)
            problems += Self.problems(of: row).map { "fulfilment \(row.transactionID): \($0)" }
        }
        for (original, rows) in purchases.sorted(by: { $0.key < $1.key }) where rows.contains(where: { $0.state == .revoked }) {
            for row in rows where row.state != .revoked {
                problems.append("fulfilment \(row.transactionID): \(row.state.rawValue), but purchase \(original) is revoked")
            }
        }
        let known = Set(fulfilments.map(\.transactionID))
        var logged: [String: Int] = [:]
        for attempt in attempts {
            logged[attempt.transactionID, default: 0] += 1
            if !known.contains(attempt.transactionID) {
                problems.append("download attempt \(attempt.id ?? 0): no transaction \(attempt.transactionID)")
            }
            if attempt.bytes < 0 { problems.append("download attempt \(attempt.id ?? 0): negative bytes") }
        }
        for (id, count) in logged.sorted(by: { $0.key < $1.key }) where count > DownloadAttempt.keptPerTransaction {
            problems.append("transaction \(id): \(count) download attempts logged, more than \(DownloadAttempt.keptPerTransaction)")
        }
        var kept: [String: Int] = [:]
        for proof in pendingProofs {
            if proof.status == .pending { kept[proof.transactionID, default: 0] += 1 }
            if VerifiedProof.digest(of: proof.proof) != proof.proofDigest {
                problems.append("pending proof \(proof.id ?? 0): digest does not match its proof")
            }
        }
        for (id, count) in kept.sorted(by: { $0.key < $1.key }) where count > PendingProof.perTransaction {
            problems.append("transaction \(id): \(count) pending proofs kept, more than \(PendingProof.perTransaction)")
        }
        if Set(notifications.map(\.uuid)).count != notifications.count { problems.append("notifications: a UUID is recorded twice") }
        if Set(serverCalls.map { "\($0.kind.rawValue) \($0.transactionID)" }).count != serverCalls.count {
            problems.append("server calls: a transaction has two calls of one kind")
        }
        if known.count != fulfilments.count { problems.append("fulfilments: a transaction ID is recorded twice") }
        problems += eventProblems
        return problems
    }

    /// Each event numbered within its transaction's sequence, once; each delivery of an event on record.
    private var eventProblems: [String] {
        var problems: [String] = []
        let sequences = Dictionary(fulfilments.map { ($0.transactionID, $0.eventSequence ?? 0) }, uniquingKeysWith: max)
        for event in events where event.sequence > sequences[event.transactionID] ?? 0 {
            problems.append(
                "event \(event.eventID): sequence \(event.sequence) past its transaction's \(sequences[event.transactionID] ?? 0)")
        }
        if Set(events.map { "\($0.transactionID) \($0.sequence)" }).count != events.count {
            problems.append("events: a transaction has two events with one sequence number")
        }
        let eventIDs = Set(events.compactMap(\.id))
        for delivery in webhookDeliveries where !eventIDs.contains(delivery.event) {
            problems.append("webhook delivery \(delivery.id ?? 0): no event \(delivery.event)")
        }
        return problems
    }

    private static func problems(of row: Fulfilment) -> [String] {
        var problems: [String] = []
        if row.attempts < 0 || row.bytesDelivered < 0 { problems.append("negative attempts or bytes") }
        if row.state == .pending { problems.append("pending: unverified proofs are kept apart, never as fulfilments") }
        if row.state.isEntitled {
            if row.verifiedAt == nil { problems.append("\(row.state.rawValue) but never verified") }
            if let digest = row.proofDigest, digest != VerifiedProof.digest(of: row.proof) {
                problems.append("its proof digest does not match its proof")
            }
        }
        if [.delivered, .acknowledged].contains(row.state), row.deliveredAt == nil {
            problems.append("\(row.state.rawValue) with no delivery time")
        }
        if row.state == .acknowledged, row.acknowledgedAt == nil { problems.append("acknowledged with no acknowledgement time") }
        let caused = row.revokedByOperatorAt != nil || row.revokedByRefundAt != nil
        if row.state == .revoked, !caused { problems.append("revoked with no cause (operator or refund)") }
        if row.state != .revoked, caused { problems.append("\(row.state.rawValue) while a revocation stands") }
        return problems
    }

    /// Whether `other` holds the same rows, times compared to the millisecond (SQLite keeps
    /// milliseconds, PostgreSQL microseconds).
    public func matches(_ other: LedgerArchive) -> Bool {
        guard let mine = try? rounded().jsonLines(), let theirs = try? other.rounded().jsonLines() else { return false }
        return mine == theirs
    }

    private func rounded() -> LedgerArchive {
        func round(_ date: Date) -> Date { Date(timeIntervalSince1970: (date.timeIntervalSince1970 * 1000).rounded() / 1000) }
        var copy = self
        copy.fulfilments = fulfilments.map { row in
            var row = row
            row.createdAt = round(row.createdAt)
            row.updatedAt = round(row.updatedAt)
            row.verifiedAt = row.verifiedAt.map(round)
            row.expiresAt = row.expiresAt.map(round)
            row.deliveredAt = row.deliveredAt.map(round)
            row.acknowledgedAt = row.acknowledgedAt.map(round)
            row.revokedAt = row.revokedAt.map(round)
            row.revokedByOperatorAt = row.revokedByOperatorAt.map(round)
            row.revokedByRefundAt = row.revokedByRefundAt.map(round)
            row.finishedAt = row.finishedAt.map(round)
            row.handedOffAt = row.handedOffAt.map(round)
            return row
        }
        copy.attempts = attempts.map {
            var attempt = $0; attempt.at = round(attempt.at); return attempt
        }
        copy.pendingProofs = pendingProofs.map {
            var proof = $0; proof.createdAt = round(proof.createdAt); proof.updatedAt = round(proof.updatedAt); return proof
        }
        copy.notifications = notifications.map {
            var notification = $0; notification.receivedAt = round(notification.receivedAt); return notification
        }
        copy.serverCalls = serverCalls.map { call in
            var call = call
            call.dueAt = round(call.dueAt)
            call.createdAt = round(call.createdAt)
            call.updatedAt = round(call.updatedAt)
            call.leasedUntil = call.leasedUntil.map(round)
            call.sentAt = call.sentAt.map(round)
            return call
        }
        copy.events = events.map {
            var event = $0; event.createdAt = round(event.createdAt); return event
        }
        copy.webhookDeliveries = webhookDeliveries.map { delivery in
            var delivery = delivery
            delivery.dueAt = round(delivery.dueAt)
            delivery.createdAt = round(delivery.createdAt)
            delivery.updatedAt = round(delivery.updatedAt)
            delivery.leasedUntil = delivery.leasedUntil.map(round)
            delivery.sentAt = delivery.sentAt.map(round)
            return delivery
        }
        copy.consentRescissions = consentRescissions.map {
            var rescission = $0; rescission.rescindedAt = round(rescission.rescindedAt); return rescission
        }
        return copy
    }
}
