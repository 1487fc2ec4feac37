public import GRDB

/// The owner of the ledger database: its connection pool and its migrations.
///
/// SQLite in WAL mode (a `DatabasePool`): readers never block the writer, and the CLI can
/// work on the file while the server runs. Migrations are append-only.
public final class AppDatabase: Sendable {
    public let writer: any DatabaseWriter

    /// Opens (creating if needed) the database at `path` and migrates it.
    public init(path: String) throws {
        var configuration = Configuration()
        configuration.busyMode = .timeout(5)
        self.writer = try DatabasePool(path: path, configuration: configuration)
        try Self.migrator.migrate(writer)
    }

    /// Every schema version, in order; a shipped migration never changes.
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1: schema marker") { db in
            try db.create(table: "stockroom_meta", ifNotExists: true) { table in
                table.primaryKey("key", .text)
                table.column("value", .text).notNull()
            }
        }
        return migrator
    }
}
