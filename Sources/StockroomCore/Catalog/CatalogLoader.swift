import Foundation

/// Reads `products.json`, validates every entry against the content folder, and hashes the
/// files (through the digest cache), producing a `ProductCatalog` or every problem found.
public struct CatalogLoader: Sendable {
    public let catalogFolder: String
    public let jail: ContentJail
    public let digests: DigestCache

    public init(catalogFolder: String, jail: ContentJail, digests: DigestCache) {
        self.catalogFolder = catalogFolder
        self.jail = jail
        self.digests = digests
    }

    /// `products.json` inside the catalogue folder.
    public var productsFile: String { catalogFolder + "/products.json" }

    /// Loads and validates the catalogue. Blocking (reads and hashes files): call off the event loop.
    public func load() throws(CatalogError) -> ProductCatalog {
        guard let stamp = FileStamp.of(path: productsFile), let data = FileManager.default.contents(atPath: productsFile) else {
            throw CatalogError(["\(productsFile) cannot be read (missing, or no permission)"])
        }
        let file = try CatalogFile.decode(Array(data))
        return try validate(file, productsFileStamp: stamp)
    }

    /// The problems of an entry's own fields (ID, title, type; not its file), its name in
    /// messages, and its type; `firstPosition` remembers IDs seen, to name duplicates.
    public static func checkFields(
        _ entry: CatalogFile.Entry, position: Int, firstPosition: inout [String: Int]
    ) -> (name: String, problems: [String], type: ProductType?) {
        let name = entry.productId.map { "product \(position) (\($0))" } ?? "product \(position)"
        var problems: [String] = []
        if let id = entry.productId {
            if !ProductID.isValid(id) {
                problems.append("\(name): productId must be 1–255 reverse-DNS characters (letters, digits, \".\", \"-\", \"_\")")
            } else if let first = firstPosition[id] {
                problems.append("\(name): duplicate productId, already used by product \(first)")
            } else {
                firstPosition[id] = position
            }
        } else {
            problems.append("\(name): productId is missing")
        }
        if (entry.title ?? "").isEmpty { problems.append("\(name): title is missing") }
        let type = entry.type.flatMap(ProductType.init(rawValue:))
        if type == nil {
            let allowed = ProductType.allCases.map(\.rawValue).joined(separator: ", ")
            problems.append("\(name): type \(entry.type.map { "\"\($0)\"" } ?? "is missing;") must be one of \(allowed)")
        }
        return (name, problems, type)
    }

    /// Validates decoded entries; used by `load()` and by `catalog add` before it writes.
    public func validate(_ file: CatalogFile, productsFileStamp: FileStamp? = nil) throws(CatalogError) -> ProductCatalog {
        var problems: [String] = []
        var products: [Product] = []
        var firstPosition: [String: Int] = [:]
        var watched: [String: FileStamp] = [:]
        var hashed: Set<String> = []
        if let productsFileStamp { watched[productsFile] = productsFileStamp }

        for (offset, entry) in file.products.enumerated() {
            let position = offset + 1
            let (name, fieldProblems, type) = Self.checkFields(entry, position: position, firstPosition: &firstPosition)
            var entryProblems = fieldProblems
            var resolved: String?
            if let path = entry.file {
                do {
                    resolved = try jail.resolve(path)
                } catch {
                    entryProblems.append("\(name): \(error)")
                }
            } else {
                entryProblems.append("\(name): file is missing")
            }

            guard entryProblems.isEmpty, let id = entry.productId, let type, let path = entry.file, let resolved else {
                problems += entryProblems
                continue
            }
            guard let stamp = FileStamp.of(path: resolved) else {
                problems.append("\(name): file \"\(path)\" vanished while loading")
                continue
            }
            do {
                let sha256 = try digests.digest(ofFileAt: resolved, stamp: stamp)
                var product = Product(
                    productId: id, title: entry.title ?? "", type: type,
                    contentVersion: entry.contentVersion ?? "1",
                    contentType: entry.contentType ?? "application/octet-stream",
                    size: stamp.size, sha256: sha256, file: path, stamp: stamp)
                product.sampleContentProvided = entry.sampleContentProvided ?? false
                products.append(product)
                watched[jail.root + "/" + path] = stamp
                hashed.insert(resolved)
            } catch {
                problems.append("\(name): file \"\(path)\" cannot be read: \(error.localizedDescription)")
            }
        }
        guard problems.isEmpty else { throw CatalogError(problems) }
        digests.save(keeping: hashed)
        do {
            return try ProductCatalog(products: products, watchedFiles: watched)
        } catch {
            throw CatalogError(["the catalogue could not be encoded: \(error)"])
        }
    }
}
