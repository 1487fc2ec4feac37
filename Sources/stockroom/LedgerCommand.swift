import ArgumentParser
import Foundation
import StockroomCore
import StockroomSQLite
import StockroomPostgres

/// `stockroom ledger check | backup | export | import`: the ledger's invariants, a live SQLite
/// ledger's backup, and moving a ledger between SQLite and PostgreSQL (`--database`).
struct LedgerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ledger",
        abstract: "Check the ledger's invariants, back it up while the server runs, or move it between SQLite and PostgreSQL.",
        subcommands: [Check.self, Backup.self, Export.self, Import.self])

    struct Check: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Verify the ledger's invariants; one line per problem, exit 1 if any.")

        @OptionGroup var options: ServerOptions

        func run() async throws {
            let archive = try await LedgerStore.open(options).archive()
            let problems = archive.problems
            for problem in problems { print(problem) }
            guard problems.isEmpty else { fail("\(problems.count) problem\(problems.count == 1 ? "" : "s") in \(archive.summary)") }
            print("ok: \(archive.summary)")
        }
    }

    struct Backup: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Copy a live SQLite ledger to a file, consistently, while the server keeps writing.",
            discussion: """
                Copying the ledger's file is not safe while the server runs: a WAL database is the file plus a \
                log, and a copy of both taken at different moments can be corrupt. This reads one snapshot \
                through SQLite (VACUUM INTO) into a file beside PATH, checks it (SQLite's integrity check and \
                the ledger's invariants, as `ledger check`), fsyncs it, then renames it over PATH: a crash \
                leaves the old backup or the new one. The file is mode 0600: it holds every buyer's proof.

                To restore: stop the server, run `stockroom ledger check --database BACKUP`, copy BACKUP over \
                the ledger's path, delete the ledger's -wal and -shm files if any are left, and start the \
                server. deploy/stockroom-ledger-backup.timer runs this daily. A PostgreSQL ledger is backed \
                up with pg_dump (deploy/POSTGRESQL.md).
                """)

        @OptionGroup var options: ServerOptions

        @Argument(help: "The backup file to write (replaced atomically); its folder must exist.")
        var path: String

        func run() async throws {
            let configuration = try options.configuration()
            if configuration.usesPostgres {
                fail("a PostgreSQL ledger is backed up with pg_dump (see deploy/POSTGRESQL.md), not with ledger backup")
            }
            guard FileManager.default.fileExists(atPath: configuration.databaseLocation) else {
                fail("no ledger at \(configuration.databaseLocation); pass --database or set STOCKROOM_DATABASE")
            }
            let started = ContinuousClock.now
            let backup: SQLiteDatabase.Backup
            do {
                backup = try await SQLiteDatabase.backup(path: configuration.databaseLocation, to: path) { copy in
                    let problems = try await copy.archive().problems
                    guard problems.isEmpty else { throw LedgerArchive.Malformed(description: problems.joined(separator: "; ")) }
                }
            } catch let failure as SQLiteDatabase.BackupFailure {
                fail("no backup: \(failure)")
            } catch let failure as LedgerArchive.Malformed {
                fail("no backup: the copy breaks the ledger's invariants: \(failure.description)")
            }
            let elapsed = ContinuousClock.now - started
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            print(
                "backed up \(configuration.databaseLocation) to \(path): \(backup.fulfilments) fulfilments, \(backup.bytes) bytes, "
                    + String(format: "%.2f s", seconds)
                    + (backup.rowsChecked
                        ? ""
                        : " (pages checked; rows not: the ledger's schema is older than this build's, its server migrates it on start)"))
        }
    }

    struct Export: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write every row of the ledger as JSON Lines (receipts included: keep the file private).")

        @OptionGroup var options: ServerOptions

        @Option(help: "The format: jsonl.")
        var format = "jsonl"

        @Option(name: .shortAndLong, help: "The file to write (mode 0600); - or none for standard output.")
        var output: String?

        func run() async throws {
            guard format == "jsonl" else { throw ValidationError("--format must be jsonl") }
            let archive = try await LedgerStore.open(options).archive()
            let data = try archive.jsonLines()
            if let output, output != "-" {
                guard FileManager.default.createFile(atPath: output, contents: data, attributes: [.posixPermissions: 0o600]) else {
                    fail("\(output) cannot be written")
                }
            } else {
                FileHandle.standardOutput.write(data)
            }
            FileHandle.standardError.write(Data("exported \(archive.summary); sha256 \(LedgerStore.checksum(data))\n".utf8))
        }
    }

    struct Import: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Load an export into an empty ledger, in one transaction; prints the counts and the file's SHA-256.")

        @OptionGroup var options: ServerOptions

        @Argument(help: "The JSON Lines file `ledger export` wrote; - for standard input.")
        var file: String

        func run() async throws {
            let data = file == "-" ? FileHandle.standardInput.readDataToEndOfFile() : FileManager.default.contents(atPath: file)
            guard let data else { fail("\(file) cannot be read") }
            let archive: LedgerArchive
            do {
                archive = try LedgerArchive(jsonLines: data)
            } catch {
                fail("\(file): \(error)")
            }
            let problems = archive.problems
            guard problems.isEmpty else { fail("\(file) breaks the ledger's invariants: " + problems.joined(separator: "; ")) }
            let store = try await LedgerStore.open(options, creating: true)
            try await store.restore(archive)
            let stored = try await store.archive()
            guard stored.matches(archive) else { fail("the imported ledger differs from \(file): \(stored.summary)") }
            print("imported \(stored.summary); sha256 \(LedgerStore.checksum(data))")
        }
    }
}

/// The ledger behind `--database`, as whole rows (`archive()` and `restore(_:)`, written once
/// for both engines).
enum LedgerStore {
    /// Opens the configured ledger; a missing SQLite file is an error unless `creating`.
    static func open(_ options: ServerOptions, creating: Bool = false) async throws -> any LedgerStatementRunner {
        let configuration = try options.configuration()
        if configuration.usesPostgres {
            return OperatorContext.postgresLedger(configuration)
        }
        if !creating, !FileManager.default.fileExists(atPath: configuration.databaseLocation) {
            fail("no ledger at \(configuration.databaseLocation); pass --database or set STOCKROOM_DATABASE")
        }
        return SQLiteLedger(database: try SQLiteDatabase(path: configuration.databaseLocation))
    }

    /// Hex SHA-256 of an export's bytes, as both commands print it.
    static func checksum(_ data: Data) -> String {
        ByteEncoding.hex(SHA256.hash(Array(data)))
    }
}
