import Foundation

/// Bytes of one transaction's file on disk so far, and the whole size once the server said it.
public struct DeliveryProgress: Sendable, Equatable {
    public var transactionID: String
    public var bytes: Int64
    public var total: Int64?

    public init(transactionID: String, bytes: Int64, total: Int64?) {
        self.transactionID = transactionID
        self.bytes = bytes
        self.total = total
    }

    /// 0…1 once the total is known.
    public var fraction: Double? { total.flatMap { $0 > 0 ? Double(bytes) / Double($0) : nil } }
}

/// Hands each transaction's progress to whoever subscribed to it (`Delivery.progress(of:)`).
final class ProgressBroadcast: @unchecked Sendable {
    private let lock = NSLock()
    private var subscribers: [String: [UUID: AsyncStream<DeliveryProgress>.Continuation]] = [:]

    func stream(_ transactionID: String) -> AsyncStream<DeliveryProgress> {
        let (stream, continuation) = AsyncStream<DeliveryProgress>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let id = UUID()
        lock.withLock { subscribers[transactionID, default: [:]][id] = continuation }
        continuation.onTermination = { [weak self] _ in
            guard let self else { return }
            _ = self.lock.withLock { self.subscribers[transactionID]?.removeValue(forKey: id) }
        }
        return stream
    }

    func send(_ progress: DeliveryProgress) {
        for continuation in lock.withLock({ Array(subscribers[progress.transactionID, default: [:]].values) }) {
            continuation.yield(progress)
        }
    }

    /// The delivery of `transactionID` ended: its streams end too.
    func finish(_ transactionID: String) {
        for continuation in lock.withLock({ Array(subscribers.removeValue(forKey: transactionID)?.values ?? [:].values) }) {
            continuation.finish()
        }
    }
}
