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
        /// Seconds without a byte (or for a whole response head) before a request is given up,
        /// and the window over which a body must average `minimumBytesPerSecond`.
        public var requestTimeout: TimeInterval = 60
        /// The slowest body accepted: a server that trickles its bytes ends in `retryLater`.
        public var minimumBytesPerSecond = 1024
        /// Which TLS servers are trusted: the system's authorities by default; an app's own CA
        /// file, and pinned keys, where it wants them.
        public var trust = TLSTrust.system
        /// Which TLS servers are trusted as the object store Stockroom may send content to (a `303`
        /// or `307` to a presigned URL): the system's authorities by default. `trust`'s pins are
        /// Stockroom's key, so they never apply there; the store's bytes are checked against
        /// Stockroom's digest whatever it is.
        public var storeTrust = TLSTrust.system
        /// The catalogue the app sells, when it has one: only its products are delivered (a
        /// restore that lists another is refused for it), and no body is longer than the
        /// product's size.
        public var catalog: Catalog?
        /// The clock that `Retry-After` and the backoff are measured on.
        public var now: @Sendable () -> Date = { Date() }
        /// Each step, for a log (and the tests).
        public var observer: (@Sendable (DeliveryEvent) -> Void)?
        /// What carries the transfers; the tests also run URLSession on Linux.
        var transportEngine = HTTPTransport.Engine.automatic

        /// Files go to `folder/<productID>`; the product ID is always one `NetworkName` accepts,
        /// so it is one name in `folder`, never a path.
        public init(server: URL, journalFolder: URL, folder: URL) {
            self.server = server
            self.journalFolder = journalFolder
            self.destination = { productID, _ in folder.appendingPathComponent(productID) }
        }
    }

    /// The longest wait the client accepts from a server: a `Retry-After` of years is a day.
    public static let longestWait: Duration = .seconds(86_400)

    /// Why a `Delivery` cannot be set up.
    public enum ConfigurationError: Error, Sendable, Equatable {
        /// The server's URL is not an `http` or `https` URL with a host.
        case serverNotHTTP(URL)
        /// The journal and the files share a folder: a product's file could take an entry's name.
        case journalAmongFiles(URL)
    }

    let configuration: Configuration
    let origin: ServerOrigin
    let journal: Journal
    let transport: HTTPTransport
    /// What carries the requests to an object store: the same deadlines, the store's trust, and
    /// never a request of the server's (`Delivery+Store`).
    let storeTransport: HTTPTransport
    let progressBroadcast = ProgressBroadcast()
    private var inFlight: [String: Task<Attempt, Never>] = [:]
    private var permits: Int
    private var waiting: [CheckedContinuation<Void, Never>] = []
    private let safeToFinishContinuation: AsyncStream<String>.Continuation

    /// Transaction IDs as they become safe to finish: each reported once, also across relaunches
    /// (the journal remembers). `deliver` answers `.delivered` each time it is asked, so an app
    /// killed between the report and `finish()` still finishes.
    public nonisolated let safeToFinish: AsyncStream<String>

    public init(configuration: Configuration) throws {
        guard let origin = ServerOrigin(configuration.server) else { throw ConfigurationError.serverNotHTTP(configuration.server) }
        let files = configuration.destination("com.example.probe", "1").deletingLastPathComponent()
        guard
            files.standardizedFileURL.resolvingSymlinksInPath() != configuration.journalFolder.standardizedFileURL.resolvingSymlinksInPath()
        else {
            throw ConfigurationError.journalAmongFiles(configuration.journalFolder)
        }
        var configuration = configuration
        // The app's own numbers, kept where no conversion traps.
        if !configuration.requestTimeout.isFinite || configuration.requestTimeout <= 0 { configuration.requestTimeout = 60 }
        configuration.requestTimeout = min(configuration.requestTimeout, 86_400)
        configuration.minimumBytesPerSecond = min(max(configuration.minimumBytesPerSecond, 0), 1 << 40)
        self.configuration = configuration
        self.origin = origin
        var journal = try Journal(folder: configuration.journalFolder)
        let observer = configuration.observer
        journal.onSetAside = { transactionID, reason in observer?(.journalEntrySetAside(transactionID: transactionID, reason: reason)) }
        self.journal = journal
        let settings = TransportSettings(
            timeout: configuration.requestTimeout, minimumBytesPerSecond: Int64(max(0, configuration.minimumBytesPerSecond)),
            trust: configuration.trust,
            maximumConnectionsPerHost: max(configuration.maximumConcurrentDeliveries, 1) + 2)
        self.transport = HTTPTransport(settings: settings, engine: configuration.transportEngine)
        var storeSettings = settings
        storeSettings.trust = configuration.storeTrust
        self.storeTransport = HTTPTransport(settings: storeSettings, engine: configuration.transportEngine)
        self.permits = max(1, configuration.maximumConcurrentDeliveries)
        (safeToFinish, safeToFinishContinuation) = AsyncStream<String>.makeStream()
    }

    deinit {
        transport.invalidate()
        storeTransport.invalidate()
        safeToFinishContinuation.finish()
    }

    /// Delivers `purchase`, or tells why not and what to do with its transaction.
    ///
    /// Asking again for a transaction being delivered waits for that delivery; asking again for
    /// one delivered answers from the journal without a request.
    public func deliver(_ purchase: Purchase) async -> DeliveryOutcome {
        if let refusal = refusal(productID: purchase.productID, transactionID: purchase.transactionID) { return refusal }
        return await delivering(purchase.transactionID) { delivery in
            await delivery.start(purchase)
        }.outcome
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

    /// How one delivery went: its outcome, and whether it fetched the file (false when an intact
    /// copy was on disk).
    struct Attempt: Sendable {
        var outcome: DeliveryOutcome
        var downloaded: Bool
    }

    func delivering(_ transactionID: String, _ body: @escaping @Sendable (isolated Delivery) async -> Attempt) async -> Attempt {
        if let running = inFlight[transactionID] { return await running.value }
        let journal = self.journal
        let task = Task {
            await self.withPermit {
                // One delivery of a transaction at a time, across processes too.
                let lock: TransactionLock?
                do {
                    lock = try journal.lock(transactionID)
                } catch {
                    return Attempt(outcome: self.storageFailure(error), downloaded: false)
                }
                guard let lock else {
                    return Attempt(
                        outcome: .retryLater(
                            after: .seconds(5), OutcomeReason(code: "busy", message: "Another process is delivering this purchase.")),
                        downloaded: false)
                }
                let attempt = await body(self)
                withExtendedLifetime(lock) {}
                return attempt
            }
        }
        inFlight[transactionID] = task
        let outcome = await task.value
        inFlight[transactionID] = nil
        progressBroadcast.finish(transactionID)
        return outcome
    }

    private func withPermit(_ body: () async -> Attempt) async -> Attempt {
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

    func start(_ purchase: Purchase) async -> Attempt {
        if let refusal = refusal(productID: purchase.productID, transactionID: purchase.transactionID) {
            return Attempt(outcome: refusal, downloaded: false)
        }
        var entry: JournalEntry
        do {
            entry =
                try recorded(purchase.transactionID, of: purchase.productID)
                ?? JournalEntry(
                    transactionID: purchase.transactionID, originalTransactionID: purchase.originalTransactionID,
                    productID: purchase.productID,
                    renewal: .download(purchase.proof), appAccountToken: purchase.appAccountToken, consent: purchase.consent,
                    destination: destination(purchase.productID, purchase.transactionID))
        } catch {
            return Attempt(outcome: storageFailure(error), downloaded: false)
        }
        entry.destination = destination(purchase.productID, purchase.transactionID)
        let onDisk = adoptIntactFile(&entry, sha256: catalogueProduct(purchase.productID)?.sha256)
        // The app's proof is the freshest (a refreshed receipt replaces a stale one).
        if case .download = entry.renewal { entry.renewal = .download(purchase.proof) }
        entry.appAccountToken = purchase.appAccountToken ?? entry.appAccountToken
        entry.consent = purchase.consent ?? entry.consent
        return Attempt(outcome: await drive(&entry), downloaded: !onDisk)
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

    /// Why a purchase named so cannot be delivered, before anything touches the disk or the
    /// network: a name `NetworkName` refuses, or a product outside the app's catalogue.
    func refusal(productID: String, transactionID: String) -> DeliveryOutcome? {
        guard NetworkName.isProductID(productID), NetworkName.isTransactionID(transactionID) else {
            return .refused(OutcomeReason(code: "invalid_name", message: "The product or transaction ID is not one the App Store gives."))
        }
        if let catalog = configuration.catalog, !catalog.productIDs.contains(productID) {
            return .refused(OutcomeReason(code: "not_in_catalogue", message: "\(productID) is not in the app's catalogue."))
        }
        return nil
    }

    /// The journal's entry of `transactionID` when it is about `productID`; one about another
    /// product under the same transaction ID tells nothing about this one.
    func recorded(_ transactionID: String, of productID: String) throws -> JournalEntry? {
        try journal.entry(transactionID).flatMap { $0.productID == productID ? $0 : nil }
    }

    /// Where the checked file of a purchase goes: always where the configuration says now.
    func destination(_ productID: String, _ transactionID: String) -> String {
        configuration.destination(productID, transactionID).path
    }

    /// The URL of one of the client's own paths on the server (constant, or with a checked
    /// transaction ID): always on the server's origin.
    func endpoint(_ path: String) -> URL {
        origin.url(path) ?? origin.base
    }

    /// The catalogue's entry for `productID`, when the app gave one.
    func catalogueProduct(_ productID: String) -> Catalog.Product? {
        configuration.catalog?.products.first { $0.productID == productID }
    }
}
