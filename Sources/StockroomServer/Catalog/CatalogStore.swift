public import Logging
import NIOPosix
public import StockroomCore
import Synchronization

/// The catalogue being served, swapped whole when a reload succeeds.
///
/// Readers take the current value under a lock and never see a half-loaded catalogue; a
/// reload that fails leaves the last good one serving.
public final class CatalogStore: Sendable {
    public let loader: CatalogLoader
    private let current: Mutex<Catalog>
    /// The file stamps of the last failed reload, so one bad edit is logged once, not every poll.
    private let failedSnapshot = Mutex<[String: FileStamp?]?>(nil)

    public init(catalog: Catalog, loader: CatalogLoader) {
        self.loader = loader
        self.current = Mutex(catalog)
    }

    /// The catalogue to answer this request with.
    public var catalog: Catalog { current.withLock { $0 } }

    /// Reloads when `products.json` or a content file changed since the last load.
    /// Returns whether a new catalogue is now served. Stats and hashing run on the catalogue's own thread pool.
    @discardableResult
    public func reloadIfChanged(logger: Logger) async -> Bool {
        let watched = catalog.watchedFiles
        let loader = self.loader
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
            let previous = current.withLock { current in
                defer { current = catalog }
                return current.version
            }
            failedSnapshot.withLock { $0 = nil }
            if previous != catalog.version {
                logger.info("catalogue reloaded", metadata: ["version": .string(catalog.version), "products": .stringConvertible(catalog.products.count)])
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
        case loaded(Catalog)
        case failed(CatalogError)
    }
}
