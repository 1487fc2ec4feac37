import Foundation
import Hummingbird
import StockroomCore

/// `stockroom-bench CATALOG CONTENT PORT`: serves `GET /content/{productId}` through the
/// ContentStore and ContentResponder that the download routes use, with no verification, so
/// `make bench` can measure streaming alone. A development tool, not shipped.
@main
struct BenchServer {
    static func main() async throws {
        let arguments = CommandLine.arguments
        guard arguments.count == 4, let port = Int(arguments[3]) else {
            FileHandle.standardError.write(Data("usage: stockroom-bench CATALOG CONTENT PORT\n".utf8))
            exit(2)
        }
        StreamingMemory.bound()
        let jail = try ContentJail(folder: arguments[2])
        let catalog = try CatalogLoader(catalogFolder: arguments[1], jail: jail, digests: DigestCache(file: nil)).load()
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
