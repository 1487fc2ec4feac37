import Foundation

/// The ledger's reads, written once for both engines (see `LedgerStatement`).
extension LedgerStatement {
    /// One transaction's row.
    public static func fulfilment(_ transactionID: String) -> LedgerStatement {
        LedgerStatement("SELECT * FROM fulfilments WHERE transaction_id = ?1", [transactionID])
    }

    /// The transaction's row and every row of its purchase (restores): what a decision on it reads.
    public static func purchase(transactionID: String, originalTransactionID: String) -> LedgerStatement {
        LedgerStatement(
            "SELECT * FROM fulfilments WHERE original_transaction_id = ?1 OR transaction_id = ?2 OR transaction_id = ?1",
            [originalTransactionID, transactionID])
    }

    /// Fulfilments matching `filter`, last changed first.
    public static func fulfilments(_ filter: FulfilmentListQuery) -> LedgerStatement {
        var filters = Filters()
        if let states = filter.states {
            let placeholders = Array(repeating: "?", count: states.count).joined(separator: ", ")
            filters.add(states.isEmpty ? "1 = 0" : "state IN (\(placeholders))", states.map(\.rawValue).sorted())
        }
        if let productID = filter.productID { filters.add("product_id = ?", [productID]) }
        if let since = filter.since { filters.add("updated_at >= ?", [since]) }
        if filter.unfinished {
            filters.add("transaction_id IN (SELECT transaction_id FROM server_calls WHERE kind = 'finish' AND status = 'queued')")
        }
        return filters.statement("SELECT * FROM fulfilments", then: "ORDER BY updated_at DESC LIMIT ?", [max(0, filter.limit)])
    }

    /// A console page of fulfilments, newest first, each row with how many match in all (`total`,
    /// counted in the same read), and that count alone (`count`) for a page past the last.
    public static func fulfilmentPage(_ query: FulfilmentPageQuery, _ dialect: LedgerDialect) -> (
        page: LedgerStatement, count: LedgerStatement
    ) {
        var filters = Filters()
        if let state = query.state { filters.add("state = ?", [state]) }
        if let productID = query.productID { filters.add("product_id = ?", [productID]) }
        if let from = query.from { filters.add("created_at >= ?", [from]) }
        if let to = query.to { filters.add("created_at < ?", [to]) }
        return (
            filters.statement(
                "SELECT *, COUNT(*) OVER () AS total FROM fulfilments",
                then: "ORDER BY created_at DESC, \(dialect.bytewise("transaction_id")) DESC LIMIT ? OFFSET ?",
                [query.pageSize, query.offset]),
            filters.statement("SELECT COUNT(*) AS count FROM fulfilments")
        )
    }

    /// How many fulfilments are in each state (`name`, `count`).
    public static let stateCounts = LedgerStatement("SELECT state AS name, COUNT(*) AS count FROM fulfilments GROUP BY state", [])

    /// The `limit` products with most fulfilments (`name`, `count`, `bytes`), each row with the
    /// ledger's totals counted in the same read (`total_count`, `total_bytes`); `totals` alone
    /// (`name` NULL) when no product is listed.
    public static func productTallies(limit: Int, _ dialect: LedgerDialect) -> (top: LedgerStatement, totals: LedgerStatement) {
        let bytes = "CAST(COALESCE(SUM(bytes_delivered), 0) AS BIGINT)"
        return (
            LedgerStatement(
                """
                SELECT product_id AS name, COUNT(*) AS count, \(bytes) AS bytes, CAST(SUM(COUNT(*)) OVER () AS BIGINT) AS total_count,
                  CAST(SUM(SUM(bytes_delivered)) OVER () AS BIGINT) AS total_bytes
                FROM fulfilments GROUP BY product_id ORDER BY COUNT(*) DESC, \(dialect.bytewise("product_id")) LIMIT ?1
                """, [max(0, limit)]),
            LedgerStatement(
                "SELECT NULL AS name, 0 AS count, 0 AS bytes, COUNT(*) AS total_count, \(bytes) AS total_bytes FROM fulfilments", [])
        )
    }

    /// Download attempts per hour since `since` (`HourlyDeliveries`), oldest first.
    public static func hourlyDeliveries(since: Date, _ dialect: LedgerDialect) -> LedgerStatement {
        LedgerStatement(
            """
            SELECT \(dialect.hour("at")) AS hour, COUNT(CASE WHEN outcome = 'complete' THEN 1 END) AS complete,
              COUNT(CASE WHEN outcome = 'interrupted' THEN 1 END) AS interrupted, CAST(COALESCE(SUM(bytes), 0) AS BIGINT) AS bytes
            FROM download_attempts WHERE at >= ?1 AND \(dialect.hour("at")) IS NOT NULL GROUP BY hour ORDER BY hour
            """, [since])
    }

    /// A transaction's logged download attempts, oldest first.
    public static func attempts(of transactionID: String) -> LedgerStatement {
        LedgerStatement("SELECT * FROM download_attempts WHERE transaction_id = ?1 ORDER BY id", [transactionID])
    }

    /// Kept proofs, oldest first; `status` nil lists every one.
    public static func pendingProofs(status: PendingProof.Status?, limit: Int) -> LedgerStatement {
        var filters = Filters()
        if let status { filters.add("status = ?", [status]) }
        return filters.statement("SELECT * FROM pending_proofs", then: "ORDER BY id LIMIT ?", [max(0, limit)])
    }

    /// Proofs kept under a transaction ID, oldest first.
    public static func pendingProofs(keptUnder transactionID: String, limit: Int) -> LedgerStatement {
        LedgerStatement("SELECT * FROM pending_proofs WHERE transaction_id = ?1 ORDER BY id LIMIT ?2", [transactionID, max(0, limit)])
    }

    /// The proofs a new one is counted with (`PendingProofCounts`).
    public static func pendingProofCounts(_ draft: PendingProofDraft) -> LedgerStatement {
        LedgerStatement(
            """
            SELECT (SELECT COUNT(*) FROM pending_proofs WHERE transaction_id = ?1) AS per_transaction,
              (SELECT COUNT(*) FROM pending_proofs WHERE client = ?2) AS per_client, (SELECT COUNT(*) FROM pending_proofs) AS total
            """, [draft.transactionID, draft.client])
    }

    /// Holds until `until` up to `limit` pending proofs (of `transactionID` alone when given) that
    /// no other re-verification holds, oldest first; returns them.
    public static func leasePendingProofs(of transactionID: String?, limit: Int, until: Date, now: Date, _ dialect: LedgerDialect)
        -> LedgerStatement
    {
        LedgerStatement(
            """
            UPDATE pending_proofs SET leased_until = ?1 WHERE id IN
              (SELECT id FROM pending_proofs WHERE status = 'pending' AND (leased_until IS NULL OR leased_until <= ?2)
               AND (CAST(?3 AS TEXT) IS NULL OR transaction_id = ?3) ORDER BY id LIMIT ?4\(dialect.skipLocked))
            RETURNING *
            """, [until, now, transactionID, max(0, limit)])
    }

    /// One owed call.
    public static func serverCall(_ id: Int64) -> LedgerStatement {
        LedgerStatement("SELECT * FROM server_calls WHERE id = ?1", [id])
    }

    /// Owed calls matching `filter`, newest first.
    public static func serverCalls(_ filter: ServerCallListQuery) -> LedgerStatement {
        var filters = Filters()
        if let kind = filter.kind { filters.add("kind = ?", [kind]) }
        if let status = filter.status { filters.add("status = ?", [status]) }
        if let transactionID = filter.transactionID { filters.add("transaction_id = ?", [transactionID]) }
        return filters.statement("SELECT * FROM server_calls", then: "ORDER BY id DESC LIMIT ?", [max(0, filter.limit)])
    }

    /// Whether any queued call is due (`count` 0 or 1): a read, so an idle queue takes no write lock.
    public static func dueServerCalls(now: Date) -> LedgerStatement {
        LedgerStatement(
            "SELECT COUNT(*) AS count FROM (SELECT 1 FROM server_calls WHERE status = 'queued' AND due_at <= ?1 LIMIT 1) AS due", [now])
    }

    /// Holds until `until` up to `limit` due calls that no other sender holds, oldest first; returns them.
    public static func leaseServerCalls(limit: Int, until: Date, now: Date, _ dialect: LedgerDialect) -> LedgerStatement {
        LedgerStatement(
            """
            UPDATE server_calls SET leased_until = ?1 WHERE id IN
              (SELECT id FROM server_calls WHERE status = 'queued' AND due_at <= ?2 AND (leased_until IS NULL OR leased_until <= ?2)
               ORDER BY due_at, id LIMIT ?3\(dialect.skipLocked))
            RETURNING *
            """, [until, now, max(0, limit)])
    }

    /// A queued call this build cannot read, kept queued but not leased again before `until`, with
    /// why in its `last_error`.
    static func setAside(serverCall id: Int64, reason: String, until: Date) -> LedgerStatement {
        LedgerStatement(
            "UPDATE server_calls SET leased_until = ?2, last_error = ?3 WHERE id = ?1 AND status = 'queued' RETURNING 1",
            [id, until, "set aside: this build cannot read it (\(reason))"])
    }

    /// Whether a notification with this UUID is on record (`count` 0 or 1).
    public static func notificationRecorded(_ uuid: String) -> LedgerStatement {
        LedgerStatement("SELECT COUNT(*) AS count FROM notifications WHERE notification_uuid = ?1", [uuid])
    }

    /// A notification as recorded.
    public static func notification(_ uuid: String) -> LedgerStatement {
        LedgerStatement("SELECT * FROM notifications WHERE notification_uuid = ?1", [uuid])
    }

    /// Notifications naming the transaction or its purchase, newest first.
    public static func notifications(transactionID: String, originalTransactionID: String, limit: Int, _ dialect: LedgerDialect)
        -> LedgerStatement
    {
        LedgerStatement(
            """
            SELECT * FROM notifications WHERE transaction_id = ?1 OR original_transaction_id = ?2 OR transaction_id = ?2
            ORDER BY received_at DESC, \(dialect.bytewise("notification_uuid")) LIMIT ?3
            """, [transactionID, originalTransactionID, max(0, limit)])
    }
}

/// A WHERE clause of optional filters, each `?` in them numbered and bound in order.
struct Filters {
    private var clauses: [String] = []
    private var arguments: [any LedgerBindable] = []

    mutating func add(_ clause: String, _ values: [any LedgerBindable] = []) {
        clauses.append(number(clause, values))
    }

    /// `head`, the WHERE clause, then `tail` with its own values.
    func statement(_ head: String, then tail: String = "", _ values: [any LedgerBindable] = []) -> LedgerStatement {
        var filters = self
        let tail = filters.number(tail, values)
        let condition = clauses.isEmpty ? "" : " WHERE " + clauses.joined(separator: " AND ")
        return LedgerStatement(head + condition + (tail.isEmpty ? "" : " " + tail), filters.arguments)
    }

    private mutating func number(_ text: String, _ values: [any LedgerBindable]) -> String {
        let parts = text.split(separator: "?", omittingEmptySubsequences: false)
        precondition(parts.count == values.count + 1, "one value per ?")
        var numbered = String(parts[0])
        for (value, part) in zip(values, parts.dropFirst()) {
            arguments.append(value)
            numbered += "?\(arguments.count)" + part
        }
        return numbered
    }
}
