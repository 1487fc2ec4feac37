import Foundation
import Logging
import NIOPosix
public import StockroomCore

/// `stockroom doctor`: checks a deployment, with `serve`'s configuration, before it serves.
///
/// Each check is independent and says in one line what it found; nothing is created or changed
/// (the ledger is opened only if it exists, and its write test is rolled back).
public struct Doctor: Sendable {
    /// One check's verdict.
    public struct Finding: Sendable, Equatable, CustomStringConvertible {
        public var check: String
        public var passed: Bool
        public var detail: String

        public var description: String { "\(passed ? "ok  " : "FAIL") \(check): \(detail)" }
    }

    public let configuration: ServerConfiguration
    /// Trust-root files as given, so that each is named in its own line.
    public let trustRootFiles: [String]
    public let transport: any UpstreamTransport
    /// The clock the upstream's `Date` is compared with; injectable for tests.
    public let now: @Sendable () -> Date
    /// Below this, the ledger's file system is reported full.
    public static let minimumFreeBytes: Int64 = 100 << 20
    /// The largest clock difference with the upstream that passes.
    public static let maximumClockSkew: TimeInterval = 60

    public init(
        configuration: ServerConfiguration, trustRootFiles: [String], transport: any UpstreamTransport = CurlHTTPClient(),
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.configuration = configuration
        self.trustRootFiles = trustRootFiles
        self.transport = transport
        self.now = now
    }

    /// Every check, in the order an operator fixes them.
    public func run() async -> [Finding] {
        let (catalogFinding, catalog) = await catalogue()
        var findings = [catalogFinding]
        findings += roots()
        findings.append(key())
        findings.append(sharedSecret(catalog))
        if configuration.usesPostgres {
            findings.append(await postgresDatabase())
        } else {
            findings.append(database())
            findings.append(diskSpace())
        }
        findings += await upstream()
        return findings
    }

    // MARK: Local checks

    /// Loads the catalogue as `serve` would (every file hashed; the digest cache is not written).
    func catalogue() async -> (Finding, ProductCatalog?) {
        let configuration = self.configuration
        if configuration.contentFolder.hasPrefix("s3://") || configuration.catalogFolder.hasPrefix("s3://") {
            return (await bucket(), nil)
        }
        do {
            let catalog = try await NIOThreadPool.catalog.runIfActive { () throws -> ProductCatalog in
                let jail = try ContentJail(folder: configuration.contentFolder)
                return try CatalogLoader(catalogFolder: configuration.catalogFolder, jail: jail, digests: DigestCache(file: nil)).load()
            }
            return (
                Finding(
                    check: "catalogue", passed: true,
                    detail: "\(catalog.products.count) product\(catalog.products.count == 1 ? "" : "s"), version \(catalog.version)"),
                catalog
            )
        } catch let error as CatalogError {
            return (
                Finding(check: "catalogue", passed: false, detail: error.description.split(separator: "\n").joined(separator: "; ")), nil
            )
        } catch {
            return (Finding(check: "catalogue", passed: false, detail: "the content folder: \(error)"), nil)
        }
    }

    /// Content in a bucket: the settings, the credentials and the bucket (a signed HEAD of it),
    /// then the catalogue and a signed HEAD of every product's object. Nothing is hashed or written.
    func bucket() async -> Finding {
        let objects: ObjectContent?
        do {
            objects = try await ObjectContent.open(
                configuration, logger: Logger(label: "stockroom.doctor", factory: { _ in SwiftLogNoOpLogHandler() }))
        } catch StartupError.objectStorage(let detail) {
            return Finding(check: "object storage", passed: false, detail: detail)
        } catch {
            return Finding(check: "object storage", passed: false, detail: error.description)
        }
        guard let objects else {
            return Finding(check: "object storage", passed: false, detail: "--catalog in a bucket needs --content in a bucket")
        }
        let origin = objects.client.settings.base(bucket: objects.location.bucket).origin
        let store = "\(objects.location) at \(origin), region \(objects.client.settings.region), \(objects.client.settings.credentials)"
        switch await objects.loader.check() {
        case .success(let count):
            return Finding(
                check: "object storage", passed: true,
                detail: "\(store): the bucket and all \(count) products' objects answer a signed HEAD")
        case .failure(let error):
            return Finding(check: "object storage", passed: false, detail: "\(store): " + error.problems.joined(separator: "; "))
        }
    }

    func roots() -> [Finding] {
        switch configuration.upstream {
        case .apple:
            do {
                let root = try AppleRootCertificates.rootCAG3()
                return [Finding(check: "trust roots", passed: true, detail: "Apple's bundled roots parse (\(root.subject))")]
            } catch {
                return [Finding(check: "trust roots", passed: false, detail: "Apple's bundled root does not parse: \(error)")]
            }
        case .simulator:
            return [Finding(check: "trust roots", passed: true, detail: "the built-in simulator signs with its own root (a test tool)")]
        case .url:
            guard !trustRootFiles.isEmpty else {
                return [
                    Finding(
                        check: "trust roots", passed: false, detail: "--upstream URL needs --trust-root: no signed transaction can verify")
                ]
            }
            return trustRootFiles.map { path in
                guard let pem = FileManager.default.contents(atPath: path) else {
                    return Finding(check: "trust root \(path)", passed: false, detail: "cannot be read")
                }
                do {
                    let certificate = try Certificate(pem: String(decoding: pem, as: UTF8.self))
                    return Finding(check: "trust root \(path)", passed: true, detail: certificate.subject)
                } catch {
                    return Finding(check: "trust root \(path)", passed: false, detail: "not a PEM certificate: \(error)")
                }
            }
        }
    }

    func key() -> Finding {
        let parts = [configuration.appStoreKeyPath, configuration.appStoreKeyID, configuration.appStoreIssuerID]
        guard let path = parts[0], parts[1] != nil, parts[2] != nil else {
            if parts.contains(where: { $0 != nil }) {
                return Finding(
                    check: "Server API key", passed: false,
                    detail: "give all three of --app-store-key, --app-store-key-id and --app-store-issuer-id")
            }
            return Finding(
                check: "Server API key", passed: true,
                detail: "none: signed transactions are checked by signature only, refunds by notification")
        }
        guard let pem = FileManager.default.contents(atPath: path) else {
            return Finding(check: "Server API key", passed: false, detail: "\(path) cannot be read")
        }
        do {
            _ = try ECPrivateKey(pem: String(decoding: pem, as: UTF8.self))
            return Finding(check: "Server API key", passed: true, detail: "\(path) is a P-256 private key")
        } catch {
            return Finding(check: "Server API key", passed: false, detail: "\(path) is not a P-256 private key: \(error)")
        }
    }

    func sharedSecret(_ catalog: ProductCatalog?) -> Finding {
        if configuration.sharedSecret != nil { return Finding(check: "shared secret", passed: true, detail: "set") }
        if configuration.upstream == .simulator { return Finding(check: "shared secret", passed: true, detail: "the simulator needs none") }
        // Receipts are always accepted; Apple needs the password for auto-renewable subscriptions.
        let renewing = catalog?.products.filter { $0.type == .autoRenewable }.count ?? 0
        guard renewing == 0 else {
            return Finding(
                check: "shared secret", passed: false,
                detail:
                    "the catalogue sells \(renewing) auto-renewable subscription(s) and receipts are accepted: set STOCKROOM_SHARED_SECRET")
        }
        return Finding(check: "shared secret", passed: true, detail: "not set, and not needed: no auto-renewable subscriptions")
    }
}
