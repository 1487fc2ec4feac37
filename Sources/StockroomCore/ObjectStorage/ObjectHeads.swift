import Synchronization

/// The HEADs that check an object before each download, shared: concurrent downloads of one
/// object wait for one HEAD in flight, a good answer is reused for `freshness` (250 ms), and a
/// failure (missing, refused, the store down) for `failureFreshness` (500 ms).
///
/// So a flood of requests for one product, a stranger's included (the check comes before any
/// verification), costs the store a few HEADs a second, not one each, whether the object is
/// there or not. An
/// object replaced inside that window is still never sent under the old digest: a stream reads it
/// with `If-Match` (412, the body cut short, the download not recorded), and an app checks the
/// digest of what a redirect gave it.
public final class ObjectHeads: Sendable {
    public let client: S3Client
    public let freshness: Duration
    public let failureFreshness: Duration
    private let inFlight = SingleFlight<Result<S3Client.Head, ObjectStoreError>>()
    private let recent = Mutex<[String: (result: Result<S3Client.Head, ObjectStoreError>, at: ContinuousClock.Instant)]>([:])
    /// Past this many keys the remembered heads are dropped (a catalogue is rarely larger).
    static let largestMemory = 10_000

    public init(client: S3Client, freshness: Duration = .milliseconds(250), failureFreshness: Duration = .milliseconds(500)) {
        self.client = client
        self.freshness = freshness
        self.failureFreshness = failureFreshness
    }

    public func head(_ key: String) async throws(ObjectStoreError) -> S3Client.Head {
        let now = ContinuousClock.now
        if let remembered = recent.withLock({ $0[key] }) {
            switch remembered.result {
            case .success(let head) where now - remembered.at < freshness: return head
            case .failure(let error) where now - remembered.at < failureFreshness: throw error
            default: break
            }
        }
        let client = self.client
        let result = await inFlight.run(key) {
            do throws(ObjectStoreError) { return .success(try await client.head(key)) } catch { return .failure(error) }
        }
        recent.withLock { recent in
            if recent.count >= Self.largestMemory { recent.removeAll() }
            recent[key] = (result, ContinuousClock.now)
        }
        return try result.get()
    }

    /// Forgets `key`'s head (its object changed).
    public func forget(_ key: String) {
        _ = recent.withLock { $0.removeValue(forKey: key) }
    }
}
