import Foundation
#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `GET /v1/catalog` with the last copy and its ETag kept on disk: revalidated with
/// `If-None-Match` (a 304 costs no body), and served from the copy when the server is out of reach.
public actor CatalogClient {
    /// Where the answer came from.
    public enum Source: Sendable, Equatable {
        /// A new catalogue (200), now on disk.
        case server
        /// The server said the copy is current (304).
        case notModified
        /// The server could not be reached or failed: the copy on disk, with why.
        case copy(reason: String)
    }

    /// Why no catalogue could be had.
    public enum Failure: Error, Sendable, Equatable {
        /// No answer and no copy on disk.
        case unavailable(String)
    }

    public let server: URL
    public let cacheFolder: URL
    private let transport: HTTPTransport

    /// - Parameters:
    ///   - timeout: the longest wait for a byte, as `Delivery.Configuration.requestTimeout`.
    ///   - trust: which TLS servers are trusted, as `Delivery.Configuration.trust`.
    public init(server: URL, cacheFolder: URL, timeout: TimeInterval = 30, trust: TLSTrust = .system) {
        self.server = server
        self.cacheFolder = cacheFolder
        transport = HTTPTransport(settings: TransportSettings(timeout: timeout, trust: trust))
    }

    deinit { transport.invalidate() }

    /// The catalogue: revalidated, fetched, or from the copy when offline.
    public func catalog() async throws(Failure) -> (catalog: Catalog, source: Source) {
        let copy = readCopy()
        guard let url = ServerOrigin(server)?.url("/v1/catalog") else { throw .unavailable("the server's URL is not an http or https URL") }
        var request = URLRequest(url: url)
        if let etag = copy?.etag { request.setValue(etag, forHTTPHeaderField: "If-None-Match") }
        let result = await transport.collect(request, limit: 16 << 20)
        switch result.response?.statusCode {
        case 304?:
            if let copy { return (copy.catalog, .notModified) }
        case 200?:
            if let catalog = ServerJSON.decode(Catalog.self, from: result.body) {
                try? writeCopy(Copy(etag: result.response?.value(forHTTPHeaderField: "ETag"), catalog: catalog))
                return (catalog, .server)
            }
        default:
            break
        }
        let reason = result.response.map { "HTTP \($0.statusCode)" } ?? result.error.map { "\($0.localizedDescription)" } ?? "no answer"
        guard let copy else { throw .unavailable(reason) }
        return (copy.catalog, .copy(reason: reason))
    }

    /// The copy on disk, if any: the last catalogue and its ETag, in one file.
    struct Copy: Codable {
        var etag: String?
        var catalog: Catalog
    }

    private var copyFile: URL { cacheFolder.appendingPathComponent("catalog.json") }

    private func readCopy() -> Copy? {
        guard let data = try? Data(contentsOf: copyFile) else { return nil }
        return ServerJSON.decode(Copy.self, from: data)
    }

    private func writeCopy(_ copy: Copy) throws {
        try FileManager.default.createDirectory(at: cacheFolder, withIntermediateDirectories: true)
        try JSONEncoder().encode(copy).write(to: copyFile, options: .atomic)
    }
}
