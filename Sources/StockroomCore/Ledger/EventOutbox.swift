import Foundation

/// The ledger's event log and its deliveries to webhook endpoints: an outbox. Events are written
/// with the changes they report (`LedgerWrites.events`, `ServerCall.settlement`); a sender then
/// queues a delivery of each to each configured endpoint (`fanOut`) and leases them, one sender at
/// a time, in order per transaction and endpoint.
public protocol EventOutbox: Sendable {
    /// A transaction's events, oldest first, at most `limit`.
    func events(of transactionID: String, limit: Int) async throws -> [LedgerEvent]
    /// Queues a delivery to each of `endpoints` of up to `limit` events not fanned out yet, oldest
    /// first, and marks them fanned out; returns how many events. One fan-out runs at a time
    /// across instances. With no endpoint, events are only marked.
    func fanOut(to endpoints: [String], limit: Int, now: Date) async throws -> Int
    /// Marks up to `limit` events written before `before` as handled with no delivery queued: what
    /// an instance with no endpoint does, so that an endpoint added later is sent only the recent past.
    func markEventsHandled(before: Date, limit: Int) async throws -> Int
    /// Up to `limit` due deliveries to `endpoint` that no other sender holds and that no earlier
    /// queued event of their transaction waits before, oldest first, now held until `until`.
    func leaseWebhookDeliveries(endpoint: String, limit: Int, until: Date, now: Date) async throws -> [LeasedDelivery]
    /// Settles a delivery leased until `lease` (its lease is the token: a sender whose lease ran
    /// out, and another took the delivery, settles nothing); nil settles whoever holds it.
    func completeWebhookDelivery(_ id: Int64, _ result: WebhookDeliveryResult, lease: Date?, now: Date) async throws
    /// Deliveries on record, newest first.
    func webhookDeliveries(_ query: WebhookDeliveryQuery) async throws -> [ListedDelivery]
    /// Queues a parked or sent delivery again, due now, its tries counted afresh; false when no
    /// delivery has this ID or it is queued already (one in flight is not taken from its sender).
    func redeliver(_ id: Int64, now: Date) async throws -> Bool
    /// Each endpoint's queue at a glance; `countingSent` false leaves the sent ones uncounted (a
    /// count of every delivery kept, which the sender's gauges do not need every second).
    func webhookStats(endpoints: [String], countingSent: Bool) async throws -> [WebhookQueueStats]
    /// Deletes up to `limit` events written before `before`, with their deliveries, sparing any
    /// with a delivery still queued; returns how many.
    func purgeEvents(before: Date, limit: Int) async throws -> Int
    /// Parks the deliveries queued before `before` to an endpoint not in `endpoints` (one no longer
    /// configured): they are never leased, and would hold their events past the retention.
    func parkAbandonedDeliveries(keeping endpoints: [String], queuedBefore before: Date, now: Date) async throws -> Int
}

extension EventOutbox {
    /// Each endpoint's queue at a glance, sent deliveries counted.
    public func webhookStats(endpoints: [String]) async throws -> [WebhookQueueStats] {
        try await webhookStats(endpoints: endpoints, countingSent: true)
    }
}

extension LedgerStatement {
    /// A transaction's events, oldest first.
    public static func events(of transactionID: String, limit: Int) -> LedgerStatement {
        LedgerStatement("SELECT * FROM ledger_events WHERE transaction_id = ?1 ORDER BY sequence LIMIT ?2", [transactionID, max(0, limit)])
    }

    /// Marks up to `limit` events not fanned out yet, written before `before`, oldest first;
    /// returns their IDs, transactions and sequences.
    static func markFannedOut(limit: Int, before: Date, _ dialect: LedgerDialect) -> LedgerStatement {
        LedgerStatement(
            """
            UPDATE ledger_events SET fanned_out = ?1 WHERE id IN
              (SELECT id FROM ledger_events WHERE fanned_out = ?2 AND created_at < ?4 ORDER BY id LIMIT ?3)
            RETURNING id, transaction_id, sequence
            """, [true, false, max(0, limit), before])
    }

    /// Queues one event's delivery to one endpoint, once.
    static func queue(_ delivery: WebhookDelivery) -> LedgerStatement {
        insert(delivery, onConflict: "(endpoint, event) DO NOTHING RETURNING 1")
    }

    /// Holds until `until` up to `limit` due deliveries to `endpoint`, each the first queued of its
    /// transaction for that endpoint, oldest first; returns them. Only the first in line of each
    /// are read (`head_of_line`, in the index of those): what waits behind one costs nothing here,
    /// however many there are. The order is still checked, row by row, on what is leased.
    static func leaseWebhookDeliveries(endpoint: String, limit: Int, until: Date, now: Date, _ dialect: LedgerDialect) -> LedgerStatement {
        LedgerStatement(
            """
            UPDATE webhook_deliveries SET leased_until = ?1 WHERE id IN
              (SELECT d.id FROM webhook_deliveries d
               WHERE d.endpoint = ?4 AND d.status = 'queued' AND d.head_of_line AND d.due_at <= ?2
                 AND (d.leased_until IS NULL OR d.leased_until <= ?2)
                 AND NOT EXISTS (SELECT 1 FROM webhook_deliveries e WHERE e.endpoint = d.endpoint
                   AND e.transaction_id = d.transaction_id AND e.sequence < d.sequence AND e.status = 'queued')
               ORDER BY d.due_at, d.id LIMIT ?3\(dialect.skipLocked))
            RETURNING *
            """, [until, now, max(0, limit), endpoint])
    }

    /// Whether any delivery to `endpoint` first in line is due and free (`count` 0 or 1): an idle
    /// queue is only read, from the index of those first in line. In its order: PostgreSQL, which
    /// weighs each condition apart, would otherwise expect the first row a table scan meets to be
    /// due (most queued deliveries are due by their own time, but not first in line).
    static func dueWebhookDeliveries(endpoint: String, now: Date) -> LedgerStatement {
        LedgerStatement(
            """
            SELECT COUNT(*) AS count FROM (SELECT 1 FROM webhook_deliveries WHERE endpoint = ?2 AND status = 'queued' AND head_of_line
              AND due_at <= ?1 AND (leased_until IS NULL OR leased_until <= ?1) ORDER BY due_at LIMIT 1) AS due
            """, [now, endpoint])
    }

    /// Marks, among the deliveries to `endpoint` of `transactionID` (a line), the first queued (no
    /// earlier one of the line queued) as `head_of_line` and no other: what every change to the
    /// line ends with (a delivery queued, settled, parked, queued again). Only a row whose mark is
    /// wrong is written; the line is found by its own index, whatever the queue holds.
    static func markHeadOfLine(endpoint: String, transactionID: String) -> LedgerStatement {
        LedgerStatement(
            "UPDATE webhook_deliveries SET head_of_line = NOT head_of_line WHERE endpoint = ?1 AND transaction_id = ?2 AND \(wrongMark)",
            [endpoint, transactionID])
    }

    /// The same for every line: after an import, whose rows carry no mark.
    static var markEveryHeadOfLine: LedgerStatement {
        LedgerStatement("UPDATE webhook_deliveries SET head_of_line = NOT head_of_line WHERE \(wrongMark)", [])
    }

    /// Whether a delivery's mark is wrong: it is first in line when it is queued and no delivery of
    /// its line earlier in its transaction's sequence is.
    private static let wrongMark = """
        head_of_line <> (status = 'queued' AND NOT EXISTS (SELECT 1 FROM webhook_deliveries e WHERE e.endpoint = webhook_deliveries.endpoint
          AND e.transaction_id = webhook_deliveries.transaction_id AND e.sequence < webhook_deliveries.sequence AND e.status = 'queued'))
        """

    /// Whether any event waits to be fanned out (`count` 0 or 1).
    static var eventsToFanOut: LedgerStatement {
        LedgerStatement("SELECT COUNT(*) AS count FROM (SELECT 1 FROM ledger_events WHERE fanned_out = ?1 LIMIT 1) AS waiting", [false])
    }

    /// The events with these IDs.
    static func eventBodies(_ ids: [Int64]) -> LedgerStatement {
        let placeholders = ids.indices.map { "?\($0 + 1)" }.joined(separator: ", ")
        return LedgerStatement(
            "SELECT id, event_id, type, transaction_id, sequence, body, created_at FROM ledger_events WHERE id IN (\(placeholders))", ids)
    }

    /// One delivery.
    static func webhookDelivery(_ id: Int64) -> LedgerStatement {
        LedgerStatement("SELECT * FROM webhook_deliveries WHERE id = ?1", [id])
    }

    /// Writes a delivery as `WebhookDelivery.apply(_:now:)` left it (which releases its lease).
    static func settle(_ delivery: WebhookDelivery) -> LedgerStatement {
        LedgerStatement(
            """
            UPDATE webhook_deliveries SET status = ?2, attempts = ?3, due_at = ?4, leased_until = NULL, last_error = ?5,
              last_status = ?6, updated_at = ?7, sent_at = ?8
            WHERE id = ?1
            """,
            [
                delivery.id, delivery.status, delivery.attempts, delivery.dueAt, delivery.lastError, delivery.lastStatus,
                delivery.updatedAt, delivery.sentAt,
            ])
    }

    /// A queued delivery this build cannot read, kept queued but not leased again before `until`.
    static func setAside(webhookDelivery id: Int64, reason: String, until: Date) -> LedgerStatement {
        LedgerStatement(
            "UPDATE webhook_deliveries SET leased_until = ?2, last_error = ?3 WHERE id = ?1 AND status = 'queued' RETURNING 1",
            [id, until, "set aside: this build cannot read it (\(reason))"])
    }

    /// Deliveries matching `query`, newest first, with their events' IDs and types.
    static func webhookDeliveries(_ query: WebhookDeliveryQuery) -> LedgerStatement {
        var filters = Filters()
        if let endpoint = query.endpoint { filters.add("d.endpoint = ?", [endpoint]) }
        if let status = query.status { filters.add("d.status = ?", [status]) }
        if let transactionID = query.transactionID { filters.add("d.transaction_id = ?", [transactionID]) }
        return filters.statement(
            "SELECT d.*, e.event_id AS event_uuid, e.type AS event_type FROM webhook_deliveries d JOIN ledger_events e ON e.id = d.event",
            then: "ORDER BY d.id DESC LIMIT ?", [max(0, query.limit)])
    }

    /// Queues a delivery again, due now, its tries counted afresh; returns its line.
    static func redeliver(_ id: Int64, now: Date) -> LedgerStatement {
        LedgerStatement(
            """
            UPDATE webhook_deliveries SET status = 'queued', attempts = 0, due_at = ?2, leased_until = NULL, updated_at = ?2,
              sent_at = NULL, created_at = ?2
            WHERE id = ?1 AND status IN ('parked', 'sent') RETURNING endpoint, transaction_id
            """, [id, now])
    }

    /// Per endpoint and status, how many deliveries, and the oldest one's time; sent ones only
    /// when `countingSent`. Without them, read from the index of status, endpoint and time alone.
    static func webhookStats(countingSent: Bool) -> LedgerStatement {
        LedgerStatement(
            """
            SELECT endpoint, status, COUNT(*) AS count, MIN(created_at) AS oldest FROM webhook_deliveries
            \(countingSent ? "" : "WHERE status IN ('queued', 'parked') ")GROUP BY endpoint, status
            """, [])
    }

    /// Up to `limit` events written before `before` with no delivery queued, oldest first.
    static func purgeableEvents(before: Date, limit: Int) -> LedgerStatement {
        LedgerStatement(
            """
            SELECT id FROM ledger_events e WHERE created_at < ?1
              AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event = e.id AND d.status = 'queued')
            ORDER BY id LIMIT ?2
            """, [before, max(0, limit)])
    }

    /// Deletes these events' deliveries, then the events.
    static func deleteEvents(_ ids: [Int64]) -> [LedgerStatement] {
        let placeholders = ids.indices.map { "?\($0 + 1)" }.joined(separator: ", ")
        return [
            LedgerStatement("DELETE FROM webhook_deliveries WHERE event IN (\(placeholders))", ids),
            LedgerStatement("DELETE FROM ledger_events WHERE id IN (\(placeholders)) RETURNING 1", ids),
        ]
    }

    /// Parks the deliveries queued before `before` to endpoints not in `endpoints`; returns their lines.
    static func parkAbandoned(keeping endpoints: [String], queuedBefore before: Date, now: Date) -> LedgerStatement {
        let kept = endpoints.indices.map { "?\($0 + 4)" }.joined(separator: ", ")
        return LedgerStatement(
            """
            UPDATE webhook_deliveries SET status = 'parked', leased_until = NULL, last_error = ?3, updated_at = ?2
            WHERE status = 'queued' AND created_at < ?1\(endpoints.isEmpty ? "" : " AND endpoint NOT IN (\(kept))")
            RETURNING endpoint, transaction_id
            """, [before, now, "the endpoint is no longer configured"] + endpoints)
    }
}

/// A line of deliveries: one endpoint's of one transaction, sent in the transaction's order.
struct DeliveryLine: LedgerRecord, Hashable {
    var endpoint: String
    var transactionID: String

    init(endpoint: String, transactionID: String) {
        (self.endpoint, self.transactionID) = (endpoint, transactionID)
    }

    init(row: some LedgerCells) throws {
        (endpoint, transactionID) = (try row["endpoint"], try row["transaction_id"])
    }
}

/// An event's row ID.
struct EventRowID: LedgerRecord {
    var id: Int64

    init(row: some LedgerCells) throws {
        id = try row["id"]
    }
}

/// An event fanned out: its ID, transaction and sequence.
struct FannedOutEvent: LedgerRecord {
    var id: Int64
    var transactionID: String
    var sequence: Int

    init(row: some LedgerCells) throws {
        (id, transactionID, sequence) = (try row["id"], try row["transaction_id"], try row["sequence"])
    }
}

/// What a sender needs of an event: read apart from its type's meaning, so that an event a newer
/// instance wrote (a type this build does not know) is still sent, verbatim.
struct EventBody: LedgerRecord {
    var id: Int64
    var eventID: String
    var type: String
    var transactionID: String
    var sequence: Int
    var body: String
    var createdAt: Date

    init(row: some LedgerCells) throws {
        (id, eventID, type, body) = (try row["id"], try row["event_id"], try row["type"], try row["body"])
        (transactionID, sequence, createdAt) = (try row["transaction_id"], try row["sequence"], try row["created_at"])
    }
}

/// A delivery with its event's ID and type, as listed.
struct ListedDeliveryRow: LedgerRecord {
    var listed: ListedDelivery

    init(row: some LedgerCells) throws {
        let type: String = try row["event_type"]
        listed = ListedDelivery(delivery: try WebhookDelivery(row: row), eventID: try row["event_uuid"], type: type)
    }
}

/// Deliveries of one endpoint in one status.
struct WebhookStatsRow: LedgerRecord {
    var endpoint: String
    var status: String
    var count: Int
    var oldest: Date?

    init(row: some LedgerCells) throws {
        (endpoint, status, count, oldest) = (try row["endpoint"], try row["status"], try row["count"], try row["oldest"])
    }
}

extension EventOutbox where Self: LedgerStatementRunner {
    /// How long a queued delivery this build cannot read is set aside before it is leased again.
    static var unreadableDeliveryRest: TimeInterval { 3600 }

    /// The lock of the lines' marks (`head_of_line`): the fan-out takes it alone, and what settles,
    /// parks or queues a delivery again takes it shared. On PostgreSQL each statement reads what
    /// was committed when it began: a fan-out that saw an earlier delivery still queued, and a
    /// settlement that did not yet see the fan-out's new one, would leave that one unmarked,
    /// never leased.
    static var linesLock: String { "webhooks:fan-out" }

    /// Marks each of `lines` afresh.
    private static func markHeadsOfLine(_ lines: some Sequence<DeliveryLine>, _ transaction: any LedgerTransaction) throws {
        for line in Set(lines) {
            try transaction.execute(.markHeadOfLine(endpoint: line.endpoint, transactionID: line.transactionID))
        }
    }

    public func events(of transactionID: String, limit: Int) async throws -> [LedgerEvent] {
        try await fetch(.events(of: transactionID, limit: limit), as: LedgerEvent.self)
    }

    public func fanOut(to endpoints: [String], limit: Int, now: Date) async throws -> Int {
        try await fanOut(to: endpoints, before: .distantFuture, limit: limit, now: now)
    }

    public func markEventsHandled(before: Date, limit: Int) async throws -> Int {
        try await fanOut(to: [], before: before, limit: limit, now: Date())
    }

    private func fanOut(to endpoints: [String], before: Date, limit: Int, now: Date) async throws -> Int {
        guard try await count(.eventsToFanOut) > 0 else { return 0 }
        let dialect = dialect
        return try await transaction { transaction in
            // One fan-out at a time: two instances marking the same events would queue nothing twice
            // (the deliveries are unique), but one must not pass over an event the other holds.
            try transaction.lock(Self.linesLock)
            let events = try transaction.fetch(.markFannedOut(limit: limit, before: before, dialect), as: FannedOutEvent.self)
            var lines: [DeliveryLine] = []
            for event in events.sorted(by: { $0.id < $1.id }) {
                for endpoint in endpoints {
                    let delivery = WebhookDelivery(
                        id: nil, event: event.id, endpoint: endpoint, transactionID: event.transactionID, sequence: event.sequence,
                        status: .queued, attempts: 0, dueAt: now, leasedUntil: nil, lastError: nil, lastStatus: nil, createdAt: now,
                        updatedAt: now, sentAt: nil)
                    if try transaction.execute(.queue(delivery)) > 0 {
                        lines.append(DeliveryLine(endpoint: endpoint, transactionID: event.transactionID))
                    }
                }
            }
            try Self.markHeadsOfLine(lines, transaction)
            return events.count
        }
    }

    public func leaseWebhookDeliveries(endpoint: String, limit: Int, until: Date, now: Date) async throws -> [LeasedDelivery] {
        guard try await count(.dueWebhookDeliveries(endpoint: endpoint, now: now)) > 0 else { return [] }
        var deliveries: [WebhookDelivery] = []
        let statement = LedgerStatement.leaseWebhookDeliveries(endpoint: endpoint, limit: limit, until: until, now: now, dialect)
        for leased in try await fetch(statement, as: Readable<WebhookDelivery>.self) {
            switch leased.record {
            case .success(let delivery): deliveries.append(delivery)
            case .failure(let unreadable):
                // As with calls owed to Apple: one row this build cannot read must not stop the queue.
                let until = now + Self.unreadableDeliveryRest
                try await execute(.setAside(webhookDelivery: leased.id, reason: unreadable.description, until: until))
            }
        }
        guard !deliveries.isEmpty else { return [] }
        let bodies = try await fetch(.eventBodies(deliveries.map(\.event)), as: EventBody.self)
        let byID = Dictionary(bodies.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        return deliveries.sorted { ($0.dueAt, $0.id ?? 0) < ($1.dueAt, $1.id ?? 0) }.compactMap { delivery in
            // The event is deleted with its deliveries: one missing was purged after this lease; it is
            // not sent. Nor is one whose ID a later event took since (SQLite reuses the highest rowid
            // once it is purged): the delivery names its transaction and sequence, and they must match.
            guard let event = byID[delivery.event], event.transactionID == delivery.transactionID, event.sequence == delivery.sequence
            else { return nil }
            return LeasedDelivery(
                delivery: delivery, eventID: event.eventID, type: event.type, body: event.body, eventCreatedAt: event.createdAt)
        }
    }

    public func completeWebhookDelivery(_ id: Int64, _ result: WebhookDeliveryResult, lease: Date?, now: Date) async throws {
        try await transaction { transaction in
            try transaction.lock(Self.linesLock, shared: true)
            guard var delivery = try transaction.fetch(.webhookDelivery(id), as: WebhookDelivery.self, locking: true).first,
                delivery.status == .queued
            else { return }
            // Times round to the millisecond in SQLite: the lease is the same one within that.
            if let lease, abs((delivery.leasedUntil ?? .distantPast).timeIntervalSince(lease)) > 0.002 { return }
            delivery.apply(result, now: now)
            try transaction.execute(.settle(delivery))
            // Out of the queue: the next of its line is first now.
            if delivery.status != .queued {
                try Self.markHeadsOfLine([DeliveryLine(endpoint: delivery.endpoint, transactionID: delivery.transactionID)], transaction)
            }
        }
    }

    public func webhookDeliveries(_ query: WebhookDeliveryQuery) async throws -> [ListedDelivery] {
        try await fetch(.webhookDeliveries(query), as: ListedDeliveryRow.self).map(\.listed)
    }

    public func redeliver(_ id: Int64, now: Date) async throws -> Bool {
        try await transaction { transaction in
            try transaction.lock(Self.linesLock, shared: true)
            // Queued again, it may come before the one first in its line until now.
            let lines = try transaction.fetch(.redeliver(id, now: now), as: DeliveryLine.self)
            try Self.markHeadsOfLine(lines, transaction)
            return lines.count == 1
        }
    }

    public func webhookStats(endpoints: [String], countingSent: Bool) async throws -> [WebhookQueueStats] {
        var stats = Dictionary(uniqueKeysWithValues: endpoints.map { ($0, WebhookQueueStats(endpoint: $0)) })
        for row in try await fetch(.webhookStats(countingSent: countingSent), as: WebhookStatsRow.self) {
            var entry = stats[row.endpoint] ?? WebhookQueueStats(endpoint: row.endpoint)
            switch WebhookDelivery.Status(rawValue: row.status) {
            case .queued:
                entry.queued = row.count
                entry.oldestQueuedAt = row.oldest
            case .sent: entry.sent = row.count
            case .parked: entry.parked = row.count
            case nil: continue
            }
            stats[row.endpoint] = entry
        }
        return stats.values.sorted { $0.endpoint < $1.endpoint }
    }

    public func purgeEvents(before: Date, limit: Int) async throws -> Int {
        try await transaction { transaction in
            let ids = try transaction.fetch(.purgeableEvents(before: before, limit: limit), as: EventRowID.self).map(\.id)
            guard !ids.isEmpty else { return 0 }
            let statements = LedgerStatement.deleteEvents(ids)
            try transaction.execute(statements[0])
            return try transaction.execute(statements[1])
        }
    }

    public func parkAbandonedDeliveries(keeping endpoints: [String], queuedBefore before: Date, now: Date) async throws -> Int {
        try await transaction { transaction in
            try transaction.lock(Self.linesLock, shared: true)
            // What was queued since in the same lines (another instance may still send them) is first now.
            let lines = try transaction.fetch(.parkAbandoned(keeping: endpoints, queuedBefore: before, now: now), as: DeliveryLine.self)
            try Self.markHeadsOfLine(lines, transaction)
            return lines.count
        }
    }
}
