import Foundation
import StockroomCore
import GRDB

#if canImport(Glibc)
    import Glibc
#endif

extension SQLiteDatabase {
    /// What a backup copied.
    public struct Backup: Sendable, Equatable {
        public var bytes: Int64
        public var fulfilments: Int
        /// Whether `verify` read the copy's rows. Not for a ledger its server has not yet migrated
        /// to this build's schema (a binary upgraded before the server restarted): its rows are
        /// read once the server migrates it, and the copy stays as the old build wrote it, so the
        /// old build can restore it.
        public var rowsChecked = true
    }

    /// Why a backup was not taken.
    public enum BackupFailure: Error, Equatable, CustomStringConvertible {
        case sameFile(String)
        case noFolder(String)
        case notALedger(String)
        case damaged(String)

        public var description: String {
            switch self {
            case .sameFile(let path): "\(path) is the live ledger itself: name another file"
            case .noFolder(let folder): "the folder \(folder) does not exist"
            case .notALedger(let path): "\(path) holds no Stockroom ledger"
            case .damaged(let detail): "the copy does not pass SQLite's integrity check: \(detail)"
            }
        }
    }

    /// A consistent copy of the SQLite ledger at `path`, taken while a server writes to it, at
    /// `destination` (mode 0600: it holds every buyer's proof).
    ///
    /// Copying the file is not safe: a WAL database being written is the main file plus a log,
    /// and a copy of both taken at different moments can be corrupt. `VACUUM INTO` reads one
    /// snapshot through SQLite (the server goes on writing meanwhile) into a fresh file beside
    /// `destination`. The copy is made one self-contained file (no WAL), checked
    /// (`integrity_check`, then `verify`, the ledger's invariants), fsynced, then renamed over
    /// `destination`: a crash leaves the old backup or the new one, never half of one.
    public static func backup(
        path: String, to destination: String, verify: (SQLiteLedger) async throws -> Void = { _ in }
    ) async throws -> Backup {
        let target = URL(fileURLWithPath: destination).standardizedFileURL
        let folder = target.deletingLastPathComponent().path
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: folder, isDirectory: &isFolder), isFolder.boolValue else {
            throw BackupFailure.noFolder(folder)
        }
        if Self.sameFile(path, target.path) { throw BackupFailure.sameFile(destination) }

        var configuration = Configuration()
        configuration.readonly = true
        configuration.busyMode = .timeout(5)
        let source = try DatabaseQueue(path: path, configuration: configuration)
        guard try await source.read({ try $0.tableExists("fulfilments") }) else { throw BackupFailure.notALedger(path) }

        let temporary = folder + "/.stockroom-backup-\(UUID().uuidString).sqlite"
        // Created empty and private first: SQLite writes into it and keeps the mode.
        guard FileManager.default.createFile(atPath: temporary, contents: nil, attributes: [.posixPermissions: 0o600]) else {
            throw CocoaError(.fileWriteNoPermission, userInfo: [NSFilePathErrorKey: temporary])
        }
        do {
            try source.inDatabase { db in try db.execute(sql: "VACUUM INTO ?", arguments: [temporary]) }
            try source.close()
            let copy = try DatabaseQueue(path: temporary)
            let fulfilments: Int
            let current: Bool
            do {
                fulfilments = try Self.check(copy)
                current = try await copy.read { try Self.migrator.hasCompletedMigrations($0) }
                if current { try await verify(SQLiteLedger(database: SQLiteDatabase(unmigrated: copy))) }
                try copy.close()
            } catch {
                try? copy.close()
                throw error
            }
            try Self.flush(temporary)
            guard rename(temporary, target.path) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
            try Self.flush(folder)
            let size = (try FileManager.default.attributesOfItem(atPath: target.path)[.size] as? NSNumber)?.int64Value ?? 0
            return Backup(bytes: size, fulfilments: fulfilments, rowsChecked: current)
        } catch {
            try? FileManager.default.removeItem(atPath: temporary)
            throw error
        }
    }

    /// The copy as one file (a rollback journal, not WAL: nothing beside it to lose), then
    /// SQLite's own check of every page and index; its fulfilments.
    private static func check(_ copy: DatabaseQueue) throws -> Int {
        try copy.writeWithoutTransaction { db in _ = try String.fetchOne(db, sql: "PRAGMA journal_mode = DELETE") }
        return try copy.read { db in
            let report = try String.fetchAll(db, sql: "PRAGMA integrity_check")
            guard report == ["ok"] else { throw BackupFailure.damaged(report.prefix(3).joined(separator: "; ")) }
            return try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM fulfilments") ?? 0
        }
    }

    private static func sameFile(_ first: String, _ second: String) -> Bool {
        var a = stat()
        var b = stat()
        guard stat(first, &a) == 0, stat(second, &b) == 0 else { return false }
        return a.st_dev == b.st_dev && a.st_ino == b.st_ino
    }

    /// `fsync` of a file or a folder (so a rename in it survives a power loss).
    private static func flush(_ path: String) throws {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        defer { close(descriptor) }
        guard fsync(descriptor) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
    }
}
