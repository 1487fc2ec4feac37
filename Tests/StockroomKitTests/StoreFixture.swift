import Foundation
import StockroomCore
import StockroomTestSupport
import Testing
@testable import StockroomServer

/// The products of `KitFixture` in a real S3 store (SeaweedFS, from `.ci/s3`), a bucket of their
/// own, behind a TCP proxy that records every request the store receives; `configure` makes the
/// fixture's server deliver them by redirect (`--content-delivery redirect`) through that proxy.
struct StoreFixture: Sendable {
    let store: ScratchBucket.Store
    let bucket: S3Client
    /// In front of the store: what reaches the store passes here, Stockroom's own requests too.
    let proxy: TCPProxy
    /// The store as Stockroom reaches it: through the proxy, with Stockroom's keys.
    let settings: ObjectStoreSettings

    static let prefix = "content"

    static func make() async throws -> StoreFixture {
        let (store, bucket) = try await ScratchBucket.make()
        _ = try await bucket.put("\(prefix)/books/book.epub", body: KitFixture.bookBytes, contentType: "application/epub+zip")
        _ = try await bucket.put("\(prefix)/big.bin", body: KitFixture.bigBytes, contentType: "application/octet-stream")
        let port = try #require(URL(string: store.endpoint)?.port, "the store's endpoint has a port")
        let proxy = try TCPProxy(upstreamPort: port)
        let settings = try ObjectStoreSettings(endpoint: proxy.url.absoluteString, region: "us-east-1", credentials: store.credentials)
        return StoreFixture(store: store, bucket: bucket, proxy: proxy, settings: settings)
    }

    /// The server's content in the bucket, delivered by presigned redirect.
    func configure(_ configuration: inout ServerConfiguration, presignLifetime: Duration = .seconds(900)) {
        configuration.contentFolder = "s3://\(bucket.bucket)/\(Self.prefix)"
        configuration.objectStore = settings
        configuration.contentDelivery = .redirect
        configuration.presignLifetime = presignLifetime
    }

    /// The path the store serves a catalogue file at (path-style addressing).
    func path(_ file: String) -> String { "/\(bucket.bucket)/\(Self.prefix)/\(file)" }

    /// Whether a request is Stockroom's own: signed with its key (a catalogue's HEAD or hash, a
    /// HEAD before each presigned URL). The app never has that key, so it cannot sign so.
    func isStockroomsOwn(_ request: ProxiedRequest) -> Bool {
        request.header("Authorization")?.hasPrefix("AWS4-HMAC-SHA256 Credential=\(store.credentials.accessKeyID)/") == true
    }

    /// The requests the store received from anyone but Stockroom: the app's.
    var appRequests: [ProxiedRequest] { proxy.requests.filter { !isStockroomsOwn($0) } }

    /// What the store received that it should not have: any request carrying one of `secrets`, a
    /// cookie or a download token; any other `Authorization` than Stockroom's own signature; and
    /// any request of the app's that is not a bare presigned `GET` of `file` (or of one of
    /// `others`). Empty when all is well.
    func leaks(_ secrets: [String], file: String, others: [String] = []) -> [String] {
        var leaks: [String] = []
        for request in proxy.requests {
            for secret in secrets where request.text.contains(secret) { leaks.append("\(request) carries a secret") }
            for name in ["Cookie", "X-Download-Token", "Proxy-Authorization"] where request.header(name) != nil {
                leaks.append("\(request) has \(name)")
            }
            if request.header("Authorization") != nil, !isStockroomsOwn(request) { leaks.append("\(request) has an Authorization") }
        }
        for request in appRequests {
            if request.method != "GET" || !([file] + others).map(path).contains(request.path) { leaks.append("the app sent \(request)") }
            if !request.query.contains("X-Amz-Signature=") { leaks.append("\(request) is not presigned") }
            if request.header("If-Range") != nil || !request.body.isEmpty { leaks.append("\(request) has If-Range or a body") }
        }
        return leaks
    }
}
