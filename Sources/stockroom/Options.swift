import ArgumentParser
import Foundation
import Logging
import StockroomCore
import StockroomPostgres
import StockroomServer

/// The options shared by `serve` and the operator commands, each falling back to
/// `STOCKROOM_<NAME>` and then to the default of `ServerConfiguration`.
///
/// This is the one place where flags and the environment become a configuration.
struct ServerOptions: ParsableArguments {
    @Option(help: "Address to listen on (STOCKROOM_HOST; default 127.0.0.1).")
    var host: String?

    @Option(help: "Port to listen on; 0 picks a free one (STOCKROOM_PORT; default 8080).")
    var port: Int?

    @Option(help: "Folder holding products.json, or s3://BUCKET/KEY of a products.json in a bucket (STOCKROOM_CATALOG; default catalog).")
    var catalog: String?

    @Option(
        help:
            """
            Folder content files are served from, and confined to, or s3://BUCKET/PREFIX for content in a bucket (STOCKROOM_CONTENT; \
            default content).
            """
    )
    var content: String?

    @OptionGroup var objectStoreOptions: ObjectStoreOptions

    @Option(
        help: """
            The ledger: a SQLite file, or PostgreSQL as postgres://user:password@host:port/database, which several \
            instances may share (STOCKROOM_DATABASE; default stockroom.sqlite).
            """)
    var database: String?

    @Option(help: "Connections in the PostgreSQL ledger's pool, per instance (STOCKROOM_DATABASE_POOL; default 8).")
    var databasePool: Int?

    @Option(
        help: ArgumentHelp(
            "How long a request waits for a PostgreSQL connection before it is answered 503 (STOCKROOM_DATABASE_TIMEOUT; default 5s).",
            valueName: "duration"))
    var databaseTimeout: String?

    @OptionGroup var upstreamOptions: UpstreamOptions

    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical (STOCKROOM_LOG_LEVEL; default info).")
    var logLevel: String?

    /// Merges flags over `environment` over the defaults; a malformed value is a usage error.
    func configuration(environment: [String: String] = ProcessInfo.processInfo.environment) throws -> ServerConfiguration {
        func value(_ flag: String?, _ name: String) -> String? { flag ?? environment["STOCKROOM_\(name)"] }
        var configuration = ServerConfiguration()
        if let host = value(host, "HOST") { configuration.host = host }
        if let text = value(port.map(String.init), "PORT") { configuration.port = try parsePort(text) }
        if let catalog = value(catalog, "CATALOG") { configuration.catalogFolder = catalog }
        if let content = value(content, "CONTENT") { configuration.contentFolder = content }
        if let database = value(database, "DATABASE") {
            if PostgresAddress.isAddress(database) {
                do {
                    _ = try PostgresAddress(url: database)
                } catch {
                    throw ValidationError("--database: \(error.description)")
                }
            }
            configuration.databaseLocation = database
        }
        if let text = value(databasePool.map(String.init), "DATABASE_POOL") {
            guard let size = Int(text), (1...1000).contains(size) else {
                throw ValidationError("--database-pool must be a number from 1 to 1000, not \"\(text)\"")
            }
            configuration.databasePoolSize = size
        }
        if let text = value(databaseTimeout, "DATABASE_TIMEOUT") {
            guard let timeout = try? DurationArgument.parse(text), timeout > .zero else {
                throw ValidationError("--database-timeout must be a duration longer than 0s (500ms, 5s, 1m), not \"\(text)\"")
            }
            configuration.databaseTimeout = timeout
        }
        try upstreamOptions.apply(to: &configuration, environment: environment)
        try objectStoreOptions.apply(to: &configuration, environment: environment)
        // Secrets come from the environment only, never from flags a process listing shows.
        configuration.tokenSecret = try secret("STOCKROOM_TOKEN_SECRET", in: environment)
        configuration.adminToken = try secret("STOCKROOM_ADMIN_TOKEN", in: environment)
        if let text = value(logLevel, "LOG_LEVEL") {
            guard let level = Logger.Level(rawValue: text) else {
                throw ValidationError(
                    "log level must be one of \(Logger.Level.allCases.map(\.rawValue).joined(separator: ", ")), not \"\(text)\"")
            }
            configuration.logLevel = level
        }
        return configuration
    }
}

/// Where and how receipts are verified (part of `ServerOptions`).
struct UpstreamOptions: ParsableArguments {
    @Option(help: "The app's bundle ID that receipts must carry (STOCKROOM_BUNDLE_ID; default com.example.stockroom.demo).")
    var bundleId: String?

    @Option(
        help: """
            Where receipts are verified: apple; a base URL (verifyReceipt and the Server API there, JWS \
            trusted only under --trust-root); or simulator, the App Store simulator built into serve, a \
            test tool mounted only on a loopback --host (STOCKROOM_UPSTREAM; default apple).
            """)
    var upstream: String?

    @Option(
        name: .customLong("trust-root"),
        help: """
            A root certificate (PEM file) that StoreKit 2 signed transactions may chain to, with \
            --upstream URL or simulator; repeat for several. Never fetched from the upstream \
            (STOCKROOM_TRUST_ROOT, several separated by ':'; default Apple Root CA - G3 only).
            """)
    var trustRoots: [String] = []

    @Option(help: "The app's App Store shared secret, for verifyReceipt's password (STOCKROOM_SHARED_SECRET).")
    var sharedSecret: String?

    @Option(
        help:
            """
            App Store Server API key file (.p8) (STOCKROOM_APP_STORE_KEY); with its key and issuer IDs, signed transactions are \
            confirmed with the API.
            """
    )
    var appStoreKey: String?

    @Flag(
        name: .customLong("accept-xcode"),
        help: """
            Accept StoreKit Testing in Xcode's signed transactions and receipts, verified locally, for \
            development; refused with --upstream apple (STOCKROOM_ACCEPT_XCODE=1).
            """)
    var acceptXcode = false

    @Option(
        name: .customLong("xcode-certificate"),
        help: "With --accept-xcode: only the StoreKit Test certificate exported from Xcode, PEM or DER (STOCKROOM_XCODE_CERTIFICATE).")
    var xcodeCertificate: String?

    @Option(
        help: ArgumentHelp(
            """
            OCSP checks of the chain that signs each StoreKit 2 JWS: hard (only a good answer passes), soft (a revoked \
            certificate refuses; no answer is allowed and counted) or off; off with --upstream simulator (STOCKROOM_OCSP; \
            default soft).
            """,
            valueName: "hard|soft|off"))
    var ocsp: String?

    @Option(help: "The API key's ID (STOCKROOM_APP_STORE_KEY_ID).")
    var appStoreKeyId: String?

    @Option(help: "The App Store Connect issuer ID (STOCKROOM_APP_STORE_ISSUER_ID).")
    var appStoreIssuerId: String?

    func apply(to configuration: inout ServerConfiguration, environment: [String: String]) throws {
        if let bundleID = bundleId ?? environment["STOCKROOM_BUNDLE_ID"] { configuration.bundleID = bundleID }
        if let text = upstream ?? environment["STOCKROOM_UPSTREAM"] {
            guard let upstream = UpstreamSetting(argument: text) else {
                throw ValidationError("upstream must be simulator, apple, or an http(s) URL, not \"\(URLText.redacted(text))\"")
            }
            configuration.upstream = upstream
        }
        if let secret = sharedSecret ?? environment["STOCKROOM_SHARED_SECRET"], !secret.isEmpty {
            configuration.sharedSecret = secret
        }
        let rootFiles = trustRoots.isEmpty ? (environment["STOCKROOM_TRUST_ROOT"] ?? "").split(separator: ":").map(String.init) : trustRoots
        configuration.trustedRoots = try rootFiles.map(Self.trustRoot)
        configuration.appStoreKeyPath = appStoreKey ?? environment["STOCKROOM_APP_STORE_KEY"]
        configuration.appStoreKeyID = appStoreKeyId ?? environment["STOCKROOM_APP_STORE_KEY_ID"]
        configuration.appStoreIssuerID = appStoreIssuerId ?? environment["STOCKROOM_APP_STORE_ISSUER_ID"]
        configuration.acceptsXcode = acceptXcode || ["1", "true"].contains(environment["STOCKROOM_ACCEPT_XCODE"] ?? "")
        if let path = xcodeCertificate ?? environment["STOCKROOM_XCODE_CERTIFICATE"] {
            guard configuration.acceptsXcode else { throw ValidationError("--xcode-certificate needs --accept-xcode") }
            configuration.xcodeCertificate = try Self.certificate(path, flag: "--xcode-certificate")
        }
        if let text = ocsp ?? environment["STOCKROOM_OCSP"] {
            guard let policy = RevocationPolicy(rawValue: text) else {
                throw ValidationError("--ocsp must be hard, soft or off, not \"\(text)\"")
            }
            configuration.ocsp = policy
        }
        if configuration.acceptsXcode, configuration.upstream == .apple {
            throw ConfigurationRefusal("--accept-xcode is for development: it refuses to run with --upstream apple")
        }
    }
}

extension UpstreamOptions {
    /// The certificate in `path`, PEM or DER (Xcode saves `.cer` files as DER); a usage error otherwise.
    static func certificate(_ path: String, flag: String) throws -> Certificate {
        guard let data = FileManager.default.contents(atPath: path), data.count <= 1 << 20 else {
            throw ValidationError("\(flag) \(path) cannot be read")
        }
        if let pem = try? Certificate(pem: String(decoding: data, as: UTF8.self)) { return pem }
        do {
            return try Certificate(der: Array(data))
        } catch {
            throw ValidationError("\(flag) \(path) is not a PEM or DER certificate: \(error)")
        }
    }

    /// The certificate in the PEM file `path` (`--trust-root`); a usage error when unreadable.
    static func trustRoot(_ path: String) throws -> Certificate {
        guard let pem = FileManager.default.contents(atPath: path), pem.count <= 1 << 20 else {
            throw ValidationError("--trust-root \(path) cannot be read")
        }
        do {
            return try Certificate(pem: String(decoding: pem, as: UTF8.self))
        } catch {
            throw ValidationError("--trust-root \(path) is not a PEM certificate: \(error)")
        }
    }
}

/// A secret from the environment, or nil when unset or empty; shorter than 32 bytes is refused.
func secret(_ name: String, in environment: [String: String]) throws -> String? {
    guard let value = environment[name], !value.isEmpty else { return nil }
    guard value.utf8.count >= 32 else { throw ConfigurationRefusal("\(name) must be at least 32 bytes; it has \(value.utf8.count)") }
    return value
}

/// A configuration that parses but must not run; `serve` prints it as one line and exits 1.
struct ConfigurationRefusal: Error, CustomStringConvertible {
    let description: String

    init(_ description: String) {
        self.description = description
    }
}

/// A TCP port from a flag or variable: 0 (any free port) to 65535.
func parsePort(_ text: String) throws -> Int {
    guard let port = Int(text), (0...65535).contains(port) else {
        throw ValidationError("port must be a number from 0 to 65535, not \"\(text)\"")
    }
    return port
}

/// The trimmed text of `file`, or of standard input for `-`; a one-line failure when unreadable.
func readArgumentFile(_ file: String) -> String {
    let data = file == "-" ? FileHandle.standardInput.readDataToEndOfFile() : FileManager.default.contents(atPath: file)
    guard let data else { fail("\(file) cannot be read") }
    return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
}

/// The root certificate at `path` (PEM), or `fallback` (one of Apple's) when none is given.
func loadRootCertificate(_ path: String?, fallback: () throws -> Certificate) -> Certificate {
    do {
        guard let path else { return try fallback() }
        guard let pem = FileManager.default.contents(atPath: path) else { fail("\(path) cannot be read") }
        return try Certificate(pem: String(decoding: pem, as: UTF8.self))
    } catch {
        fail("the root certificate cannot be read: \(error)")
    }
}

/// Prints `stockroom: message` on standard error and exits with `code`.
func fail(_ message: String, code: Int32 = 1) -> Never {
    FileHandle.standardError.write(Data("stockroom: \(message)\n".utf8))
    exit(code)
}
