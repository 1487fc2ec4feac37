import Logging
import StockroomCore

/// Content kept in a bucket: the client for it, where under it the products are, and the loader
/// of its catalogue. Opened, and its bucket checked, before the server binds a port.
struct ObjectContent: Sendable {
    let client: S3Client
    let location: ObjectLocation
    let loader: ObjectCatalogLoader

    /// The bucket named by `--content s3://…`, or nil for a folder. A wrong endpoint, wrong
    /// credentials or a missing bucket refuse start-up, naming which.
    static func open(_ configuration: ServerConfiguration, logger: Logger) async throws(StartupError) -> ObjectContent? {
        let location: ObjectLocation
        do {
            guard let parsed = try ObjectLocation(parsing: configuration.contentFolder) else {
                if configuration.catalogFolder.hasPrefix("s3://") {
                    throw StartupError.objectStorage("--catalog in a bucket needs --content in a bucket too (s3://BUCKET/PREFIX)")
                }
                if configuration.contentDelivery == .redirect {
                    throw StartupError.objectStorage(
                        """
                        --content-delivery redirect needs content in a bucket (--content s3://BUCKET/PREFIX); a folder is streamed, \
                        or sent by nginx with --offload
                        """
                    )
                }
                return nil
            }
            location = parsed
        } catch let error as ObjectLocationError {
            throw .objectStorage("--content: \(error)")
        } catch let error as StartupError {
            throw error
        } catch {
            throw .objectStorage("\(error)")
        }
        guard let settings = configuration.objectStore else {
            throw .objectStorage("--content \(location) needs the store's settings (--s3-endpoint, --s3-region) and credentials")
        }
        if configuration.offload != nil {
            throw .objectStorage(
                "--offload x-accel-redirect serves a local folder; with content in a bucket use --content-delivery redirect or stream")
        }
        let client = S3Client(settings: settings, bucket: location.bucket)
        try await check(client, what: "--content \(location)")
        if configuration.contentDelivery == .redirect, client.presignedGET(location.key("probe"), lifetime: .seconds(60)) == nil {
            throw .objectStorage("no presigned URL can be made for \(client.settings.base(bucket: location.bucket).origin)")
        }
        let place: ObjectCatalogLoader.CatalogPlace
        do {
            if let catalog = try ObjectLocation(parsing: configuration.catalogFolder) {
                let key = String(catalog.prefix.dropLast())
                guard !key.isEmpty else {
                    throw StartupError.objectStorage("--catalog s3://BUCKET/KEY must name the products.json object, not a bucket")
                }
                let catalogClient = catalog.bucket == location.bucket ? client : S3Client(settings: settings, bucket: catalog.bucket)
                if catalogClient !== client { try await check(catalogClient, what: "--catalog \(configuration.catalogFolder)") }
                place = .object(catalogClient, key: key)
            } else {
                place = .file(configuration.catalogFolder + "/products.json")
            }
        } catch let error as ObjectLocationError {
            throw .objectStorage("--catalog: \(error)")
        } catch let error as StartupError {
            throw error
        } catch {
            throw .objectStorage("\(error)")
        }
        logger.info(
            "content in a bucket",
            metadata: [
                "content": .string(location.description), "endpoint": .string(client.settings.base(bucket: location.bucket).origin),
                "region": .string(settings.region), "accessKey": .string(settings.credentials.accessKeyID),
                "delivery": .string(configuration.contentDelivery.rawValue),
            ])
        return ObjectContent(
            client: client, location: location,
            loader: ObjectCatalogLoader(
                catalog: place, content: client, location: location, digests: DigestCache(file: configuration.digestCachePath)))
    }

    /// A signed `HEAD` of the bucket: refuses start-up with what is wrong.
    private static func check(_ client: S3Client, what: String) async throws(StartupError) {
        do {
            try await client.headBucket()
        } catch {
            throw .objectStorage("\(what): \(error)")
        }
    }
}
