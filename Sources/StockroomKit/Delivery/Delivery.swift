import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Takes a purchase and delivers it: the file streamed to disk, checked against `Repr-Digest`,
/// moved into place, acknowledged, and only then reported safe to finish.
///
/// A journal on disk (`Journal`) lets a relaunched app resume where a killed one stopped. One
/// stream per transaction at a time (the server allows a few; one is all a resume needs), and at
/// most `maximumConcurrentDeliveries` transactions at once.
public actor Delivery {
    /// Where the server is, where the journal and files go, and how hard to try.
    public struct Configuration: Sendable {
        /// Stockroom's base URL, e.g. `https://content.example.com`.
        public var server: URL
        /// The journal's folder (one small file per transaction); keep it in Application Support.
        public var journalFolder: URL
        /// Where a product's checked file goes: by default `folder/<productID>`.
        public var destination: @Sendable (_ productID: String, _ transactionID: String) -> URL
        public var maximumConcurrentDeliveries = 4
        /// Whole downloads that fail the digest check before the delivery is left for later.
        public var maximumDigestFailures = 3
        /// Interrupted transfers in a row that brought no new byte before the delivery is left for later.
        public var maximumInterruptions = 3
        /// Seconds without a byte before a request is given up.
        public var requestTimeout: TimeInterval = 60
        /// The clock that `Retry-After` and the backoff are measured on.
        public var now: @Sendable () -> Date = { Date() }
        /// Each step, for a log (and the tests).
        public var observer: (@Sendable (DeliveryEvent) -> Void)?
        /// What carries the transfers; the tests also run URLSession on Linux.
        var transportEngine = HTTPTransport.Engine.automatic

        /// Files go to `folder/<productID>`.
        public init(server: URL, journalFolder: URL, folder: URL) {
            self.server = server
            self.journalFolder = journalFolder
            self.destination = { productID, _ in folder.appendingPathComponent(productID) }
        }
    }

    let configuration: Configuration
    let journal: Journal
    let transport: HTTPTransport
    let progressBroadcast = ProgressBroadcast()
    private var inFlight: [String: Task<DeliveryOutcome, Never>] = [:]
    private var permits: Int
    private var waiting: [CheckedContinuation<Void, Never>] = []
    private let safeToFinishContinuation: AsyncStream<String>.Continuation

    /// Transaction IDs as they become safe to finish: each reported once, also across relaunches
    /// (the journal remembers). `deliver` answers `.delivered` each time it is asked, so an app
    /// killed between the report and `finish()` still finishes.
    public nonisolated let safeToFinish: AsyncStream<String>

    public init(configuration: Configuration) throws {
        self.configuration = configuration
        self.journal = try Journal(folder: configuration.journalFolder)
        let session = URLSessionConfiguration.ephemeral
        session.timeoutIntervalForRequest = configuration.requestTimeout
        session.httpMaximumConnectionsPerHost = max(configuration.maximumConcurrentDeliveries, 1) + 2
        self.transport = HTTPTransport(configuration: session, engine: configuration.transportEngine)
        self.permits = max(1, configuration.maximumConcurrentDeliveries)
        (safeToFinish, safeToFinishContinuation) = AsyncStream<String>.makeStream()
    }

    deinit {
        transport.invalidate()
        safeToFinishContinuation.finish()
    }

    /// Delivers `purchase`, or tells why not and what to do with its transaction.
    ///
    /// Asking again for a transaction being delivered waits for that delivery; asking again for
    /// one delivered answers from the journal without a request.
    public func deliver(_ purchase: Purchase) async -> DeliveryOutcome {
        await delivering(purchase.transactionID) { delivery in
            await delivery.start(purchase)
        }
    }

    /// The progress of `transactionID`'s next (or current) delivery; the sequence ends with it.
    public nonisolated func progress(of transactionID: String) -> AsyncStream<DeliveryProgress> {
        progressBroadcast.stream(transactionID)
    }

    /// What the journal holds for `transactionID`.
    public func journalEntry(_ transactionID: String) -> JournalEntry? {
        try? journal.entry(transactionID)
    }

    // MARK: One delivery per transaction, a few at once

    func delivering(_ transactionID: String, _ body: @escaping @Sendable (isolated Delivery) async -> DeliveryOutcome) async -> DeliveryOutcome {
        if let running = inFlight[transactionID] { return await running.value }
        let task = Task { await self.withPermit { await body(self) } }
        inFlight[transactionID] = task
        let outcome = await task.value
        inFlight[transactionID] = nil
        progressBroadcast.finish(transactionID)
        return outcome
    }

    private func withPermit(_ body: () async -> DeliveryOutcome) async -> DeliveryOutcome {
        if permits > 0 {
            permits -= 1
        } else {
            await withCheckedContinuation { waiting.append($0) }
        }
        let outcome = await body()
        if waiting.isEmpty { permits += 1 } else { waiting.removeFirst().resume() }
        return outcome
    }

    // MARK: Start from a purchase

    private func start(_ purchase: Purchase) async -> DeliveryOutcome {
        var entry: JournalEntry
        do {
            entry = try journal.entry(purchase.transactionID) ?? JournalEntry(
                transactionID: purchase.transactionID, originalTransactionID: purchase.originalTransactionID, productID: purchase.productID,
                renewal: .download(purchase.proof), appAccountToken: purchase.appAccountToken, consent: purchase.consent,
                destination: configuration.destination(purchase.productID, purchase.transactionID).path)
        } catch {
            return storageFailure(error)
        }
        // The app's proof is the freshest (a refreshed receipt replaces a stale one).
        if case .download = entry.renewal { entry.renewal = .download(purchase.proof) }
        entry.appAccountToken = purchase.appAccountToken ?? entry.appAccountToken
        entry.consent = purchase.consent ?? entry.consent
        return await drive(&entry)
    }

    // MARK: Shared helpers

    func save(_ entry: JournalEntry) throws {
        try journal.write(entry)
    }

    func storageFailure(_ error: any Error) -> DeliveryOutcome {
        .retryLater(after: .seconds(30), OutcomeReason(code: "storage", message: "The journal or the file could not be written: \(error)"))
    }

    func emit(_ event: DeliveryEvent) {
        configuration.observer?(event)
    }

    /// Reports `entry` safe to finish, once: the journal's `reported` stage remembers it.
    func reportSafeToFinish(_ entry: inout JournalEntry) -> DeliveryOutcome {
        let file = URL(fileURLWithPath: entry.destination)
        if entry.stage < .reported {
            entry.stage = .reported
            do { try save(entry) } catch { return storageFailure(error) }
            safeToFinishContinuation.yield(entry.transactionID)
        }
        return .delivered(file: file)
    }

    func url(_ path: String) -> URL {
        URL(string: path, relativeTo: configuration.server)?.absoluteURL ?? configuration.server.appendingPathComponent(path)
    }
}
