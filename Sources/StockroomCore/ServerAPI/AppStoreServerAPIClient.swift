import Foundation
import Logging
import Synchronization

/// The App Store Server API over an `UpstreamTransport`: `GET /inApps/v1/transactions/{id}` with an
/// ES256 bearer JWT made from the app's `.p8` key; 4040010 in production → the sandbox; 429
/// honours `Retry-After`; 5xx and transport failures are retried with backoff.
///
/// See https://developer.apple.com/documentation/appstoreserverapi/get-v1-transactions-_transactionid_
public final class AppStoreServerAPIClient: Sendable {
    /// The credentials App Store Connect issues for the Server API.
    public struct Credentials: Sendable {
        public var issuerID: String
        public var keyID: String
        public var bundleID: String
        public var privateKey: ECPrivateKey

        public init(issuerID: String, keyID: String, bundleID: String, privateKey: ECPrivateKey) {
            self.issuerID = issuerID
            self.keyID = keyID
            self.bundleID = bundleID
            self.privateKey = privateKey
        }
    }

    /// The API's base URL per environment.
    public struct Endpoints: Sendable, Equatable {
        public var production: String
        public var sandbox: String

        /// Apple's hosts, as Apple recommends them since 2026-05-05 (the `itunes` ones,
        /// `api.storekit.itunes.apple.com` and `api.storekit-sandbox.itunes.apple.com`, still work).
        public static let apple = Endpoints(production: "https://api.storekit.apple.com", sandbox: "https://api.storekit-sandbox.apple.com")

        /// The simulator: one base, with the sandbox under `/sandbox`.
        public static func base(_ url: String) -> Endpoints {
            let base = url.hasSuffix("/") ? String(url.dropLast()) : url
            return Endpoints(production: base, sandbox: base + "/sandbox")
        }
    }

    /// What the API said about a transaction.
    public enum Lookup: Sendable, Equatable {
        /// Its current signed transaction (verify it before use).
        case found(signedTransactionInfo: String, environment: StoreEnvironment)
        /// Neither environment knows it.
        case notFound
        case unavailable(reason: String, retryAfter: Duration)
    }

    public let credentials: Credentials
    public let endpoints: Endpoints
    public let transport: any UpstreamTransport
    public let policy: RetryPolicy
    /// How long a token is valid; Apple allows at most 60 minutes.
    public static let tokenLifetime: Int64 = 20 * 60
    /// How long a `.found` answer is reused; zero turns the cache off.
    public let cacheInterval: Duration
    private let cachedToken = Mutex<(token: String, expires: Int64)?>(nil)
    private let cache: VerdictCache<Lookup>
    let logger: Logger

    public init(
        credentials: Credentials, endpoints: Endpoints, transport: any UpstreamTransport, policy: RetryPolicy = .init(),
        cacheInterval: Duration = .seconds(300), logger: Logger = Logger(label: "stockroom.server-api")
    ) {
        self.credentials = credentials
        self.endpoints = endpoints
        self.transport = transport
        self.policy = policy
        self.cacheInterval = cacheInterval
        self.cache = VerdictCache(interval: cacheInterval)
        self.logger = logger
    }

    /// The API's answer about `transactionID`. With `.cachedAllowed` (downloads), a `.found`
    /// answer younger than `cacheInterval` is reused, so a view from before a refund can stand
    /// for that long: never let it clear a revocation seen elsewhere. `.upstreamOnly`
    /// (operators) asks Apple now and refreshes the cache. `.notFound` and `.unavailable` are
    /// never cached, and `.unavailable` stays distinct from both others.
    public func transaction(_ transactionID: String, freshness: VerificationFreshness = .cachedAllowed) async -> Lookup {
        guard Self.isTransactionID(transactionID) else { return .notFound }
        if freshness == .cachedAllowed, let cached = cache.value(for: transactionID) { return cached }
        let lookup = await lookUp(transactionID)
        if case .found = lookup { cache.store(lookup, for: transactionID) }
        return lookup
    }

    /// Whether `text` may go into a URL as a transaction ID (`TransactionID`'s rule).
    static func isTransactionID(_ text: String) -> Bool {
        TransactionID.isValid(text)
    }

    /// Get Transaction Info: production first, the sandbox on 4040010; what `exchange` calls
    /// transient is retried within the policy (`Retry-After` honoured); refused credentials and
    /// any other 4xx are unavailable at once.
    private func lookUp(_ transactionID: String) async -> Lookup {
        var environment = StoreEnvironment.production
        return await policy.run { timeout in
            switch await exchange(
                .get, path: "/inApps/v1/transactions/\(transactionID)", environment: environment, timeout: timeout, endpoint: "transactions"
            )
            {
            case .answered(_, let body):
                guard let info = UpstreamJSON.decode(TransactionInfoResponse.self, from: body)?.signedTransactionInfo else {
                    return .answered(.unavailable(reason: "an answer without signedTransactionInfo", retryAfter: policy.retryAfter))
                }
                return .answered(.found(signedTransactionInfo: info, environment: environment))
            case .notFound(let errorCode):
                guard errorCode == 4_040_010, environment == .production else { return .answered(.notFound) }
                environment = .sandbox
                return .redirected()
            case .transient(let reason, let after):
                return .retry(reason: reason, after: after)
            case .credentialsRefused(let reason):
                return .answered(.unavailable(reason: reason, retryAfter: policy.retryAfter))
            case .refused(let status, _, let reason):
                return .answered(
                    .unavailable(reason: "HTTP \(status) from the App Store Server API: \(reason)", retryAfter: policy.retryAfter))
            }
        } givingUp: { attempts, lastFailure in
            .unavailable(
                reason: "the App Store Server API did not answer usably after \(attempts) attempt(s): \(lastFailure)",
                retryAfter: policy.retryAfter)
        }
    }

    /// The bearer JWT, reused until a minute before it expires.
    func bearerToken(now: Date = Date()) throws(CryptoError) -> String {
        let issuedAt = Int64(now.timeIntervalSince1970)
        if let cached = cachedToken.withLock({ $0 }), cached.expires - 60 > issuedAt { return cached.token }
        let header = ServerAPITokenClaims.Header(kid: credentials.keyID)
        let claims = ServerAPITokenClaims(
            iss: credentials.issuerID, iat: issuedAt, exp: issuedAt + Self.tokenLifetime, bid: credentials.bundleID)
        func part(_ value: some Encodable) -> String { ByteEncoding.base64URL(UpstreamBody.encode(value) ?? []) }
        let signingInput = part(header) + "." + part(claims)
        let token = signingInput + "." + ByteEncoding.base64URL(try credentials.privateKey.sign(Array(signingInput.utf8)))
        cachedToken.withLock { $0 = (token, issuedAt + Self.tokenLifetime) }
        return token
    }
}
