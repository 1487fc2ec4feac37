import Foundation

/// What an engine gives the ledger's shared code: one statement run in a database transaction of
/// its own, several statements run in one (`LedgerTransaction`), and its dialect. Every view,
/// lease, write and flow of the ledger is then written once, here and in `LedgerTransaction.swift`.
public protocol LedgerStatementRunner: Sendable {
    var dialect: LedgerDialect { get }

    /// Runs `statement` alone (a SELECT on a reader, anything else as a write) and reads each row
    /// it returns as `Record`.
    func fetch<Record: LedgerRecord>(_ statement: LedgerStatement, as type: Record.Type) async throws -> [Record]

    /// Runs `body` in one database transaction of `kind`, committed when it returns and rolled
    /// back when it throws. An engine may run it again whole after a serialisation conflict.
    func transaction<Value: Sendable>(_ kind: LedgerTransactionKind, _ body: @escaping @Sendable (any LedgerTransaction) throws -> Value)
        async throws -> Value
}

/// What a transaction is for, which decides how an engine runs it.
public enum LedgerTransactionKind: Sendable {
    /// A flow's reads and writes, within the engine's call timeout.
    case write
    /// Reads only, every one from one consistent snapshot, with no time bound (an export).
    case snapshot
    /// A whole ledger written, with no time bound (an import).
    case bulk
}

extension LedgerStatementRunner {
    func transaction<Value: Sendable>(_ body: @escaping @Sendable (any LedgerTransaction) throws -> Value) async throws -> Value {
        try await transaction(.write, body)
    }
}

extension LedgerStatementRunner {
    /// Runs `statement`; returns how many rows it returned (`RETURNING`).
    @discardableResult
    public func execute(_ statement: LedgerStatement) async throws -> Int {
        try await fetch(statement, as: ReturnedRow.self).count
    }

    func count(_ statement: LedgerStatement) async throws -> Int {
        try await fetch(statement, as: Count.self).first?.count ?? 0
    }
}

extension LedgerViews where Self: LedgerStatementRunner {
    public func fulfilment(_ transactionID: String) async throws -> Fulfilment? {
        try await fetch(.fulfilment(transactionID), as: Fulfilment.self).first
    }

    public func list(_ filter: FulfilmentListQuery) async throws -> [Fulfilment] {
        try await fetch(.fulfilments(filter), as: Fulfilment.self)
    }

    public func attempts(of transactionID: String) async throws -> [DownloadAttempt] {
        try await fetch(.attempts(of: transactionID), as: DownloadAttempt.self)
    }

    public func stateCounts() async throws -> [FulfilmentState: Int] {
        var counts: [FulfilmentState: Int] = [:]
        for group in try await fetch(.stateCounts, as: NamedCount.self) {
            if let state = FulfilmentState(rawValue: group.name) { counts[state] = group.count }
        }
        return counts
    }
}

extension LedgerViews where Self: LedgerStatementRunner {
    public func deliveriesPerHour(since: Date) async throws -> [HourlyDeliveries] {
        try await fetch(.hourlyDeliveries(since: since, dialect), as: HourlyDeliveries.self)
    }

    public func productTallies(limit: Int) async throws -> ProductTallies {
        let statements = LedgerStatement.productTallies(limit: limit, dialect)
        var rows = try await fetch(statements.top, as: ProductTallyRow.self)
        // No product listed: an empty ledger (totals 0), or a limit of 0, which lists none.
        if rows.isEmpty, limit > 0 { return ProductTallies(top: [], fulfilments: 0, bytesDelivered: 0) }
        if rows.isEmpty { rows = try await fetch(statements.totals, as: ProductTallyRow.self) }
        return ProductTallies(
            top: rows.compactMap(\.tally), fulfilments: rows.first?.totalCount ?? 0, bytesDelivered: rows.first?.totalBytes ?? 0)
    }

    public func fulfilmentPage(_ query: FulfilmentPageQuery) async throws -> FulfilmentPage {
        let statements = LedgerStatement.fulfilmentPage(query, dialect)
        let page = try await fetch(statements.page, as: Paged<Fulfilment>.self)
        // An empty first page: nothing matches. Past the last page, the total is counted alone.
        guard let first = page.first else {
            return FulfilmentPage(rows: [], total: query.offset == 0 ? 0 : try await count(statements.count))
        }
        return FulfilmentPage(rows: page.map(\.record), total: first.total)
    }

    public func notifications(transactionID: String, originalTransactionID: String, limit: Int) async throws -> [NotificationRecord] {
        let statement = LedgerStatement.notifications(
            transactionID: transactionID, originalTransactionID: originalTransactionID, limit: limit, dialect)
        return try await fetch(statement, as: NotificationRecord.self)
    }
}

extension PendingProofQueue where Self: LedgerStatementRunner {
    public func pendingProofs(status: PendingProof.Status?, limit: Int) async throws -> [PendingProof] {
        try await fetch(.pendingProofs(status: status, limit: limit), as: PendingProof.self)
    }

    public func pendingProofs(keptUnder transactionID: String, limit: Int) async throws -> [PendingProof] {
        try await fetch(.pendingProofs(keptUnder: transactionID, limit: limit), as: PendingProof.self)
    }

    public func purgeRejectedPendingProofs(before: Date, limit: Int) async throws -> Int {
        try await execute(.purgeRejectedPendingProofs(before: before, limit: limit, dialect))
    }

    public func leasePendingProofs(of transactionID: String?, limit: Int, until: Date, now: Date) async throws -> [PendingProof] {
        try await fetch(.leasePendingProofs(of: transactionID, limit: limit, until: until, now: now, dialect), as: PendingProof.self)
            .sorted { ($0.id ?? 0) < ($1.id ?? 0) }
    }

    public func rejectPendingProof(id: Int64, reason: String, now: Date) async throws {
        try await execute(.settlePendingProof(id: id, rejected: true, error: reason, now: now))
    }

    public func notePendingProof(id: Int64, error: String, now: Date) async throws {
        try await execute(.settlePendingProof(id: id, rejected: false, error: error, now: now))
    }
}

extension ServerCallQueue where Self: LedgerStatementRunner {
    /// How long a queued call this build cannot read is set aside before it is leased again.
    static var unreadableRest: TimeInterval { 3600 }

    public func leaseServerCalls(limit: Int, until: Date, now: Date) async throws -> [ServerCall] {
        // The sender asks every few seconds: an idle queue is only read.
        guard try await count(.dueServerCalls(now: now)) > 0 else { return [] }
        var calls: [ServerCall] = []
        for leased in try await fetch(.leaseServerCalls(limit: limit, until: until, now: now, dialect), as: Readable<ServerCall>.self) {
            switch leased.record {
            case .success(let call): calls.append(call)
            case .failure(let unreadable):
                // A row this build cannot read (a value a newer instance wrote) must not stop the
                // queue: it stays queued for an instance that can, set aside for an hour with its reason.
                try await execute(.setAside(serverCall: leased.id, reason: unreadable.description, until: now + Self.unreadableRest))
            }
        }
        return calls.sorted { ($0.dueAt, $0.id ?? 0) < ($1.dueAt, $1.id ?? 0) }
    }

    public func serverCalls(_ filter: ServerCallListQuery) async throws -> [ServerCall] {
        try await fetch(.serverCalls(filter), as: ServerCall.self)
    }
}

extension NotificationLog where Self: LedgerStatementRunner {
    public func notificationSeen(_ uuid: String) async throws -> Bool {
        try await count(.notificationRecorded(uuid)) > 0
    }

    public func recordNotification(_ notification: NotificationRecord, outcome: String, now: Date) async throws -> Bool {
        var recorded = notification
        recorded.outcome = outcome
        recorded.receivedAt = now
        return try await execute(.record(recorded)) == 1
    }

    public func storedNotification(_ uuid: String) async throws -> NotificationRecord? {
        try await fetch(.notification(uuid), as: NotificationRecord.self).first
    }
}
