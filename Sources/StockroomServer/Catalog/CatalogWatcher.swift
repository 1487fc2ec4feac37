import Logging
import ServiceLifecycle

/// Polls the catalogue's files and reloads it when one changes, so operators add products
/// without a restart.
///
/// Polling a handful of `stat` calls a second is cheap and works on every file system,
/// bind mounts and network shares included, where inotify does not.
struct CatalogWatcher: Service {
    let store: CatalogStore
    let interval: Duration
    let logger: Logger

    func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                do {
                    try await Task.sleep(for: interval)
                } catch {
                    return
                }
                await store.reloadIfChanged(logger: logger)
            }
        }
    }
}

extension CatalogWatcher: CustomStringConvertible {
    var description: String { "CatalogWatcher" }
}
