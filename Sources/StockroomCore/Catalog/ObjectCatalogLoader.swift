import Foundation

/// Loads the catalogue for content kept in a bucket (`--content s3://BUCKET/PREFIX`): reads
/// `products.json` from a local folder or from a bucket (`--catalog s3://…/products.json`), reads
/// each object's size and ETag (HEAD), and publishes the SHA-256 Stockroom computed itself, kept
/// against that ETag and size, so an object replaced in the bucket is hashed again before it is
/// served. A product whose object is missing is refused by key, as a missing file is.
public struct ObjectCatalogLoader: Sendable {
    /// Where `products.json` is read from.
    public enum CatalogPlace: Sendable {
        /// A local file (`--catalog FOLDER`).
        case file(String)
        /// An object (`--catalog s3://BUCKET/KEY`), polled with `If-None-Match`.
        case object(S3Client, key: String)
    }

    public let catalog: CatalogPlace
    public let content: S3Client
    public let location: ObjectLocation
    public let digests: DigestCache

    /// HEADs in flight at once during a load or a poll.
    static let concurrentHeads = 8

    public init(catalog: CatalogPlace, content: S3Client, location: ObjectLocation, digests: DigestCache) {
        self.catalog = catalog
        self.content = content
        self.location = location
        self.digests = digests
    }

    /// What `products.json` is called in messages.
    public var catalogName: String {
        switch catalog {
        case .file(let path): path
        case .object(let client, let key): "s3://\(client.bucket)/\(key)"
        }
    }

    /// Loads, checks and hashes the whole catalogue.
    public func load() async throws(CatalogError) -> ProductCatalog {
        let (bytes, stamp, etag) = try await readCatalog()
        return try await validate(try CatalogFile.decode(bytes), catalogStamp: stamp, catalogETag: etag)
    }

    /// Whether `products.json` or any object moved since `current` was loaded; nil when the
    /// store could not say (the last good catalogue keeps serving).
    public func changed(since current: ProductCatalog) async -> Bool? {
        switch catalog {
        case .file(let path):
            if FileStamp.of(path: path) != current.watchedFiles[path] { return true }
        case .object(let client, let key):
            do {
                if try await client.fetch(key, ifNoneMatch: current.catalogObjectETag) != nil { return true }
            } catch .missing {
                return true
            } catch {
                return nil
            }
        }
        let heads = await self.heads(Array(current.watchedObjects.keys))
        for (key, head) in current.watchedObjects {
            switch heads[key] {
            case .success(let now): if now != head { return true }
            case .failure(.missing): return true
            case .failure, nil: return nil
            }
        }
        return false
    }

    /// Checks decoded entries, heads their objects and hashes those not hashed at their ETag.
    public func validate(_ file: CatalogFile, catalogStamp: FileStamp? = nil, catalogETag: String? = nil) async throws(CatalogError)
        -> ProductCatalog
    {
        var problems: [String] = []
        var firstPosition: [String: Int] = [:]
        var accepted: [(entry: CatalogFile.Entry, name: String, type: ProductType, key: String)] = []
        for (offset, entry) in file.products.enumerated() {
            let (name, fieldProblems, type) = CatalogLoader.checkFields(entry, position: offset + 1, firstPosition: &firstPosition)
            var entryProblems = fieldProblems
            if let file = entry.file {
                if !ObjectKey.isValid(location.key(file)) {
                    entryProblems.append(
                        """
                        \(name): file \"\(file)\" is not a valid object key (letters, digits and - _ . / + = , @ ~ !, no empty, . or \
                        .. segment)
                        """
                    )
                }
            } else {
                entryProblems.append("\(name): file is missing")
            }
            guard entryProblems.isEmpty, let type, let file = entry.file else {
                problems += entryProblems
                continue
            }
            accepted.append((entry, name, type, location.key(file)))
        }
        guard problems.isEmpty else { throw CatalogError(problems) }

        let heads = await self.heads(accepted.map(\.key))
        var products: [Product] = []
        var watched: [String: S3Client.Head] = [:]
        var hashed: Set<String> = []
        for item in accepted {
            let address = "s3://\(content.bucket)/\(item.key)"
            let head: S3Client.Head
            switch heads[item.key] {
            case .success(let found): head = found
            case .failure(.missing):
                problems.append("\(item.name): the object \"\(item.key)\" does not exist in the bucket \(content.bucket)"); continue
            case .failure(let error): problems.append("\(item.name): the object \"\(item.key)\" cannot be read: \(error)"); continue
            case nil: problems.append("\(item.name): the object \"\(item.key)\" was not read"); continue
            }
            var digest = digests.digest(ofObject: address, head: head)
            if digest == nil {
                do {
                    let computed = try await content.digest(item.key, ifMatch: head.etag)
                    guard computed.size == head.size else {
                        problems.append("\(item.name): the object \"\(item.key)\" changed while it was hashed")
                        continue
                    }
                    digests.remember(object: address, head: head, digest: computed.digest)
                    digest = computed.digest
                } catch {
                    problems.append("\(item.name): the object \"\(item.key)\" cannot be hashed: \(error)")
                    continue
                }
            }
            guard let digest else { continue }
            var product = Product(
                productId: item.entry.productId ?? "", title: item.entry.title ?? "", type: item.type,
                contentVersion: item.entry.contentVersion ?? "1", contentType: item.entry.contentType ?? "application/octet-stream",
                size: head.size, sha256: digest.sha256, file: item.key)
            product.objectETag = head.etag
            product.objectCRC32C = digest.crc32c
            product.objectBlockCRC32C = digest.blocks
            product.objectVersionID = head.versionID
            product.sampleContentProvided = item.entry.sampleContentProvided ?? false
            products.append(product)
            watched[item.key] = head
            hashed.insert(address)
        }
        guard problems.isEmpty else { throw CatalogError(problems) }
        digests.save(keeping: hashed)
        var files: [String: FileStamp] = [:]
        if case .file(let path) = catalog, let catalogStamp { files[path] = catalogStamp }
        do {
            return try ProductCatalog(products: products, watchedFiles: files, watchedObjects: watched, catalogObjectETag: catalogETag)
        } catch {
            throw CatalogError(["the catalogue could not be encoded: \(error)"])
        }
    }

    /// What `stockroom doctor` checks without hashing or writing anything: `products.json` reads
    /// and decodes, and every product's object answers a signed HEAD. Returns the product count,
    /// or every problem.
    public func check() async -> Result<Int, CatalogError> {
        do {
            return await check(try CatalogFile.decode(try await readCatalog().bytes))
        } catch {
            return .failure(error)
        }
    }

    /// `file`'s entries checked (their fields and keys) and every object headed, nothing hashed:
    /// what `content push` needs before it writes a catalogue the servers then hash.
    public func check(_ file: CatalogFile) async -> Result<Int, CatalogError> {
        var problems: [String] = []
        var keys: [String] = []
        var firstPosition: [String: Int] = [:]
        for (offset, entry) in file.products.enumerated() {
            let (name, fieldProblems, _) = CatalogLoader.checkFields(entry, position: offset + 1, firstPosition: &firstPosition)
            problems += fieldProblems
            guard let file = entry.file, ObjectKey.isValid(location.key(file)) else {
                problems.append("\(name): file is missing or not a valid object key")
                continue
            }
            keys.append(location.key(file))
        }
        guard problems.isEmpty else { return .failure(CatalogError(problems)) }
        let heads = await self.heads(keys)
        for key in keys {
            if case .failure(let error) = heads[key] { problems.append("\(key): \(error)") }
        }
        return problems.isEmpty ? .success(file.products.count) : .failure(CatalogError(problems))
    }

    /// `products.json`'s bytes, with its stamp (a file) or ETag (an object).
    public func readCatalog() async throws(CatalogError) -> (bytes: [UInt8], stamp: FileStamp?, etag: String?) {
        switch catalog {
        case .file(let path):
            guard let stamp = FileStamp.of(path: path), let data = FileManager.default.contents(atPath: path) else {
                throw CatalogError(["\(path) cannot be read (missing, or no permission)"])
            }
            return (Array(data), stamp, nil)
        case .object(let client, let key):
            do {
                guard let (body, etag) = try await client.fetch(key, ifNoneMatch: nil) else {
                    throw CatalogError(["\(catalogName) answered 304"])
                }
                return (body, nil, etag)
            } catch let error as CatalogError {
                throw error
            } catch {
                throw CatalogError(["\(catalogName) cannot be read: \(error)"])
            }
        }
    }

    /// Each key's head, `concurrentHeads` at a time.
    func heads(_ keys: [String]) async -> [String: Result<S3Client.Head, ObjectStoreError>] {
        let content = self.content
        return await withTaskGroup(of: (String, Result<S3Client.Head, ObjectStoreError>).self) { group in
            var results: [String: Result<S3Client.Head, ObjectStoreError>] = [:]
            var waiting = keys.makeIterator()
            for _ in 0..<Self.concurrentHeads {
                guard let key = waiting.next() else { break }
                group.addTask { await Self.head(key, from: content) }
            }
            while let (key, result) = await group.next() {
                results[key] = result
                if let next = waiting.next() { group.addTask { await Self.head(next, from: content) } }
            }
            return results
        }
    }

    /// One object's head; a transient failure (a dropped connection, a 503) is asked again once,
    /// so that one blip of the store neither refuses start-up nor fails a poll.
    private static func head(_ key: String, from content: S3Client) async -> (String, Result<S3Client.Head, ObjectStoreError>) {
        do throws(ObjectStoreError) {
            return (key, .success(try await content.head(key)))
        } catch  where error.isTransient {
            try? await Task.sleep(for: .milliseconds(200))
            do throws(ObjectStoreError) { return (key, .success(try await content.head(key))) } catch { return (key, .failure(error)) }
        } catch {
            return (key, .failure(error))
        }
    }
}
