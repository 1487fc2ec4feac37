/// Runs one operation per key at a time: callers that arrive while it runs await its result
/// instead of starting their own.
actor SingleFlight<Value: Sendable> {
    private var running: [String: Task<Value, Never>] = [:]

    func run(_ key: String, _ operation: @escaping @Sendable () async -> Value) async -> Value {
        if let task = running[key] { return await task.value }
        let task = Task { await operation() }
        running[key] = task
        let value = await task.value
        running[key] = nil
        return value
    }
}
