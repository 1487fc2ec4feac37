import Synchronization

/// `work`'s value, or nil when it has not come after `limit`: a test that would otherwise hang on
/// an answer that never comes fails instead (the work is left where it waits).
public func within<Value: Sendable>(_ limit: Duration, _ work: @escaping @Sendable () async -> Value) async -> Value? {
    let waiting = FirstAnswer<Value>()
    return await withCheckedContinuation { continuation in
        waiting.continuation.withLock { $0 = continuation }
        Task { waiting.resume(await work()) }
        Task {
            try? await Task.sleep(for: limit)
            waiting.resume(nil)
        }
    }
}

/// A continuation resumed once, by the first to come.
private final class FirstAnswer<Value: Sendable>: Sendable {
    let continuation = Mutex<CheckedContinuation<Value?, Never>?>(nil)
    func resume(_ value: Value?) { continuation.withLock { $0.take() }?.resume(returning: value) }
}
