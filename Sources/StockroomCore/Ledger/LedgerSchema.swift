/// The ledger's tables, written once for both engines: each migration's statements in the SQL
/// SQLite and PostgreSQL share, with the three column types they spell differently
/// (`LedgerDialect`). The engines only run them (GRDB's migrator; `schema_migrations` under an
/// advisory lock), so the two schemas cannot drift apart. Append-only: a shipped migration never
/// changes what it makes.
public enum LedgerSchema {
    /// One step of the schema, applied in one transaction.
    public struct Migration: Sendable {
        public let version: Int
        public let name: String
        public let statements: [String]
    }

    public static func migrations(_ dialect: LedgerDialect) -> [Migration] {
        let (id, time, count) = (dialect.id, dialect.time, dialect.count)
        let states = FulfilmentState.allCases.map { "'\($0.rawValue)'" }.joined(separator: ", ")
        let proofKinds = "proof_kind TEXT NOT NULL CHECK (proof_kind IN ('receipt', 'signedTransaction'))"
        return [
            Migration(
                version: 1, name: "v1: schema marker",
                statements: [
                    "CREATE TABLE IF NOT EXISTS stockroom_meta (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL)"
                ]),
            Migration(
                version: 2, name: "v2: fulfilments and download attempts",
                statements: [
                    """
                    CREATE TABLE fulfilments (
                      transaction_id TEXT PRIMARY KEY NOT NULL,
                      original_transaction_id TEXT NOT NULL,
                      product_id TEXT NOT NULL,
                      bundle_id TEXT NOT NULL,
                      environment TEXT CHECK (environment IN ('Production', 'Sandbox')),
                      \(proofKinds),
                      proof TEXT NOT NULL,
                      state TEXT NOT NULL CHECK (state IN (\(states))),
                      verified_at \(time),
                      attempts \(count) NOT NULL DEFAULT 0 CHECK (attempts >= 0),
                      bytes_delivered \(count) NOT NULL DEFAULT 0 CHECK (bytes_delivered >= 0),
                      last_error TEXT,
                      created_at \(time) NOT NULL,
                      updated_at \(time) NOT NULL,
                      delivered_at \(time),
                      acknowledged_at \(time),
                      revoked_at \(time))
                    """,
                    "CREATE INDEX fulfilments_on_original_transaction_id ON fulfilments (original_transaction_id)",
                    "CREATE INDEX fulfilments_on_state ON fulfilments (state)",
                    "CREATE INDEX fulfilments_on_updated_at ON fulfilments (updated_at)",
                    """
                    CREATE TABLE download_attempts (
                      id \(id),
                      transaction_id TEXT NOT NULL REFERENCES fulfilments (transaction_id) ON DELETE CASCADE,
                      range_start \(count),
                      range_end \(count),
                      bytes \(count) NOT NULL CHECK (bytes >= 0),
                      outcome TEXT NOT NULL CHECK (outcome IN ('complete', 'interrupted')),
                      at \(time) NOT NULL)
                    """,
                    "CREATE INDEX download_attempts_on_transaction_id ON download_attempts (transaction_id)",
                ]),
            Migration(
                version: 3, name: "v3: App Store notifications",
                statements: [
                    """
                    CREATE TABLE notifications (
                      notification_uuid TEXT PRIMARY KEY NOT NULL,
                      notification_type TEXT NOT NULL,
                      subtype TEXT,
                      transaction_id TEXT,
                      original_transaction_id TEXT,
                      outcome TEXT NOT NULL,
                      received_at \(time) NOT NULL)
                    """
                ]),
            Migration(
                version: 4, name: "v4: entitlements only from verified proofs, pending proofs apart",
                statements: [
                    "ALTER TABLE fulfilments ADD COLUMN proof_digest TEXT",
                    "ALTER TABLE fulfilments ADD COLUMN app_account_token TEXT",
                    "ALTER TABLE fulfilments ADD COLUMN expires_at \(time)",
                    "ALTER TABLE fulfilments ADD COLUMN revoked_by_operator_at \(time)",
                    "ALTER TABLE fulfilments ADD COLUMN revoked_by_refund_at \(time)",
                    """
                    CREATE TABLE pending_proofs (
                      id \(id),
                      transaction_id TEXT NOT NULL,
                      proof_digest TEXT NOT NULL,
                      \(proofKinds),
                      proof TEXT NOT NULL,
                      requested_product_id TEXT NOT NULL,
                      app_account_token TEXT,
                      status TEXT NOT NULL CHECK (status IN ('pending', 'rejected')),
                      last_error TEXT,
                      created_at \(time) NOT NULL,
                      updated_at \(time) NOT NULL,
                      UNIQUE (transaction_id, proof_digest))
                    """,
                    "CREATE INDEX pending_proofs_on_transaction_id ON pending_proofs (transaction_id)",
                    "CREATE INDEX pending_proofs_on_status ON pending_proofs (status)",
                ]),
            Migration(
                version: 5, name: "v5: a pending proof is leased to one re-verification at a time",
                statements: [
                    "ALTER TABLE pending_proofs ADD COLUMN leased_until \(time)"
                ]),
            Migration(
                version: 6, name: "v6: the purchase lifecycle: server finish, consumption answers, notifications verbatim",
                statements: [
                    "ALTER TABLE fulfilments ADD COLUMN finished_at \(time)",
                    "ALTER TABLE fulfilments ADD COLUMN customer_consented BOOLEAN",
                    "ALTER TABLE notifications ADD COLUMN signed_payload TEXT",
                    "ALTER TABLE notifications ADD COLUMN source TEXT",
                    """
                    CREATE TABLE server_calls (
                      id \(id),
                      kind TEXT NOT NULL CHECK (kind IN ('finish', 'consumption')),
                      transaction_id TEXT NOT NULL,
                      environment TEXT NOT NULL,
                      status TEXT NOT NULL CHECK (status IN ('queued', 'sent', 'skipped', 'refused')),
                      attempts INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
                      due_at \(time) NOT NULL,
                      leased_until \(time),
                      last_error TEXT,
                      body TEXT,
                      requested_by TEXT,
                      created_at \(time) NOT NULL,
                      updated_at \(time) NOT NULL,
                      sent_at \(time),
                      UNIQUE (kind, transaction_id))
                    """,
                    "CREATE INDEX server_calls_on_status_due_at ON server_calls (status, due_at)",
                    // The console pages the list by creation time and charts attempts by hour.
                    "CREATE INDEX fulfilments_on_created_at ON fulfilments (created_at)",
                    "CREATE INDEX download_attempts_on_at ON download_attempts (at)",
                ]),
            Migration(
                version: 7, name: "v7: pending proofs bounded per client, rejected ones purged",
                statements: [
                    "ALTER TABLE pending_proofs ADD COLUMN client TEXT",
                    "CREATE INDEX pending_proofs_on_client ON pending_proofs (client)",
                    "CREATE INDEX pending_proofs_on_status_updated_at ON pending_proofs (status, updated_at)",
                ]),
            Migration(
                version: 8, name: "v8: the event log, and its deliveries to webhook endpoints",
                statements: [
                    "ALTER TABLE fulfilments ADD COLUMN event_sequence \(count)",
                    """
                    CREATE TABLE ledger_events (
                      id \(id),
                      event_id TEXT NOT NULL,
                      type TEXT NOT NULL,
                      transaction_id TEXT NOT NULL,
                      sequence \(count) NOT NULL CHECK (sequence >= 1),
                      body TEXT NOT NULL,
                      created_at \(time) NOT NULL,
                      fanned_out BOOLEAN NOT NULL,
                      UNIQUE (transaction_id, sequence))
                    """,
                    // Written with every download: an index on the random event ID, or on the time
                    // (the purge walks IDs oldest first), would cost each write a page.
                    "CREATE INDEX ledger_events_on_fanned_out_id ON ledger_events (fanned_out, id)",
                    """
                    CREATE TABLE webhook_deliveries (
                      id \(id),
                      event \(count) NOT NULL REFERENCES ledger_events (id) ON DELETE CASCADE,
                      endpoint TEXT NOT NULL,
                      transaction_id TEXT NOT NULL,
                      sequence \(count) NOT NULL,
                      status TEXT NOT NULL CHECK (status IN ('queued', 'sent', 'parked')),
                      attempts INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
                      due_at \(time) NOT NULL,
                      leased_until \(time),
                      last_error TEXT,
                      last_status INTEGER,
                      created_at \(time) NOT NULL,
                      updated_at \(time) NOT NULL,
                      sent_at \(time),
                      UNIQUE (endpoint, event))
                    """,
                    "CREATE INDEX webhook_deliveries_on_status_due_at ON webhook_deliveries (status, due_at)",
                    "CREATE INDEX webhook_deliveries_on_order ON webhook_deliveries (endpoint, transaction_id, sequence)",
                    "CREATE INDEX webhook_deliveries_on_event ON webhook_deliveries (event)",
                ]),
            Migration(
                version: 9, name: "v9: calls owed to Apple include Set App Account Token",
                statements: dialect.replaceCheck(
                    CheckChange(
                        table: "server_calls", column: "kind", check: "kind IN ('finish', 'consumption', 'appAccountToken')",
                        columns: [
                            "id \(id)",
                            "kind TEXT NOT NULL CHECK (kind IN ('finish', 'consumption', 'appAccountToken'))",
                            "transaction_id TEXT NOT NULL",
                            "environment TEXT NOT NULL",
                            "status TEXT NOT NULL CHECK (status IN ('queued', 'sent', 'skipped', 'refused'))",
                            "attempts INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0)",
                            "due_at \(time) NOT NULL",
                            "leased_until \(time)",
                            "last_error TEXT",
                            "body TEXT",
                            "requested_by TEXT",
                            "created_at \(time) NOT NULL",
                            "updated_at \(time) NOT NULL",
                            "sent_at \(time)",
                        ],
                        constraints: ["UNIQUE (kind, transaction_id)"],
                        indexes: ["CREATE INDEX server_calls_on_status_due_at ON server_calls (status, due_at)"]))),
            Migration(
                version: 10, name: "v10: consent rescinded (RESCIND_CONSENT), per app download",
                statements: [
                    """
                    CREATE TABLE consent_rescissions (
                      app_transaction_id TEXT NOT NULL,
                      environment TEXT NOT NULL CHECK (environment IN ('Production', 'Sandbox')),
                      bundle_id TEXT NOT NULL,
                      notification_uuid TEXT NOT NULL,
                      rescinded_at \(time) NOT NULL,
                      PRIMARY KEY (app_transaction_id, environment))
                    """,
                    "ALTER TABLE server_calls ADD COLUMN app_transaction_id TEXT",
                ]),
            Migration(
                version: 11, name: "v11: the event log's IDs without SQLite's AUTOINCREMENT counter",
                statements: dialect.dropCounter(
                    TableRebuild(
                        table: "ledger_events",
                        columns: [
                            "id INTEGER PRIMARY KEY", "event_id TEXT NOT NULL", "type TEXT NOT NULL", "transaction_id TEXT NOT NULL",
                            "sequence \(count) NOT NULL CHECK (sequence >= 1)", "body TEXT NOT NULL", "created_at \(time) NOT NULL",
                            "fanned_out BOOLEAN NOT NULL",
                        ],
                        constraints: ["UNIQUE (transaction_id, sequence)"],
                        indexes: ["CREATE INDEX ledger_events_on_fanned_out_id ON ledger_events (fanned_out, id)"]))),
            Migration(
                version: 12, name: "v12: which bytes of each purchase went out, and how its last download ended",
                statements: [
                    "ALTER TABLE fulfilments ADD COLUMN sent_bytes TEXT",
                    "ALTER TABLE fulfilments ADD COLUMN sent_version TEXT",
                    "ALTER TABLE fulfilments ADD COLUMN last_delivery_ending TEXT "
                        + "CHECK (last_delivery_ending IN ('complete', 'client', 'server'))",
                    "ALTER TABLE fulfilments ADD COLUMN handed_off_at \(time)",
                    // A row never asked for its content sent nothing; any other row's bytes before
                    // this version are not known (NULL), and a consumption answer says so.
                    "UPDATE fulfilments SET sent_bytes = '' WHERE attempts = 0 AND bytes_delivered = 0",
                ]),
            Migration(
                version: 13, name: "v13: a delivery first in line for its endpoint and transaction is marked, and only those are leased",
                statements: [
                    // Without it a lease read every queued delivery due by its own time, and all
                    // but the first of each transaction waited behind an earlier one: behind a
                    // dead receiver, the whole backlog, every second, under the write lock.
                    "ALTER TABLE webhook_deliveries ADD COLUMN head_of_line BOOLEAN NOT NULL DEFAULT FALSE",
                    """
                    UPDATE webhook_deliveries SET head_of_line = TRUE WHERE status = 'queued'
                      AND NOT EXISTS (SELECT 1 FROM webhook_deliveries e WHERE e.endpoint = webhook_deliveries.endpoint
                        AND e.transaction_id = webhook_deliveries.transaction_id AND e.sequence < webhook_deliveries.sequence
                        AND e.status = 'queued')
                    """,
                    """
                    CREATE INDEX webhook_deliveries_heads_on_endpoint_due_at ON webhook_deliveries (endpoint, due_at, id)
                      WHERE status = 'queued' AND head_of_line
                    """,
                    // The queue's gauges count it by status and endpoint, and the park of what
                    // waits for an endpoint no longer configured reads it by status and time: from
                    // the index alone. Nothing reads the queue by status and due time any more.
                    "DROP INDEX webhook_deliveries_on_status_due_at",
                    "CREATE INDEX webhook_deliveries_on_status_endpoint_created_at ON webhook_deliveries (status, endpoint, created_at)",
                ]),
        ]
    }

    /// A table SQLite builds anew, rows and IDs kept: its columns in order, each as `CREATE TABLE`
    /// declares it, its constraints, and the indexes it drops with the old table and makes again.
    public struct TableRebuild: Sendable {
        let table: String
        let columns: [String]
        let constraints: [String]
        let indexes: [String]

        var columnNames: [String] { columns.map { String($0.prefix { $0 != " " }) } }

        /// SQLite's statements: the new table, the rows copied (IDs too), the old one dropped (the
        /// migrator turns foreign keys off meanwhile, so nothing cascades), the new one renamed,
        /// its indexes made again.
        var sqliteStatements: [String] {
            let rebuilt = table + "_rebuilt"
            let names = columnNames.joined(separator: ", ")
            return [
                "CREATE TABLE \(rebuilt) (\((columns + constraints).joined(separator: ", ")))",
                "INSERT INTO \(rebuilt) (\(names)) SELECT \(names) FROM \(table)",
                "DROP TABLE \(table)",
                "ALTER TABLE \(rebuilt) RENAME TO \(table)",
            ] + indexes
        }
    }

    /// A new CHECK on one column of a table that may have rows: what `LedgerDialect.replaceCheck`
    /// turns into each engine's statements.
    public struct CheckChange: Sendable {
        /// The table, and the column whose CHECK changes (on PostgreSQL its constraint is
        /// `<table>_<column>_check`, the name a column's CHECK gets there).
        let table: String
        let column: String
        /// The new condition.
        let check: String
        /// The table's columns in order, each as `CREATE TABLE` declares it, with the new CHECK:
        /// what SQLite, which cannot alter a constraint, builds the table anew from.
        let columns: [String]
        /// The table's constraints, after its columns.
        let constraints: [String]
        /// The table's indexes, which SQLite drops with the old table and makes again.
        let indexes: [String]

        /// Each column's name, in order.
        var columnNames: [String] { columns.map { String($0.prefix { $0 != " " }) } }
    }
}

/// What the two engines spell differently: three column types, the few clauses of the shared
/// statements that only one of them has, and how a CHECK on a table with rows changes.
public struct LedgerDialect: Sendable {
    /// A table's own generated key.
    let id: String
    /// A point in time.
    let time: String
    /// A count or a byte offset, which may pass 2³¹.
    let count: String
    /// In a subquery that picks rows to lease: passes over rows another transaction holds.
    let skipLocked: String
    /// The hour (since 1970) of a time column.
    let hour: @Sendable (String) -> String
    /// A text column as a sort key in byte order, whatever the database's collation: SQLite
    /// compares bytes (BINARY); PostgreSQL sorts by the database's locale (`en_US.UTF-8`, the
    /// usual production default, puts `a` before `B`) unless told `COLLATE "C"`. IDs then list in
    /// one order on both engines, and an export's rows come in one order.
    public let bytewise: @Sendable (String) -> String
    /// After rows were inserted with their IDs (an import), what makes a table's next ID follow
    /// the highest: PostgreSQL's identity sequence is set; SQLite's AUTOINCREMENT follows by itself.
    let continueIdentity: (@Sendable (String) -> String)?
    /// The statements that give a column of a table that may have rows a new CHECK: PostgreSQL
    /// drops the constraint and adds it again; SQLite builds the table anew, copies its rows
    /// (their IDs, and the AUTOINCREMENT counter, with them), drops the old one, renames the new
    /// one and makes its indexes again.
    let replaceCheck: @Sendable (LedgerSchema.CheckChange) -> [String]
    /// The statements that give an append-only log's IDs up without a counter of their own:
    /// SQLite's AUTOINCREMENT writes its `sqlite_sequence` row, a page of the WAL, with every
    /// insert, and a log whose references cascade has no use for IDs never reused; a plain
    /// rowid follows the highest. PostgreSQL's identity costs nothing: no statement.
    let dropCounter: @Sendable (LedgerSchema.TableRebuild) -> [String]

    public static let sqlite = LedgerDialect(
        id: "INTEGER PRIMARY KEY AUTOINCREMENT", time: "DATETIME", count: "INTEGER", skipLocked: "",
        hour: { "CAST(strftime('%s', \($0)) AS INTEGER) / 3600" }, bytewise: { $0 }, continueIdentity: nil,
        replaceCheck: { change in
            LedgerSchema.TableRebuild(
                table: change.table, columns: change.columns, constraints: change.constraints, indexes: change.indexes
            )
            .sqliteStatements
        },
        dropCounter: { $0.sqliteStatements })
    public static let postgres = LedgerDialect(
        id: "bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY", time: "timestamptz", count: "bigint",
        skipLocked: " FOR UPDATE SKIP LOCKED", hour: { "CAST(floor(extract(epoch from \($0)) / 3600) AS BIGINT)" },
        bytewise: { "\($0) COLLATE \"C\"" },
        continueIdentity: { "SELECT setval(pg_get_serial_sequence('\($0)', 'id'), COALESCE((SELECT max(id) FROM \($0)), 0) + 1, false)" },
        replaceCheck: { change in
            let constraint = "\(change.table)_\(change.column)_check"
            return [
                "ALTER TABLE \(change.table) DROP CONSTRAINT \(constraint)",
                "ALTER TABLE \(change.table) ADD CONSTRAINT \(constraint) CHECK (\(change.check))",
            ]
        },
        dropCounter: { _ in [] })
}
