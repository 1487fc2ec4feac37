import Foundation

/// The journal on disk: one file per transaction, each write a temporary file renamed over the old.
///
/// A relaunched app opens the same folder and carries on where the killed one stopped.
public struct Journal: Sendable {
    public let folder: URL

    /// Opens `folder`, creating it readable by this user only: entries hold replayable proofs.
    public init(folder: URL) throws {
        self.folder = folder
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
    }

    /// The entry of `transactionID`, if one was written.
    public func entry(_ transactionID: String) throws -> JournalEntry? {
        let url = file(transactionID)
        guard FileManager.default.fileExists(atPath: url.path) else { return nil }
        return try JSONDecoder().decode(JournalEntry.self, from: Data(contentsOf: url))
    }

    /// Replaces the entry atomically: a reader sees the old one or the new one, never half.
    ///
    /// On Apple platforms the file is readable after the first unlock, so a download that resumes
    /// in the background while the device is locked still reads it; it holds a replayable proof.
    public func write(_ entry: JournalEntry) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        var options: Data.WritingOptions = [.atomic]
        #if os(iOS) || os(tvOS) || os(watchOS) || os(visionOS)
        options.insert(.completeFileProtectionUntilFirstUserAuthentication)
        #endif
        try encoder.encode(entry).write(to: file(entry.transactionID), options: options)
    }

    /// Every entry on record, for a restore or a look at what is unfinished.
    public func entries() throws -> [JournalEntry] {
        try FileManager.default.contentsOfDirectory(at: folder, includingPropertiesForKeys: nil)
            .filter { $0.pathExtension == "json" && !$0.lastPathComponent.hasPrefix(".") }
            .compactMap { try? JSONDecoder().decode(JournalEntry.self, from: Data(contentsOf: $0)) }
    }

    private func file(_ transactionID: String) -> URL {
        // Transaction IDs are digits (letters, dots, dashes at most): safe as a file name once slashes are out.
        folder.appendingPathComponent(transactionID.replacingOccurrences(of: "/", with: "_") + ".json")
    }
}
