import Foundation
import GRDB

/// The `Ledger` on SQLite, through GRDB: each change is one write transaction.
public struct SQLiteLedger: Ledger {
    public let database: AppDatabase

    public init(database: AppDatabase) {
        self.database = database
    }

    public func fulfilment(_ transactionID: String) async throws -> Fulfilment? {
        try await database.writer.read { db in try Fulfilment.fetchOne(db, key: transactionID) }
    }

    public func isRevoked(originalTransactionID: String) async throws -> Bool {
        try await database.writer.read { db in
            try Fulfilment
                .filter(Fulfilment.Columns.originalTransactionID == originalTransactionID && Fulfilment.Columns.state == FulfilmentState.revoked.rawValue)
                .fetchCount(db) > 0
        }
    }

    public func recordVerified(_ record: VerifiedRecord, countAttempt: Bool) async throws -> Fulfilment {
        try await database.writer.write { db in
            let now = Date()
            guard var row = try Fulfilment.fetchOne(db, key: record.transactionID) else {
                var row = Self.newRow(record, state: .verified, at: now)
                row.verifiedAt = now
                row.attempts = countAttempt ? 1 : 0
                try row.insert(db)
                return row
            }
            if !row.state.isEntitled { try Self.move(&row, to: .verified, at: now) }
            row.verifiedAt = now
            row.originalTransactionID = record.originalTransactionID
            row.environment = record.environment ?? row.environment
            row.proofKind = record.proofKind
            row.proof = record.proof
            row.lastError = nil
            row.updatedAt = now
            if countAttempt { row.attempts += 1 }
            try row.update(db)
            return row
        }
    }

    public func recordPending(_ record: VerifiedRecord, error: String) async throws -> Fulfilment {
        try await database.writer.write { db in
            let now = Date()
            guard var row = try Fulfilment.fetchOne(db, key: record.transactionID) else {
                var row = Self.newRow(record, state: .pending, at: now)
                row.attempts = 1
                row.lastError = error
                try row.insert(db)
                return row
            }
            // The first proof stays: a later request cannot swap a pending transaction's receipt.
            row.attempts += 1
            row.lastError = error
            row.updatedAt = now
            try row.update(db)
            return row
        }
    }

    public func countAttempt(_ transactionID: String) async throws {
        try await database.writer.write { db in
            try db.execute(
                sql: "UPDATE fulfilments SET attempts = attempts + 1, updated_at = ? WHERE transaction_id = ?",
                arguments: [Date(), transactionID])
            guard db.changesCount == 1 else { throw LedgerError.unknownTransaction(transactionID) }
        }
    }

    public func transition(_ transactionID: String, to state: FulfilmentState, error: String?) async throws -> Fulfilment {
        try await database.writer.write { db in
            guard var row = try Fulfilment.fetchOne(db, key: transactionID) else { throw LedgerError.unknownTransaction(transactionID) }
            let now = Date()
            if row.state != state {
                try Self.move(&row, to: state, at: now)
                if state == .verified { row.verifiedAt = now }
            }
            if let error { row.lastError = error }
            row.updatedAt = now
            try row.update(db)
            return row
        }
    }

    public func revokePurchase(originalTransactionID: String, reason: String) async throws -> [Fulfilment] {
        try await database.writer.write { db in
            let now = Date()
            var changed: [Fulfilment] = []
            let rows = try Fulfilment.filter(Fulfilment.Columns.originalTransactionID == originalTransactionID).fetchAll(db)
            for var row in rows where row.state != .revoked {
                try Self.move(&row, to: .revoked, at: now)
                row.lastError = reason
                row.updatedAt = now
                try row.update(db)
                changed.append(row)
            }
            return changed
        }
    }

    public func recordDelivery(_ transactionID: String, report: DeliveryReport, fileSize: Int64) async throws {
        try await database.writer.write { db in
            guard var row = try Fulfilment.fetchOne(db, key: transactionID) else { throw LedgerError.unknownTransaction(transactionID) }
            let now = Date()
            var attempt = DownloadAttempt(
                id: nil, transactionID: transactionID, rangeStart: report.range?.lowerBound, rangeEnd: report.range?.upperBound,
                bytes: report.bytesSent, outcome: report.complete ? .complete : .interrupted, at: now)
            try attempt.insert(db)
            row.bytesDelivered += report.bytesSent
            let reachedEnd = (report.range?.upperBound ?? -1) == fileSize - 1
            if report.complete, reachedEnd, row.state == .verified {
                try Self.move(&row, to: .delivered, at: now)
            }
            row.updatedAt = now
            try row.update(db)
        }
    }

    public func applyNotification(_ notification: NotificationRecord, effect: NotificationEffect) async throws -> Bool {
        try await database.writer.write { db in
            let seen = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM notifications WHERE notification_uuid = ?", arguments: [notification.uuid]) ?? 0
            guard seen == 0 else { return false }
            let now = Date()
            var outcome = "recorded"
            switch effect {
            case .revoke(let record, let reason):
                try Self.revoke(record, reason: reason, in: db, at: now)
                outcome = "revoked"
            case .reinstate(let original):
                let rows = try Fulfilment.filter(Fulfilment.Columns.originalTransactionID == original).fetchAll(db)
                for var row in rows where row.state == .revoked {
                    try Self.move(&row, to: .verified, at: now)
                    row.verifiedAt = now
                    row.lastError = "refund reversed"
                    row.updatedAt = now
                    try row.update(db)
                }
                outcome = "reinstated"
            case .none:
                break
            }
            try db.execute(
                sql: """
                    INSERT INTO notifications (notification_uuid, notification_type, subtype, transaction_id, original_transaction_id, outcome, received_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [notification.uuid, notification.type, notification.subtype, notification.transactionID, notification.originalTransactionID, outcome, now])
            return true
        }
    }

    public func recordRevoked(_ record: VerifiedRecord, reason: String) async throws {
        try await database.writer.write { db in try Self.revoke(record, reason: reason, in: db, at: Date()) }
    }

    /// Records `record` as revoked if unseen, and revokes every transaction of its purchase.
    private static func revoke(_ record: VerifiedRecord, reason: String, in db: Database, at now: Date) throws {
        if try Fulfilment.fetchOne(db, key: record.transactionID) == nil {
            var row = newRow(record, state: .revoked, at: now)
            row.revokedAt = now
            row.lastError = reason
            try row.insert(db)
        }
        let rows = try Fulfilment.filter(Fulfilment.Columns.originalTransactionID == record.originalTransactionID).fetchAll(db)
        for var row in rows where row.state != .revoked {
            try move(&row, to: .revoked, at: now)
            row.lastError = reason
            row.updatedAt = now
            try row.update(db)
        }
    }

    public func list(_ filter: FulfilmentFilter) async throws -> [Fulfilment] {
        try await database.writer.read { db in
            var request = Fulfilment.all()
            if let states = filter.states { request = request.filter(states.map(\.rawValue).contains(Fulfilment.Columns.state)) }
            if let product = filter.productID { request = request.filter(Fulfilment.Columns.productID == product) }
            if let since = filter.since { request = request.filter(Fulfilment.Columns.updatedAt >= since) }
            return try request.order(Fulfilment.Columns.updatedAt.desc).limit(filter.limit).fetchAll(db)
        }
    }

    public func attempts(of transactionID: String) async throws -> [DownloadAttempt] {
        try await database.writer.read { db in
            try DownloadAttempt.filter(Column("transaction_id") == transactionID).order(Column("id")).fetchAll(db)
        }
    }

    private static func newRow(_ record: VerifiedRecord, state: FulfilmentState, at now: Date) -> Fulfilment {
        Fulfilment(
            transactionID: record.transactionID, originalTransactionID: record.originalTransactionID,
            productID: record.productID, bundleID: record.bundleID, environment: record.environment,
            proofKind: record.proofKind, proof: record.proof, state: state, verifiedAt: nil, attempts: 0,
            bytesDelivered: 0, lastError: nil, createdAt: now, updatedAt: now, deliveredAt: nil,
            acknowledgedAt: nil, revokedAt: nil)
    }

    /// The one place a state changes: checks the machine, stamps the matching time.
    private static func move(_ row: inout Fulfilment, to state: FulfilmentState, at now: Date) throws {
        guard row.state.allowedNext.contains(state) else {
            throw LedgerError.illegalTransition(transactionID: row.transactionID, from: row.state, to: state)
        }
        row.state = state
        switch state {
        case .delivered: row.deliveredAt = now
        case .acknowledged: row.acknowledgedAt = now
        case .revoked: row.revokedAt = now
        case .verified, .pending, .rejected: break
        }
    }
}
