import Foundation
import Hummingbird
import StockroomCore

/// `make bench` only, never shipped:
/// - `StockroomBench content CATALOG CONTENT PORT` serves `GET /content/{productId}` through the
///   ContentStore and ContentResponder the download routes use, with no verification in front;
/// - `StockroomBench verify SIMULATOR_URL COUNT` times receipt verifications against a running
///   simulator and prints p50/p99 and upstream calls per verification.
@main
struct BenchServer {
    static func main() async throws {
        let arguments = Array(CommandLine.arguments.dropFirst())
        switch (arguments.first, arguments.count) {
        case ("content", 4):
            guard let port = Int(arguments[3]) else { usage() }
            try await serveContent(catalog: arguments[1], content: arguments[2], port: port)
        case ("verify", 3):
            guard let count = Int(arguments[2]), count > 0 else { usage() }
            try await VerificationBench(simulatorURL: arguments[1], count: count).run()
        default:
            usage()
        }
    }

    static func usage() -> Never {
        FileHandle.standardError.write(Data("usage: StockroomBench content CATALOG CONTENT PORT | verify SIMULATOR_URL COUNT\n".utf8))
        exit(2)
    }

    static func serveContent(catalog catalogFolder: String, content: String, port: Int) async throws {
        StreamingMemory.bound()
        let jail = try ContentJail(folder: content)
        let catalog = try CatalogLoader(catalogFolder: catalogFolder, jail: jail, digests: DigestCache(file: nil)).load()
        let responder = ContentResponder(store: LocalContentStore(jail: jail))

        let router = Router(options: .autoGenerateHeadEndpoints)
        router.get("content/:productId") { request, context -> Response in
            guard let product = catalog.product(id: try context.parameters.require("productId")) else {
                throw HTTPError(.notFound)
            }
            return try await responder.response(to: request.head, representation: product.representation)
        }
        let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: port)))
        try await app.runService()
    }
}
