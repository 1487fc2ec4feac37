public import Logging
public import StockroomCore
public import StockroomEntitlement
import StockroomPostgres

/// Everything `stockroom serve` needs, with the defaults docs/contract.md and the README list.
///
/// Built once from flags and `STOCKROOM_*` variables by the executable; tests build it directly
/// with port 0 and temporary folders.
public struct ServerConfiguration: Sendable {
    public var host = "127.0.0.1"
    /// 0 picks a free port (tests).
    public var port = 8080
    /// The folder holding `products.json`, or `s3://BUCKET/KEY` of a `products.json` kept in a
    /// bucket (with `objectStore`).
    public var catalogFolder = "catalog"
    /// The folder content files are served from, and confined to, or `s3://BUCKET/PREFIX` for
    /// content kept in a bucket (with `objectStore`).
    public var contentFolder = "content"
    /// How to reach the object store when content or the catalogue is in a bucket.
    public var objectStore: ObjectStoreSettings?
    /// How content in a bucket reaches the app: through Stockroom, or by presigned redirect.
    public var contentDelivery: ContentDelivery = .stream
    /// The longest a presigned URL lives; never longer than the download token.
    public var presignLifetime: Duration = .seconds(900)
    /// How often a bucket's catalogue and objects are checked for changes (a HEAD per product).
    public var objectPollInterval: Duration = .seconds(15)
    /// The ledger: a SQLite file, or a PostgreSQL database given as `postgres://user:password@host:port/db`
    /// (several instances share one). The address's password is never logged.
    public var databaseLocation = "stockroom.sqlite"
    /// Connections in the PostgreSQL ledger's pool, per instance.
    public var databasePoolSize = 8
    /// How long a request waits for a PostgreSQL connection before it is answered 503
    /// `ledger_unavailable` (half a second while the database is known lost).
    public var databaseTimeout: Duration = .seconds(5)
    /// This instance's own files (the digest cache, a generated token secret); nil keeps them
    /// beside a SQLite ledger, or in `.stockroom/` of the working directory with PostgreSQL.
    public var stateFolder: String?
    /// The app's bundle ID, which receipts must carry.
    public var bundleID = "com.example.stockroom.demo"
    /// Where receipts are verified: Apple unless told otherwise; the simulator is a test tool.
    public var upstream: UpstreamSetting = .apple
    /// The roots StoreKit 2 JWS may chain to when `upstream` is a URL (`--trust-root`: PEM files
    /// for the CLI, certificates directly for tests); empty means Apple Root CA - G3 only. Trust is
    /// never fetched from the upstream.
    public var trustedRoots: [Certificate] = []
    /// What OCSP answers about a JWS's signing chain decide (`--ocsp`); with the simulator,
    /// whose chains name no responder, nothing is asked (`revocationPolicy`).
    public var ocsp: RevocationPolicy = .soft
    /// Accept StoreKit Testing in Xcode's signed transactions and receipts, verified locally
    /// (`--accept-xcode`): for development only, refused with `upstream` apple.
    public var acceptsXcode = false
    /// The StoreKit Test certificate exported from Xcode (`--xcode-certificate`); nil accepts any
    /// self-signed one.
    public var xcodeCertificate: Certificate?
    /// App Store Server API credentials given directly (tests: a simulator's `ServerAPIKey`);
    /// when nil, they come from the key file and IDs below, or there is no Server API.
    public var serverAPICredentials: AppStoreServerAPIClient.Credentials?
    /// The app's App Store shared secret, sent as verifyReceipt's `password`; never logged.
    public var sharedSecret: String?
    /// Key of the download tokens; nil keeps a generated one beside the database. Never logged.
    public var tokenSecret: String?
    /// How long a download token authorises content.
    public var tokenLifetime: Duration = .seconds(3600)
    /// A transaction verified more recently than this is served again without asking Apple.
    public var reverifyInterval: Duration = .seconds(24 * 3600)
    /// How long a valid verifyReceipt answer is reused (single receipts, many requests).
    public var verificationCacheInterval: Duration = .seconds(300)
    /// How hard verification tries a failing App Store before answering 503.
    public var verificationRetryPolicy = RetryPolicy()
    /// The App Store Server API key (`.p8`), its key ID and issuer ID; with all three, signed
    /// transactions are confirmed with the API. The simulator's key is used without them.
    public var appStoreKeyPath: String?
    public var appStoreKeyID: String?
    public var appStoreIssuerID: String?
    /// The bearer token of `/v1/admin`; the admin routes are off while it is nil.
    public var adminToken: String?
    /// Whether sandbox purchases are served (`--sandbox`); App Review buys in the sandbox.
    public var sandbox: SandboxPolicy = .allow
    /// When set (`--offload`), nginx sends content bytes and reports each delivery; nil streams.
    public var offload: ContentOffload?

    // The purchase lifecycle (ServerConfiguration+Lifecycle); each needs Server API credentials to act.
    /// When Stockroom calls Finish Transaction itself (`--finish-on`); nil never.
    public var finishOn: FinishTrigger? = .acknowledged
    /// The refund outcome told to Apple with consumption answers (`--refund-preference`); nil says none.
    public var refundPreference: ConsumptionInformation.RefundPreference?
    /// What a prorated refund does to the content (`--prorated-refund`).
    public var proratedRefund: ProratedRefundPolicy = .revoke
    /// How often the queue of calls owed to the Server API is read when nothing wakes it.
    public var serverCallInterval: Duration = .seconds(2)

    // Webhooks (`--webhook`, `--webhooks`): the ledger's events pushed to the operator's endpoints.
    /// Endpoints given by URL alone, each signed with a secret derived from the download-token key.
    public var webhookURLs: [String] = []
    /// A JSON file of endpoints with their names and secrets (`WebhookEndpoint.endpoints(file:)`).
    public var webhooksFile: String?
    /// How the sender retries, gives up and keeps the event log.
    public var webhookSettings = WebhookSettings()

    // Limits: each has a `serve` flag and a STOCKROOM_ variable (ServerConfiguration+Limits).
    /// What each client connection lives under: the connection cap, timeouts, minimum rates and
    /// the shutdown grace.
    public var connectionLimits = ConnectionLimits()
    /// The proxies whose `X-Forwarded-For` and `X-Forwarded-Proto` count (`--trusted-proxy`).
    public var trustedProxies = TrustedProxies.none
    /// Where `/metrics` is served instead of the main port (`--metrics-address`, loopback only);
    /// nil serves it on the main port.
    public var metricsAddress: MetricsAddress?
    /// Concurrent content streams in total.
    public var maxDownloads = 512
    /// Concurrent content streams of one purchase (original transaction).
    public var maxDownloadsPerPurchase = 4
    /// Concurrent content streams to one client address (an IPv6 /64).
    public var maxDownloadsPerClient = 32
    /// Requests that reach the App Store, per client address; nil is no limit.
    public var upstreamRate: UpstreamRate? = .default

    // Pending proofs (ServerConfiguration+PendingProofs): each has a `serve` flag and a STOCKROOM_ variable.
    /// Unverified proofs kept in all while the App Store cannot be asked, every status counted.
    public var maxPendingProofs = 5_000
    /// Unverified proofs kept from one client address, every status counted.
    public var maxPendingProofsPerClient = 20
    /// The longest proof kept, in bytes; a longer one is not kept (the client retries it later).
    public var maxPendingProofSize = 128 * 1024
    /// How long a proof the App Store rejected stays for the operator before it is purged.
    public var rejectedProofRetention: Duration = .seconds(30 * 24 * 3600)

    /// How often the catalogue watcher looks for changed files.
    public var catalogPollInterval: Duration = .seconds(1)
    public var logLevel: Logger.Level = .info

    public init() {}

    /// Whether the ledger is on PostgreSQL rather than in a SQLite file.
    public var usesPostgres: Bool { PostgresAddress.isAddress(databaseLocation) }

    /// Where this instance's own files start: `<state folder>/stockroom`, or the SQLite file's path.
    var statePrefix: String {
        if let stateFolder { return stateFolder + "/stockroom" }
        return usesPostgres ? ".stockroom/stockroom" : databaseLocation
    }

    /// The digest cache file, kept beside the ledger so the catalogue folder may stay read-only.
    public var digestCachePath: String { statePrefix + ".digests.json" }

    /// The generated download-token key, kept beside the ledger (mode 0600). Instances sharing a
    /// PostgreSQL ledger share STOCKROOM_TOKEN_SECRET instead.
    public var tokenSecretPath: String { statePrefix + ".token-secret" }

    /// This server as it reaches itself: `http://host:port`, the host bracketed when IPv6.
    public var ownURL: String {
        let address = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
        return "http://\(address):\(port)"
    }

    /// Where the built-in simulator answers when `upstream` is `simulator`: this server, under
    /// `/simulator`, reached over its own loopback address like any upstream.
    public var simulatorURL: String { ownURL + "/simulator" }
}

/// Where upstream verification goes.
public enum UpstreamSetting: Sendable, Equatable, CustomStringConvertible {
    /// The App Store simulator, run in-process on a loopback host: development and tests only.
    case simulator
    /// Apple's production and sandbox hosts.
    case apple
    /// One base URL for both verifyReceipt environments and the App Store Server API.
    case url(String)

    /// Parses `simulator`, `apple`, or an http(s) URL.
    public init?(argument: String) {
        switch argument {
        case "simulator": self = .simulator
        case "apple": self = .apple
        case let url where url.hasPrefix("http://") || url.hasPrefix("https://"): self = .url(url)
        default: return nil
        }
    }

    /// The verifyReceipt endpoints; `simulator` is the one at `simulatorURL`.
    public func endpoints(simulatorURL: String) -> AppStoreEndpoints {
        switch self {
        case .simulator: .base(simulatorURL)
        case .apple: .apple
        case .url(let url): .base(url)
        }
    }

    public var description: String {
        switch self {
        case .simulator: "simulator"
        case .apple: "apple"
        case .url(let url): URLText.redacted(url)
        }
    }
}
