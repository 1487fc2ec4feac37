import AppStoreSimulator
import Foundation
import StockroomCore
import StockroomTestSupport
import Synchronization
import Testing
@testable import StockroomServer

#if canImport(Glibc)
    import Glibc
#endif

/// A real nginx on loopback, configured with the site `stockroom deploy nginx` prints
/// (`NginxSite.httpInclude`, the same function), in front of a live server with
/// `--offload x-accel-redirect` verifying against a live simulator.
///
/// nginx's pid file, logs and temporary folders are in a temporary folder; it is stopped when
/// the body returns or throws.
struct OffloadNginxFixture: Sendable {
    /// The server behind nginx, its ledger and simulator (`server.client` talks to it directly).
    let server: DownloadFixture
    /// Where nginx listens.
    let port: Int
    /// The content folder the server and nginx share.
    let contentFolder: String

    static let prefix = "/_protected/"
    /// A file name that only arrives whole if `X-Accel-Redirect` is percent-encoded right.
    static let oddFile = "odd/a b?#%25é.bin"
    static let oddProduct = "com.example.odd"
    static let oddBytes = sampleBytes(count: 3_000, seed: 3)

    static func run<Value: Sendable>(
        _ configure: @Sendable (inout ServerConfiguration) -> Void = { _ in },
        _ body: @Sendable @escaping (OffloadNginxFixture) async throws -> Value
    ) async throws -> Value {
        let reportPort = try FreePort.make(SOCK_DGRAM)
        let nginxPort = try FreePort.make(SOCK_STREAM)
        let content = ContentFolderBox()
        let offload = try #require(try ContentOffload.parse(mode: "x-accel-redirect", prefix: prefix, report: "127.0.0.1:\(reportPort)"))
        return try await DownloadFixture.run({ configuration in
            AttackLimitTests.withHugeProduct(&configuration)
            Self.addOddProduct(&configuration)
            configuration.offload = offload
            // As `stockroom deploy nginx` tells the operator: nginx reaches Stockroom from loopback.
            configuration.trustedProxies = try! TrustedProxies(parsing: ["127.0.0.1"])
            configure(&configuration)
            content.folder.withLock { $0 = configuration.contentFolder }
        }) { server in
            let folder = content.folder.withLock { $0 }
            let stockroomPort = try #require(server.client.port)
            let site = try NginxSite(
                listen: "127.0.0.1:\(nginxPort)", stockroom: "http://127.0.0.1:\(stockroomPort)", contentFolder: folder,
                offloadPrefix: prefix, report: offload.report)
            let nginx = try NginxProcess(site: site, port: nginxPort)
            do {
                try await nginx.waitUntilServing()
                let value = try await body(OffloadNginxFixture(server: server, port: nginxPort, contentFolder: folder))
                await nginx.stop()
                return value
            } catch {
                Issue.record("nginx's error log:\n\(nginx.errorLog())")
                await nginx.stop()
                throw error
            }
        }
    }

    /// A request to nginx, which answers it from Stockroom (and the content folder).
    func send(
        _ method: UpstreamRequest.Method, _ path: String, headers: [(name: String, value: String)] = [], body: [UInt8]? = nil,
        limit: Int = 16 << 20
    ) async throws -> UpstreamResponse {
        let client = CurlHTTPClient(configuration: .init(maximumResponseBytes: limit))
        return try await client.send(UpstreamRequest(method: method, url: "http://127.0.0.1:\(port)\(path)", headers: headers, body: body))
    }

    /// `POST /v1/downloads` for `purchase` through nginx.
    func post(_ purchase: SimulatorControl.Purchase, product: String = DownloadFixture.book, limit: Int = 16 << 20) async throws
        -> UpstreamResponse
    {
        let body = try JSONSerialization.data(withJSONObject: [
            "productId": product, "transactionId": purchase.transactionId, "receiptData": purchase.receiptData,
        ])
        return try await send(.post, "/v1/downloads", body: Array(body), limit: limit)
    }

    /// `GET /v1/downloads/{tx}/content` through nginx with the bearer `token`.
    func content(_ transactionID: String, token: String, headers: [(name: String, value: String)] = []) async throws -> UpstreamResponse {
        try await send(.get, "/v1/downloads/\(transactionID)/content", headers: [("Authorization", "Bearer \(token)")] + headers)
    }

    private static func addOddProduct(_ configuration: inout ServerConfiguration) {
        let file = configuration.contentFolder + "/" + oddFile
        try? FileManager.default.createDirectory(atPath: configuration.contentFolder + "/odd", withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: file, contents: Data(oddBytes))
        let catalog = ServerFixture.catalog([
            ServerFixture.entry("com.example.book", file: "books/book.epub"), ServerFixture.entry("com.example.big", file: "big.bin"),
            ServerFixture.entry(AttackLimitTests.huge, file: "huge.bin"), ServerFixture.entry(oddProduct, file: oddFile),
        ])
        _ = FileManager.default.createFile(atPath: configuration.catalogFolder + "/products.json", contents: Data(catalog.utf8))
    }
}

/// The content folder, learnt while the configuration is built.
private final class ContentFolderBox: Sendable {
    let folder = Mutex("")
}

/// A loopback port free a moment ago: bound to port 0, read back, released.
/// A port nothing listens on, for nginx and its report socket.
///
/// Chosen below Linux's ephemeral range (32768–60999): a port from that range can be handed to
/// another test's outgoing connection between our asking and nginx's `bind()`.
enum FreePort {
    static func make(_ kind: __socket_type) throws -> Int {
        for _ in 0..<200 {
            let port = Int.random(in: 20_000..<32_000)
            if try isFree(port, kind) { return port }
        }
        throw POSIXError(.EADDRINUSE)
    }

    private static func isFree(_ port: Int, _ kind: __socket_type) throws -> Bool {
        let descriptor = socket(AF_INET, Int32(kind.rawValue), 0)
        guard descriptor >= 0 else { throw POSIXError(.EMFILE) }
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let length = socklen_t(MemoryLayout<sockaddr_in>.size)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in bind(descriptor, pointer, length) == 0 }
        }
    }
}
