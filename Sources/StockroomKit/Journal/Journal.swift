import Foundation
#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The journal on disk: one file per transaction, each write a temporary file renamed over the old.
///
/// A relaunched app opens the same folder and carries on where the killed one stopped. Entries
/// hold replayable proofs and tokens, so the folder is this user's alone (0700, entries 0600,
/// whatever stood there before). An entry that cannot be read (damaged, truncated, too large, a
/// link) is set aside under another name and reported, and its purchase starts over from the
/// proof the app supplies again, instead of failing for ever.
public struct Journal: Sendable {
    public let folder: URL
    /// Told of each entry set aside: its transaction and why.
    var onSetAside: (@Sendable (_ transactionID: String, _ reason: String) -> Void)?

    /// The largest entry read; a proof of purchase is a few KiB, a receipt rarely past 100 KiB.
    static let maximumEntrySize = 1 << 20

    /// Why the journal cannot be used.
    public enum Failure: Error, Sendable, Equatable, CustomStringConvertible {
        /// The folder belongs to another user, who could read or change the proofs in it.
        case folderNotPrivate(String)
        /// Something other than a folder stands at the journal's path.
        case notAFolder(String)
        /// Not a transaction ID (`NetworkName.isTransactionID`): no entry can have that name.
        case invalidTransactionID

        public var description: String {
            switch self {
            case .folderNotPrivate(let path): "The journal folder \(path) belongs to another user: use a folder of this user's."
            case .notAFolder(let path): "The journal path \(path) is not a folder."
            case .invalidTransactionID: "Not a transaction ID."
            }
        }
    }

    /// Opens `folder`, creating it if needed, and makes it and its entries this user's alone.
    public init(folder: URL) throws {
        self.folder = folder
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        var status = stat()
        guard stat(folder.path, &status) == 0 else { throw LocalFile.posixError() }
        guard (status.st_mode & S_IFMT) == S_IFDIR else { throw Failure.notAFolder(folder.path) }
        guard status.st_uid == geteuid() else { throw Failure.folderNotPrivate(folder.path) }
        guard chmod(folder.path, 0o700) == 0 else { throw LocalFile.posixError() }
        for name in (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? [] {
            let path = folder.appendingPathComponent(name).path
            if LocalFile.regularFileSize(path) != nil { _ = chmod(path, 0o600) }
        }
    }

    /// The entry of `transactionID`, if one was written and can be read; an unreadable one is set
    /// aside and reads as none.
    public func entry(_ transactionID: String) throws -> JournalEntry? {
        guard NetworkName.isTransactionID(transactionID) else { throw Failure.invalidTransactionID }
        let path = file(transactionID)
        let descriptor: Int32
        do {
            descriptor = try LocalFile.openFile(path, O_RDONLY | O_NONBLOCK)
        } catch let error as POSIXError where error.code == .ENOENT {
            return nil
        } catch let error as POSIXError where error.code == .ELOOP {
            return setAside(transactionID, because: "it is a symbolic link")
        }
        defer { close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { throw LocalFile.posixError() }
        guard (status.st_mode & S_IFMT) == S_IFREG else { return setAside(transactionID, because: "it is not a regular file") }
        guard Int64(status.st_size) <= Self.maximumEntrySize else {
            return setAside(transactionID, because: "it is larger than \(Self.maximumEntrySize) bytes")
        }
        let data = try LocalFile.readAll(descriptor, upTo: Self.maximumEntrySize)
        guard let entry = ServerJSON.decode(JournalEntry.self, from: data) else {
            return setAside(transactionID, because: "it is not a readable entry")
        }
        guard entry.transactionID == transactionID, NetworkName.isProductID(entry.productID) else {
            return setAside(transactionID, because: "its names do not match its file")
        }
        return entry.bounded()
    }

    /// The transaction's lock, held while one delivery of it runs, by this process or another
    /// (an app and its extension, two `stockroom client` runs): nil when another holds it. Two
    /// deliveries of one transaction would write one partial file.
    func lock(_ transactionID: String) throws -> TransactionLock? {
        guard NetworkName.isTransactionID(transactionID) else { throw Failure.invalidTransactionID }
        let descriptor = try LocalFile.openFile(folder.appendingPathComponent(".\(transactionID).lock").path, O_RDWR | O_CREAT, mode: 0o600)
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            close(descriptor)
            return nil
        }
        return TransactionLock(descriptor: descriptor)
    }

    /// Replaces the entry atomically (a reader sees the old one or the new one, never half), and
    /// flushed to disk before the rename.
    ///
    /// On Apple platforms the file is readable after the first unlock, so a download that resumes
    /// in the background while the device is locked still reads it.
    public func write(_ entry: JournalEntry) throws {
        guard NetworkName.isTransactionID(entry.transactionID) else { throw Failure.invalidTransactionID }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let data = try encoder.encode(entry)
        let temporary = folder.appendingPathComponent(".\(entry.transactionID).\(UUID().uuidString).tmp").path
        let descriptor = try LocalFile.openFile(temporary, O_WRONLY | O_CREAT | O_EXCL, mode: 0o600)
        do {
            defer { close(descriptor) }
            guard fchmod(descriptor, 0o600) == 0 else { throw LocalFile.posixError() }
            try LocalFile.writeAll(data, to: descriptor)
            guard fsync(descriptor) == 0 else { throw LocalFile.posixError() }
            #if os(iOS) || os(tvOS) || os(watchOS) || os(visionOS)
                try FileManager.default.setAttributes(
                    [.protectionKey: FileProtectionType.completeUntilFirstUserAuthentication], ofItemAtPath: temporary)
            #endif
            guard rename(temporary, file(entry.transactionID)) == 0 else { throw LocalFile.posixError() }
        } catch {
            LocalFile.remove(temporary)
            throw error
        }
    }

    /// Every entry on record that can be read, for a restore or a look at what is unfinished.
    public func entries() throws -> [JournalEntry] {
        try FileManager.default.contentsOfDirectory(atPath: folder.path)
            .filter { $0.hasSuffix(".json") && !$0.hasPrefix(".") }
            .compactMap { name in
                let transactionID = String(name.dropLast(".json".count))
                guard NetworkName.isTransactionID(transactionID) else { return nil }
                return try? entry(transactionID)
            }
    }

    private func file(_ transactionID: String) -> String {
        folder.appendingPathComponent(transactionID + ".json").path
    }

    /// Renames the entry out of the way (kept for a look, never read again) and reports it.
    private func setAside(_ transactionID: String, because reason: String) -> JournalEntry? {
        let aside = folder.appendingPathComponent(
            "\(transactionID).json.set-aside-\(Int(Date().timeIntervalSince1970))-\(UUID().uuidString.prefix(8))"
        ).path
        if rename(file(transactionID), aside) != 0 { LocalFile.remove(file(transactionID)) }
        onSetAside?(transactionID, reason)
        return nil
    }
}

/// A transaction's lock (`flock` on a file beside its entry): released when this ends, or when
/// the process does.
final class TransactionLock: Sendable {
    private let descriptor: Int32

    init(descriptor: Int32) { self.descriptor = descriptor }

    deinit { close(descriptor) }
}
