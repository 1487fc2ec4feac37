import Synchronization

/// The HEADs that check an object before each download, shared: concurrent downloads of one
/// object wait for one HEAD in flight, and a good answer is reused for `freshness` (250 ms).
///
/// So a flood of requests for one product costs the store a few HEADs a second, not one each. An
/// object replaced inside that window is still never sent under the old digest: a stream reads it
/// with `If-Match` (412, the body cut short, the download not recorded), and an app checks the
/// digest of what a redirect gave it.
public final class ObjectHeads: Sendable {
    public let client: S3Client
    public let freshness: Duration
    private let inFlight = SingleFlight<Result<S3Client.Head, ObjectStoreError>>()
    private let recent = Mutex<[String: (head: S3Client.Head, at: ContinuousClock.Instant)]>([:])
    /// Past this many keys the remembered heads are dropped (a catalogue is rarely larger).
    static let largestMemory = 10_000

    public init(client: S3Client, freshness: Duration = .milliseconds(250)) {
        self.client = client
        self.freshness = freshness
    }

    public func head(_ key: String) async throws(ObjectStoreError) -> S3Client.Head {
        let now = ContinuousClock.now
        if let remembered = recent.withLock({ $0[key] }), now - remembered.at < freshness { return remembered.head }
        let client = self.client
        let result = await inFlight.run(key) {
            do throws(ObjectStoreError) { return .success(try await client.head(key)) } catch { return .failure(error) }
        }
        let head = try result.get()
        recent.withLock { recent in
            if recent.count >= Self.largestMemory { recent.removeAll() }
            recent[key] = (head, ContinuousClock.now)
        }
        return head
    }

    /// Forgets `key`'s head (its object changed).
    public func forget(_ key: String) {
        _ = recent.withLock { $0.removeValue(forKey: key) }
    }
}
