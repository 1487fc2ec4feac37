import Foundation
import StockroomCore

/// `products.json` as an operator might break it: the syntax checker, the decoder, and the
/// validation against a small content folder made once (files are stat'ed and hashed from there,
/// digests kept in memory, so an input costs no writes). The folder is rewritten at each start.
enum CatalogHarness {
    static let loader: CatalogLoader = {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("stockroom-fuzz-catalog").path
        do {
            for (path, text) in [("books/book1.epub", "a book"), ("levels/level-02.pak", "a level"), ("empty.bin", "")] {
                let file = folder + "/content/" + path
                try FileManager.default.createDirectory(
                    atPath: (file as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
                try Data(text.utf8).write(to: URL(fileURLWithPath: file))
            }
            try FileManager.default.createDirectory(atPath: folder + "/catalog", withIntermediateDirectories: true)
            let jail = try ContentJail(folder: folder + "/content")
            return CatalogLoader(catalogFolder: folder + "/catalog", jail: jail, digests: DigestCache(file: nil))
        } catch {
            fatalError("the fuzz content folder could not be made: \(error)")
        }
    }()

    static func run(_ input: [UInt8]) {
        _ = JSONSyntaxError.find(in: input)
        guard let file = try? CatalogFile.decode(input) else { return }
        _ = try? loader.validate(file)
    }
}
