public import Logging
import NIOPosix
public import StockroomCore
import Synchronization

/// The catalogue being served, swapped whole when a reload succeeds.
///
/// Readers take the current value under a lock and never see a half-loaded catalogue; a
/// reload that fails leaves the last good one serving.
public final class CatalogStore: Sendable {
    /// Where the catalogue and its content come from.
    public enum Source: Sendable {
        case folder(CatalogLoader)
        case bucket(ObjectCatalogLoader)
    }

    public let source: Source
    /// The catalogue, and its `GET /v1/catalog` answer rendered once (`CatalogFastPath`).
    private let current: Mutex<(catalog: ProductCatalog, answer: CatalogAnswer)>
    /// The file stamps of the last failed reload, so one bad edit is logged once, not every poll.
    private let failedSnapshot = Mutex<[String: FileStamp?]?>(nil)
    /// For a bucket, the problems of the last failed reload (or why the store could not be
    /// read), so that they are logged once, not at every poll.
    private let lastBucketFailure = Mutex<String?>(nil)

    public init(catalog: ProductCatalog, loader: CatalogLoader) {
        self.source = .folder(loader)
        self.current = Mutex((catalog, CatalogAnswer(catalog)))
    }

    public init(catalog: ProductCatalog, objects: ObjectCatalogLoader) {
        self.source = .bucket(objects)
        self.current = Mutex((catalog, CatalogAnswer(catalog)))
    }

    /// The catalogue to answer this request with.
    public var catalog: ProductCatalog { current.withLock { $0.catalog } }

    /// The `GET /v1/catalog` answer of the catalogue being served.
    var answer: CatalogAnswer { current.withLock { $0.answer } }

    /// Reloads when `products.json` or a content file (or object) changed since the last load.
    /// Returns whether a new catalogue is now served. Stats and hashing run on the catalogue's own thread pool.
    @discardableResult
    public func reloadIfChanged(logger: Logger) async -> Bool {
        switch source {
        case .folder(let loader): return await reloadFolder(loader, logger: logger)
        case .bucket(let loader): return await reloadBucket(loader, logger: logger)
        }
    }

    private func reloadBucket(_ loader: ObjectCatalogLoader, logger: Logger) async -> Bool {
        let served = catalog
        guard let changed = await loader.changed(since: served) else {
            noteBucketFailure("the object store could not be read; the last good catalogue keeps serving", problems: nil, logger: logger)
            return false
        }
        guard changed else {
            lastBucketFailure.withLock { $0 = nil }
            return false
        }
        do throws(CatalogError) {
            let loaded = try await loader.load()
            let answer = CatalogAnswer(loaded)
            current.withLock { $0 = (loaded, answer) }
            lastBucketFailure.withLock { $0 = nil }
            if loaded.version != served.version {
                logger.info(
                    "catalogue reloaded",
                    metadata: ["version": .string(loaded.version), "products": .stringConvertible(loaded.products.count)])
            }
            return true
        } catch {
            noteBucketFailure("catalogue change refused; the last good catalogue keeps serving", problems: error.problems, logger: logger)
            return false
        }
    }

    private func noteBucketFailure(_ message: String, problems: [String]?, logger: Logger) {
        let text = message + (problems.map { ": " + $0.joined(separator: "; ") } ?? "")
        let isNew = lastBucketFailure.withLock { last in
            defer { last = text }
            return last != text
        }
        guard isNew else { return }
        var metadata: Logger.Metadata = ["version": .string(catalog.version)]
        if let problems { metadata["problems"] = .string(problems.joined(separator: "; ")) }
        logger.warning("\(message)", metadata: metadata)
    }

    private func reloadFolder(_ loader: CatalogLoader, logger: Logger) async -> Bool {
        let watched = catalog.watchedFiles
        let outcome: ReloadOutcome? = try? await NIOThreadPool.catalog.runIfActive { () -> ReloadOutcome in
            var snapshot: [String: FileStamp?] = [:]
            for path in watched.keys { snapshot[path] = FileStamp.of(path: path) }
            guard snapshot.contains(where: { watched[$0.key] != $0.value }) else { return .unchanged }
            guard self.failedSnapshot.withLock({ $0 }) != snapshot else { return .unchanged }
            do throws(CatalogError) {
                return .loaded(try loader.load())
            } catch {
                self.failedSnapshot.withLock { $0 = snapshot }
                return .failed(error)
            }
        }
        switch outcome {
        case .loaded(let catalog):
            let answer = CatalogAnswer(catalog)
            let previous = current.withLock { current in
                defer { current = (catalog, answer) }
                return current.catalog.version
            }
            failedSnapshot.withLock { $0 = nil }
            if previous != catalog.version {
                logger.info(
                    "catalogue reloaded",
                    metadata: ["version": .string(catalog.version), "products": .stringConvertible(catalog.products.count)])
            }
            return true
        case .failed(let error):
            logger.warning(
                "catalogue change refused; the last good catalogue keeps serving",
                metadata: ["problems": .string(error.problems.joined(separator: "; ")), "version": .string(catalog.version)])
            return false
        case .unchanged, nil:
            return false
        }
    }

    private enum ReloadOutcome: Sendable {
        case unchanged
        case loaded(ProductCatalog)
        case failed(CatalogError)
    }
}
