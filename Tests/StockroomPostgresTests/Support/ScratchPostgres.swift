import Foundation
import Logging
import PostgresNIO
import StockroomCore
import StockroomPostgres

/// A PostgreSQL database of its own for one test, on the throwaway cluster `.ci/postgres start`
/// made, whose URL is in `STOCKROOM_TEST_POSTGRES` (`make test` sets it).
///
/// Without the variable a PostgreSQL case fails, saying so: it is never skipped in silence.
public enum ScratchPostgres {
    public static let variable = "STOCKROOM_TEST_POSTGRES"

    /// The variable is missing or unusable.
    public struct Unavailable: Error, CustomStringConvertible {
        public let description: String
    }

    /// The cluster's address, from `STOCKROOM_TEST_POSTGRES`.
    public static func cluster() throws -> PostgresAddress {
        guard let url = ProcessInfo.processInfo.environment[variable], !url.isEmpty else {
            throw Unavailable(
                description:
                    """
                    \(variable) is not set: this PostgreSQL case needs a cluster. Run `export \(variable)=$(.ci/postgres start)` \
                    (make test does it)
                    """
            )
        }
        do {
            return try PostgresAddress(url: url)
        } catch {
            throw Unavailable(description: "\(variable) is not a postgres:// URL: \(error.description)")
        }
    }

    /// Creates a fresh database, runs `body` with its address, and drops it afterwards, also
    /// when `body` throws. `collation`, an ICU locale (`en-US`), gives the database that
    /// collation, as a production database created under `en_US.UTF-8` sorts text; nil keeps the
    /// cluster's `C.UTF-8`.
    public static func withDatabase<Value: Sendable>(
        collation: String? = nil, _ body: (PostgresAddress) async throws -> Value
    ) async throws -> Value {
        let cluster = try cluster()
        let name = "stockroom_test_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        let locale = collation.map { " TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE '\($0)'" } ?? ""
        try await admin(cluster, "CREATE DATABASE \(name)\(locale)")
        do {
            let value = try await body(cluster.database(name))
            try await admin(cluster, "DROP DATABASE \(name) WITH (FORCE)")
            return value
        } catch {
            try? await admin(cluster, "DROP DATABASE \(name) WITH (FORCE)")
            throw error
        }
    }

    /// A ledger on a fresh database, its pool running for `body`. The lease timeout is long: a
    /// loaded test machine is slow, not a lost database (the outage tests pass their own).
    public static func withLedger<Value: Sendable>(
        checkoutTimeout: Duration = .seconds(30), finishOn: FinishTrigger? = nil, tellsAppleOfAccounts: Bool = false,
        collation: String? = nil, _ body: @Sendable (PostgresLedger) async throws -> Value
    ) async throws -> Value {
        try await withDatabase(collation: collation) { address in
            try await PostgresPool(address: address, poolSize: 4, checkoutTimeout: checkoutTimeout, logger: quiet).running { database in
                try await body(PostgresLedger(database: database, finishOn: finishOn, tellsAppleOfAccounts: tellsAppleOfAccounts))
            }
        }
    }

    /// Runs one statement on the database at `address` over a connection of its own.
    public static func admin(_ address: PostgresAddress, _ sql: String) async throws {
        var configuration = PostgresConnection.Configuration(
            host: address.host, port: address.port, username: address.username, password: address.password, database: address.database,
            tls: .disable)
        configuration.options.connectTimeout = .seconds(5)
        let connection = try await PostgresConnection.connect(configuration: configuration, id: 1, logger: quiet)
        do {
            _ = try await connection.query(PostgresQuery(unsafeSQL: sql), logger: quiet).collect()
            try await connection.close()
        } catch {
            try? await connection.close()
            throw error
        }
    }

    public static let quiet: Logger = {
        var logger = Logger(label: "stockroom.test.postgres")
        logger.logLevel = .critical
        return logger
    }()
}
