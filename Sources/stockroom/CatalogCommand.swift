import ArgumentParser
import Foundation
import StockroomCore
import StockroomServer

/// `stockroom catalog check | add`: the operator's catalogue tools.
struct CatalogCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "catalog",
        abstract: "Check the catalogue, or add a product to it.",
        subcommands: [Check.self, Add.self]
    )

    /// `stockroom catalog check`: validates as `serve` would at start.
    struct Check: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Validate products.json and its content files; exit 1 with each problem on its own line.")

        @OptionGroup var options: ServerOptions

        func run() async throws {
            let configuration = try options.configuration()
            if configuration.contentFolder.hasPrefix("s3://") {
                let bucket = try BucketCatalog(configuration)
                do throws(CatalogError) {
                    let catalog = try await bucket.loader.load()
                    print(
                        """
                        ok: \(catalog.products.count) product\(catalog.products.count == 1 ? "" : "s"), catalogue version \
                        \(catalog.version)
                        """
                    )
                } catch {
                    for problem in error.problems { print(problem) }
                    throw ExitCode.failure
                }
                return
            }
            let loader = try makeLoader(configuration)
            do {
                let catalog = try loader.load()
                print(
                    "ok: \(catalog.products.count) product\(catalog.products.count == 1 ? "" : "s"), catalogue version \(catalog.version)")
            } catch {
                for problem in error.problems { print(problem) }
                throw ExitCode.failure
            }
        }
    }

    /// `stockroom catalog add`: copies the file into the content folder and rewrites
    /// products.json atomically, after validating the result as a whole.
    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Add a product: copy its file under the content folder and rewrite products.json atomically.",
            discussion: "A running server picks the new product up within a second, without a restart.")

        @OptionGroup var options: ServerOptions

        @Option(help: "The App Store product ID, e.g. com.example.app.book2.")
        var productId: String

        @Option(help: "The content file to copy in.")
        var file: String

        @Option(help: "The title shown in the catalogue.")
        var title: String

        @Option(help: "non-consumable, consumable, auto-renewable or non-renewing.")
        var type: String

        @Option(help: "Where to place the file, relative to the content folder or the bucket's prefix (default: its file name).")
        var path: String?

        @Option(help: "MIME type of the content (default: guessed from the extension).")
        var contentType: String?

        @Option(help: "Version of the content (default 1).")
        var contentVersion: String = "1"

        func run() async throws {
            let configuration = try options.configuration()
            if configuration.contentFolder.hasPrefix("s3://") {
                // Content in a bucket: the file is uploaded there, and the catalogue (a file, or
                // an object in the bucket) gets the entry, as `content push` does.
                try await BucketCatalog(configuration).push(
                    file: file, productID: productId, title: title, type: type, key: path, contentType: contentType,
                    contentVersion: contentVersion)
                return
            }
            let loader = try makeLoader(configuration)
            guard let existing = FileManager.default.contents(atPath: loader.productsFile) else {
                fail("\(loader.productsFile) cannot be read")
            }
            var catalogFile: CatalogFile
            do {
                catalogFile = try CatalogFile.decode(Array(existing))
            } catch {
                fail("the current catalogue is broken; fix it first:\n" + error.problems.joined(separator: "\n"))
            }
            guard FileManager.default.isReadableFile(atPath: file) else { fail("\(file) cannot be read") }
            let relative = path ?? URL(fileURLWithPath: file).lastPathComponent
            let destination = loader.jail.root + "/" + relative
            guard !relative.hasPrefix("/"), !relative.split(separator: "/").contains("..") else {
                fail("--path must stay inside the content folder")
            }
            guard !FileManager.default.fileExists(atPath: destination) else {
                fail("\(relative) already exists in the content folder; choose another --path")
            }
            catalogFile.products.append(
                .init(
                    productId: productId, title: title, type: type, file: relative,
                    contentType: contentType ?? MediaTypes.guess(forPath: relative), contentVersion: contentVersion))

            try copyAtomically(from: file, to: destination)
            let catalog: ProductCatalog
            do {
                catalog = try loader.validate(catalogFile)
            } catch {
                try? FileManager.default.removeItem(atPath: destination)
                for problem in error.problems { print(problem) }
                throw ExitCode.failure
            }
            try AtomicFile.write(try catalogFile.encoded(), to: loader.productsFile)
            let product = catalog.product(id: productId)
            print("added \(productId): \(relative), \(product?.size ?? 0) bytes, sha256 \(product?.sha256 ?? "")")
            print("catalogue version \(catalog.version); a running server picks it up within a second")
        }

        /// Copies to a temporary name in the destination folder, then renames into place.
        private func copyAtomically(from source: String, to destination: String) throws {
            let folder = URL(fileURLWithPath: destination).deletingLastPathComponent().path
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            let temporary = folder + "/.stockroom-add-\(ProcessInfo.processInfo.processIdentifier).tmp"
            try? FileManager.default.removeItem(atPath: temporary)
            try FileManager.default.copyItem(atPath: source, toPath: temporary)
            guard rename(temporary, destination) == 0 else {
                try? FileManager.default.removeItem(atPath: temporary)
                fail("could not place the file at \(destination)")
            }
        }
    }
}

/// The catalogue loader for the configured folders, or a one-line failure.
private func makeLoader(_ configuration: ServerConfiguration) throws -> CatalogLoader {
    do {
        let jail = try ContentJail(folder: configuration.contentFolder)
        return CatalogLoader(
            catalogFolder: configuration.catalogFolder, jail: jail,
            digests: DigestCache(file: configuration.digestCachePath))
    } catch {
        fail("content: \(error)")
    }
}
