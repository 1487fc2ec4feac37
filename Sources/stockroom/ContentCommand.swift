import ArgumentParser
import Foundation
import StockroomCore
import StockroomServer

/// `stockroom content push`: the operator's way to put content in a bucket.
struct ContentCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "content",
        abstract: "Put content in the bucket named by --content s3://BUCKET/PREFIX.",
        subcommands: [Push.self]
    )

    /// `stockroom content push FILE --product ID`: uploads, hashes on the way, and adds or updates
    /// the catalogue entry, so that operators never need another S3 tool for Stockroom's job.
    struct Push: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Upload a file to the bucket (multipart when large, with progress) and add or update its product in products.json.",
            discussion: """
                The SHA-256 is computed from the bytes as they are sent. Running servers publish the product at their next \
                poll (--s3-poll-interval). Replacing the object of a product already published makes its downloads answer \
                503 content_changing until then; pushing without --key (a new key) avoids that. A push never writes over \
                another product's object, an object the catalogue does not name, or the catalogue itself.
                """)

        @OptionGroup var options: ServerOptions

        @Argument(help: "The file to upload.")
        var file: String

        @Option(help: "The App Store product ID, e.g. com.example.app.book2.")
        var product: String

        @Option(help: "The title shown in the catalogue (needed for a new product).")
        var title: String?

        @Option(help: "non-consumable, consumable, auto-renewable or non-renewing (needed for a new product).")
        var type: String?

        @Option(
            help: """
                The object's key under the prefix. Default: the file's name, else (when the catalogue or the bucket already has \
                it) the name with the content version, e.g. level.v2.pak. Never another product's key nor the catalogue's; an \
                object already there is replaced only when it is this product's own.
                """)
        var key: String?

        @Option(help: "MIME type of the content (default: the product's, else guessed from the extension).")
        var contentType: String?

        @Option(help: "Version of the content (default: the product's plus one, else 1).")
        var contentVersion: String?

        func run() async throws {
            let configuration = try options.configuration()
            try await BucketCatalog(configuration).push(
                file: file, productID: product, title: title, type: type, key: key, contentType: contentType, contentVersion: contentVersion
            )
        }
    }
}

/// The catalogue and content of a bucket, as the operator commands edit them.
struct BucketCatalog {
    let configuration: ServerConfiguration
    let location: ObjectLocation
    let client: S3Client
    let loader: ObjectCatalogLoader

    /// The bucket of `--content`; a usage failure when content is a folder.
    init(_ configuration: ServerConfiguration) throws {
        self.configuration = configuration
        let location: ObjectLocation
        do {
            guard let parsed = try ObjectLocation(parsing: configuration.contentFolder) else {
                fail("--content is a folder: content push uploads to a bucket (--content s3://BUCKET/PREFIX); for a folder use catalog add")
            }
            location = parsed
        } catch {
            fail("--content: \(error)")
        }
        guard let settings = configuration.objectStore else { fail("--content \(location) needs the store's settings and credentials") }
        self.location = location
        self.client = S3Client(settings: settings, bucket: location.bucket)
        let place: ObjectCatalogLoader.CatalogPlace
        do {
            if let catalog = try ObjectLocation(parsing: configuration.catalogFolder) {
                let key = String(catalog.prefix.dropLast())
                guard !key.isEmpty else { fail("--catalog s3://BUCKET/KEY must name the products.json object") }
                place = .object(catalog.bucket == location.bucket ? client : S3Client(settings: settings, bucket: catalog.bucket), key: key)
            } else {
                place = .file(configuration.catalogFolder + "/products.json")
            }
        } catch {
            fail("--catalog: \(error)")
        }
        self.loader = ObjectCatalogLoader(
            catalog: place, content: client, location: location, digests: DigestCache(file: configuration.digestCachePath))
    }

    /// Uploads `file` and adds or updates the product, then writes the catalogue once it validates.
    func push(
        file: String, productID: String, title: String?, type: String?, key: String?, contentType: String?, contentVersion: String?
    ) async throws {
        guard FileManager.default.isReadableFile(atPath: file) else { fail("\(file) cannot be read") }
        let current: (bytes: [UInt8], stamp: FileStamp?, etag: String?)
        var catalogFile: CatalogFile
        do {
            current = try await loader.readCatalog()
            catalogFile = try CatalogFile.decode(current.bytes)
        } catch {
            fail("the current catalogue cannot be used; fix it first:\n" + error.problems.joined(separator: "\n"))
        }
        let index = catalogFile.products.firstIndex { $0.productId == productID }
        let existing = index.map { catalogFile.products[$0] }
        guard existing != nil || (title != nil && type != nil) else { fail("\(productID) is a new product: give --title and --type") }
        let version = contentVersion ?? existing.map { Self.nextVersion($0.contentVersion) } ?? "1"
        let target = await self.target(
            file: file, key: key, version: version, own: existing?.file,
            others: Set(catalogFile.products.indices.filter { $0 != index }.compactMap { catalogFile.products[$0].file }))
        let relative = target.relative
        let objectKey = location.key(relative)
        let entry = CatalogFile.Entry(
            productId: productID, title: title ?? existing?.title, type: type ?? existing?.type, file: relative,
            contentType: contentType ?? existing?.contentType ?? MediaTypes.guess(forPath: relative), contentVersion: version,
            sampleContentProvided: existing?.sampleContentProvided)
        // The entry's own fields are checked before a byte is sent: a typo uploads nothing.
        var seen: [String: Int] = [:]
        let (_, problems, _) = CatalogLoader.checkFields(entry, position: (index ?? catalogFile.products.count) + 1, firstPosition: &seen)
        guard problems.isEmpty else { fail(problems.joined(separator: "\n")) }
        if let index { catalogFile.products[index] = entry } else { catalogFile.products.append(entry) }
        // Only this product's own object is ever written over, and only when --key names it; any
        // other write is a conditional create, which the store refuses where an object already is.
        let replacesLive = target.replacesOwn

        let started = ContinuousClock.now
        let uploaded: ObjectUpload.Result
        do {
            uploaded = try await ObjectUpload(client: client).upload(
                file, to: objectKey, contentType: entry.contentType ?? "application/octet-stream", createOnly: !replacesLive
            ) {
                sent, total in
                let percent = total > 0 ? sent * 100 / total : 100
                FileHandle.standardError.write(Data("pushed \(Self.mebibytes(sent)) of \(Self.mebibytes(total)) (\(percent)%)\n".utf8))
            }
        } catch ObjectStoreError.exists {
            fail(
                """
                an object is already at s3://\(location.bucket)/\(objectKey) and the catalogue does not name it for \(productID): \
                nothing was written; choose another --key (or remove that object)
                """)
        } catch {
            fail("the upload of \(file) to s3://\(location.bucket)/\(objectKey) failed: \(error)")
        }
        // Stockroom computed this digest from the bytes it sent: no server here hashes them again.
        loader.digests.remember(object: "s3://\(location.bucket)/\(objectKey)", head: uploaded.head, digest: uploaded.digest)
        try? loader.digests.saveAll()
        // Every entry checked and every object headed; nothing else downloaded (the servers hash
        // what they do not yet know at their next poll).
        if case .failure(let error) = await loader.check(catalogFile) {
            await discard(objectKey, unless: replacesLive)
            FileHandle.standardError.write(Data("the catalogue was not changed:\n".utf8))
            for problem in error.problems { print(problem) }
            throw ExitCode.failure
        }
        let bytes: [UInt8]
        do {
            bytes = Array(try catalogFile.encoded())
        } catch {
            fail("the catalogue could not be encoded: \(error)")
        }
        switch loader.catalog {
        case .file(let path):
            do {
                try AtomicFile.write(Data(bytes), to: path)
            } catch {
                await discard(objectKey, unless: replacesLive)
                fail("\(path) could not be written: \(error)")
            }
        case .object(let catalogClient, let key):
            do {
                try await catalogClient.put(key, body: bytes, contentType: "application/json", ifMatch: current.etag)
            } catch {
                await discard(objectKey, unless: replacesLive)
                if case .changed = error { fail("\(loader.catalogName) changed while this ran: run the push again") }
                fail("\(loader.catalogName) could not be written: \(error)")
            }
        }
        let seconds =
            Double((ContinuousClock.now - started).components.attoseconds) / 1e18
            + Double((ContinuousClock.now - started).components.seconds)
        print(
            """
            pushed \(productID): s3://\(location.bucket)/\(objectKey), \(uploaded.head.size) bytes in \
            \(String(format: "%.1f", seconds)) s, sha256 \(uploaded.digest.sha256)
            """
        )
        print("\(loader.catalogName) written (\(catalogFile.products.count) products); running servers publish it at their next poll")
    }

    /// Where a push writes: `relative` under the prefix, and whether that is the product's own
    /// live object, replaced because `--key` names it.
    struct Target {
        var relative: String
        var replacesOwn: Bool
    }

    /// The key a push writes, never one the catalogue names for another product nor the
    /// catalogue's own. With `--key`, that key (this product's live object may be replaced; any
    /// other object there makes the conditional create fail). Without, the file's name, or, when
    /// that is taken (named by the catalogue, or an object already there), the name with the
    /// content version (`level.v2.pak`, then `level.v2-2.pak` …): a new key the servers publish at
    /// their next poll while the live object stays as it is.
    private func target(file: String, key: String?, version: String, own: String?, others: Set<String>) async -> Target {
        var catalogKey: String?
        if case .object(let catalogClient, let key) = loader.catalog, catalogClient.bucket == location.bucket { catalogKey = key }
        func check(_ relative: String) {
            let objectKey = location.key(relative)
            guard ObjectKey.isValid(objectKey) else {
                fail(
                    """
                    the key "\(objectKey)" is not valid (letters, digits and - _ . / + = , @ ~ !, no empty, . or .. segment); \
                    choose --key
                    """)
            }
        }
        if let key {
            check(key)
            if location.key(key) == catalogKey {
                fail("s3://\(location.bucket)/\(location.key(key)) is the catalogue (--catalog): choose another --key; nothing was written")
            }
            if others.contains(key) {
                fail(
                    """
                    s3://\(location.bucket)/\(location.key(key)) is another product's live object: choose another --key; nothing \
                    was written
                    """)
            }
            return Target(relative: key, replacesOwn: key == own)
        }
        let name = URL(fileURLWithPath: file).lastPathComponent
        var candidates = [name, Self.versioned(name, version)]
        candidates += (2...20).map { Self.versioned(name, "\(version)-\($0)") }
        for candidate in candidates {
            check(candidate)
            guard candidate != own, !others.contains(candidate), location.key(candidate) != catalogKey else { continue }
            // A HEAD to skip a key already in use; the conditional create is what makes it safe.
            do throws(ObjectStoreError) {
                _ = try await client.head(location.key(candidate))
                continue
            } catch .missing {
                return Target(relative: candidate, replacesOwn: false)
            } catch {
                fail("s3://\(location.bucket)/\(location.key(candidate)) cannot be checked: \(error)")
            }
        }
        fail("every key tried for \(name) (up to \(candidates.last ?? name)) is in use: choose --key")
    }

    /// Removes an object this push uploaded when the catalogue will not name it (never one the
    /// catalogue already published).
    private func discard(_ objectKey: String, unless live: Bool) async {
        guard !live else { return }
        try? await client.delete(objectKey)
    }

    private static func nextVersion(_ version: String?) -> String {
        guard let version, let number = Int(version) else { return version ?? "1" }
        let (next, overflow) = number.addingReportingOverflow(1)
        return overflow ? version + ".1" : String(next)
    }

    /// `name` with the content version before its extension: `level.pak` → `level.v2.pak`.
    static func versioned(_ name: String, _ version: String) -> String {
        let safe = String(
            version.unicodeScalars.filter { CharacterSet.alphanumerics.contains($0) || $0 == "." || $0 == "-" || $0 == "_" }.prefix(32))
        let tag = "v" + (safe.isEmpty ? "next" : safe)
        let slash = name.lastIndex(of: "/").map { name.index(after: $0) } ?? name.startIndex
        guard let dot = name[slash...].lastIndex(of: "."), dot != slash else { return name + "." + tag }
        return String(name[..<dot]) + "." + tag + String(name[dot...])
    }

    private static func mebibytes(_ bytes: Int64) -> String {
        String(format: "%.1f MiB", Double(bytes) / 1_048_576)
    }
}
