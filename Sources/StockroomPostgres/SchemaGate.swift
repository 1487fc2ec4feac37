import Synchronization

/// Brings the schema up to date once per pool, before the ledger's first statement: callers
/// that arrive while the migration runs wait for it; a failed one is tried again by the next call.
final class SchemaGate: Sendable {
    private let done: Atomic<Bool>
    private let running = Mutex<Task<Void, any Error>?>(nil)

    init(migrated: Bool) {
        done = Atomic(migrated)
    }

    func ready(_ migrate: @escaping @Sendable () async throws -> Void) async throws {
        if done.load(ordering: .acquiring) { return }
        let task = running.withLock { current in
            if let current { return current }
            let task = Task { try await migrate() }
            current = task
            return task
        }
        do {
            try await task.value
            done.store(true, ordering: .releasing)
        } catch {
            running.withLock { current in if current == task { current = nil } }
            throw error
        }
    }
}
