import Foundation

/// Where a PostgreSQL ledger lives: `postgres://user:password@host:port/database`, as `--database`
/// and `STOCKROOM_DATABASE` give it (`postgresql://` too, and `?sslmode=disable|prefer|require`).
///
/// `description` leaves the password out, so the address can be logged and printed.
public struct PostgresAddress: Sendable, Equatable, CustomStringConvertible {
    /// A host name or IP address (an IPv6 one without brackets).
    public var host: String
    /// 5432 unless the address says otherwise.
    public var port: Int
    /// The role the ledger connects as.
    public var username: String
    /// Never logged or printed.
    public var password: String?
    /// The database holding the ledger's tables.
    public var database: String
    /// `?sslmode=`; `prefer` unless the address says otherwise.
    public var tls: TLSMode

    /// Whether the connection is encrypted, as libpq's `sslmode` says it.
    public enum TLSMode: String, Sendable, Equatable {
        /// Plain TCP (a loopback or private network).
        case disable
        /// TLS when the server offers it (libpq's default).
        case prefer
        /// TLS, verified, or no connection.
        case require
    }

    /// Why a `postgres://` address cannot be used; says what is wrong without repeating a password.
    public struct Malformed: Error, CustomStringConvertible, Equatable {
        public let description: String
    }

    /// Whether `text` names a PostgreSQL ledger rather than a SQLite file.
    public static func isAddress(_ text: String) -> Bool {
        text.hasPrefix("postgres://") || text.hasPrefix("postgresql://")
    }

    /// Parses a `postgres://` URL; the user and database must be given, the port defaults to 5432.
    public init(url text: String) throws(Malformed) {
        guard Self.isAddress(text), text.utf8.count <= 4096, let components = URLComponents(string: text) else {
            throw Malformed(description: "a PostgreSQL ledger is given as postgres://user:password@host:port/database")
        }
        guard let host = components.host, !host.isEmpty else { throw Malformed(description: "the PostgreSQL address names no host") }
        guard let username = components.user, !username.isEmpty else {
            throw Malformed(description: "the PostgreSQL address names no user (postgres://user@host/database)")
        }
        let database = String(components.path.drop(while: { $0 == "/" }))
        guard !database.isEmpty, !database.contains("/") else {
            throw Malformed(description: "the PostgreSQL address names no database (postgres://user@host/database)")
        }
        let port = components.port ?? 5432
        guard (1...65535).contains(port) else { throw Malformed(description: "the PostgreSQL port must be from 1 to 65535") }
        var tls = TLSMode.prefer
        for item in components.queryItems ?? [] {
            guard item.name == "sslmode" else {
                throw Malformed(description: "the PostgreSQL address takes only ?sslmode=, not \"\(item.name)\"")
            }
            guard let mode = TLSMode(rawValue: item.value ?? "") else {
                throw Malformed(description: "sslmode must be disable, prefer or require, not \"\(item.value ?? "")\"")
            }
            tls = mode
        }
        // IPv6 hosts come bracketed in a URL and bare in a socket address.
        self.host = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        self.port = port
        self.username = components.percentEncodedUser?.removingPercentEncoding ?? username
        self.password = components.percentEncodedPassword?.removingPercentEncoding
        self.database = database.removingPercentEncoding ?? database
        self.tls = tls
    }

    /// The same server, another database (tests make a fresh one each; `CREATE DATABASE` runs in `postgres`).
    public func database(_ name: String) -> PostgresAddress {
        var copy = self
        copy.database = name
        return copy
    }

    /// The address without its password.
    public var description: String {
        let address = host.contains(":") ? "[\(host)]" : host
        let mode = tls == .prefer ? "" : "?sslmode=\(tls.rawValue)"
        return "postgres://\(username)@\(address):\(port)/\(database)\(mode)"
    }

    /// The address with its password, percent-encoded: for handing to another process, never for logs.
    public var url: String {
        let address = host.contains(":") ? "[\(host)]" : host
        let secret = password.map { ":" + ($0.addingPercentEncoding(withAllowedCharacters: .urlPasswordAllowed) ?? $0) } ?? ""
        let user = username.addingPercentEncoding(withAllowedCharacters: .urlUserAllowed) ?? username
        let mode = tls == .prefer ? "" : "?sslmode=\(tls.rawValue)"
        return "postgres://\(user)\(secret)@\(address):\(port)/\(database)\(mode)"
    }
}
