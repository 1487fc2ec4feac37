import Foundation
import Synchronization

/// Starts child processes one at a time. Foundation's `Process.run()` on Linux has crashed
/// (a bad `memcpy` inside it) when parallel tests launched processes at the same moment; a
/// launch takes milliseconds, so serialising them costs nothing.
public enum ChildProcess {
    private static let launching = Mutex(())

    /// `process.run()`, never at the same time as another launch in this test process.
    public static func launch(_ process: Process) throws {
        try launching.withLock { _ in try process.run() }
    }
}
