import ArgumentParser
import StockroomCore
import StockroomServer

/// Where content and the catalogue live when they are in a bucket (part of `ServerOptions`).
///
/// Credentials come the way every S3 tool reads them (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
/// `AWS_SESSION_TOKEN`, or a profile of the shared credentials file), never from a flag.
struct ObjectStoreOptions: ParsableArguments {
    @Option(
        name: .customLong("s3-endpoint"),
        help: """
            The S3-compatible store's URL, for content or a catalogue at s3://BUCKET/…: Cloudflare R2, Backblaze B2, \
            MinIO, Ceph, SeaweedFS (STOCKROOM_S3_ENDPOINT; default AWS's https://s3.REGION.amazonaws.com).
            """)
    var s3Endpoint: String?

    @Option(
        name: .customLong("s3-region"), help: "The store's region (STOCKROOM_S3_REGION, else AWS_REGION; default us-east-1; R2 uses auto).")
    var s3Region: String?

    @Option(
        name: .customLong("s3-addressing"),
        help:
            """
            path (https://endpoint/BUCKET/KEY) or virtual (https://BUCKET.endpoint/KEY) (STOCKROOM_S3_ADDRESSING; default virtual for \
            AWS, path with --s3-endpoint).
            """
    )
    var s3Addressing: String?

    @Option(
        name: .customLong("s3-profile"),
        help: "A profile of the shared credentials file (AWS_PROFILE; default the AWS_* variables, else default).")
    var s3Profile: String?

    @Option(
        name: .customLong("content-delivery"),
        help: """
            How content in a bucket reaches apps: stream (through Stockroom, the bucket private) or redirect \
            (303/307 to a presigned URL; the store sends the bytes) (STOCKROOM_CONTENT_DELIVERY; default stream).
            """)
    var contentDelivery: String?

    @Option(
        name: .customLong("presign-lifetime"),
        help: ArgumentHelp(
            "The longest a presigned URL lives, never past the download token (STOCKROOM_PRESIGN_LIFETIME; default 15m).",
            valueName: "duration"))
    var presignLifetime: String?

    @Option(
        name: .customLong("s3-poll-interval"),
        help: ArgumentHelp(
            "How often a bucket's catalogue and objects are checked for changes (STOCKROOM_S3_POLL_INTERVAL; default 15s).",
            valueName: "duration"))
    var pollInterval: String?

    func apply(to configuration: inout ServerConfiguration, environment: [String: String]) throws {
        func value(_ flag: String?, _ name: String) -> String? { flag ?? environment["STOCKROOM_\(name)"] }
        if let text = value(contentDelivery, "CONTENT_DELIVERY") {
            guard let delivery = ContentDelivery(rawValue: text) else {
                throw ValidationError("--content-delivery must be stream or redirect, not \"\(text)\"")
            }
            configuration.contentDelivery = delivery
        }
        if let text = value(presignLifetime, "PRESIGN_LIFETIME") {
            guard let lifetime = try? DurationArgument.parse(text), lifetime >= .seconds(1), lifetime <= SigV4.longestExpiry else {
                throw ValidationError("--presign-lifetime must be a duration from 1s to 7d (60s, 15m, 1h), not \"\(text)\"")
            }
            configuration.presignLifetime = lifetime
        }
        if let text = value(pollInterval, "S3_POLL_INTERVAL") {
            guard let interval = try? DurationArgument.parse(text), interval >= .seconds(1) else {
                throw ValidationError("--s3-poll-interval must be a duration of at least 1s (5s, 1m), not \"\(text)\"")
            }
            configuration.objectPollInterval = interval
        }
        // The store is needed (and its credentials read) only when something is in a bucket.
        guard configuration.contentFolder.hasPrefix("s3://") || configuration.catalogFolder.hasPrefix("s3://") else { return }
        let region = value(s3Region, "S3_REGION") ?? environment["AWS_REGION"] ?? environment["AWS_DEFAULT_REGION"] ?? "us-east-1"
        var addressing: ObjectStoreSettings.Addressing?
        if let text = value(s3Addressing, "S3_ADDRESSING") {
            guard let parsed = ObjectStoreSettings.Addressing(rawValue: text) else {
                throw ValidationError(ObjectStoreSettingError.addressing(text).description)
            }
            addressing = parsed
        }
        do {
            let credentials = try ObjectStoreCredentials.resolve(environment: environment, profile: s3Profile)
            configuration.objectStore = try ObjectStoreSettings(
                endpoint: value(s3Endpoint, "S3_ENDPOINT"), region: region, addressing: addressing, credentials: credentials)
        } catch {
            throw ValidationError(error.description)
        }
    }
}
