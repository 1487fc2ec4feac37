public import Logging
public import PostgresNIO
public import ServiceLifecycle
import StockroomCore

/// The connection pool of a PostgreSQL ledger, and how the ledger uses it: a bounded wait for a
/// connection, one SQL transaction per decision retried on a serialisation conflict, and any
/// sign of a lost database turned into `LedgerUnavailable`.
///
/// A `Service`: its `run()` is the pool's (the server runs it among its services; tests and the
/// CLI run it beside their work). Nothing is connected before `run()` and a first query.
public final class PostgresPool: Service, Sendable {
    /// The pool; `run()` must be running for any query to start.
    public let client: PostgresClient
    /// The database the pool connects to.
    public let address: PostgresAddress
    /// How long a call waits for a pooled connection before it is `LedgerUnavailable`.
    public let checkoutTimeout: Duration
    /// How long a call may run on its connection before it is cut and `LedgerUnavailable`; the
    /// ledger's export, import and migrations are not bounded.
    public let callTimeout: Duration
    let logger: Logger
    let schema: SchemaGate
    private let outage = Outage()

    /// A decision that keeps meeting a serialisation conflict or deadlock is tried this often.
    static let attempts = 8

    /// A pool of at most `poolSize` connections to `address`. `migrated` says the schema was
    /// brought up to date already (the server does it before it starts); otherwise the first
    /// call does it.
    public init(
        address: PostgresAddress, poolSize: Int, checkoutTimeout: Duration = .seconds(5), callTimeout: Duration = .seconds(30),
        migrated: Bool = false,
        logger: Logger
    ) {
        var logger = logger
        // PostgresNIO logs statements below .notice; receipts travel in them.
        if logger.logLevel < .notice { logger.logLevel = .notice }
        self.client = PostgresClient(configuration: Self.configuration(address, poolSize: poolSize), backgroundLogger: logger)
        self.address = address
        self.checkoutTimeout = checkoutTimeout
        self.callTimeout = callTimeout
        self.logger = logger
        self.schema = SchemaGate(migrated: migrated)
    }

    /// Runs the pool until cancelled or shut down gracefully.
    public func run() async throws {
        await client.run()
    }

    /// Runs `body` with the pool running beside it (tests, one-off commands, start-up migrations).
    public func running<Value: Sendable>(_ body: @Sendable (PostgresPool) async throws -> Value) async throws -> Value {
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await self.client.run() }
            defer { group.cancelAll() }
            return try await body(self)
        }
    }

    /// Brings the schema up to date (under an advisory lock, so concurrent starts migrate once);
    /// returns the versions this call applied.
    @discardableResult
    public func migrate() async throws -> [Int] {
        try await retryingConflicts {
            try await self.withConnection(bounded: false) { connection in try await PostgresSchema.migrate(connection, logger: self.logger)
            }
        }
    }

    /// Migrates over a connection of its own, before any pool runs (the server's start-up):
    /// a refusal says what the server said (a wrong password, a missing database), never the password.
    @discardableResult
    public static func migrate(address: PostgresAddress, logger: Logger) async throws -> [Int] {
        let tls: PostgresConnection.Configuration.TLS =
            switch address.tls {
            case .disable: .disable
            case .prefer: .prefer(try NIOSSLContext(configuration: .makeClientConfiguration()))
            case .require: .require(try NIOSSLContext(configuration: .makeClientConfiguration()))
            }
        var configuration = PostgresConnection.Configuration(
            host: address.host, port: address.port, username: address.username, password: address.password, database: address.database,
            tls: tls)
        configuration.options.connectTimeout = .seconds(5)
        configuration.options.additionalStartupParameters = [("TimeZone", "UTC"), ("application_name", "stockroom")]
        let connection: PostgresConnection
        do {
            connection = try await PostgresConnection.connect(configuration: configuration, id: 0, logger: logger)
        } catch {
            throw PostgresFault.refusal(error)
        }
        do {
            let applied = try await PostgresSchema.migrate(connection, logger: logger)
            try await connection.close()
            return applied
        } catch {
            try? await connection.close()
            throw PostgresFault.refusal(error)
        }
    }

    // MARK: Running statements

    /// One statement, or a read, on a pooled connection, after the schema is ready.
    func read<Value: Sendable>(_ body: @escaping @Sendable (PostgresConnection) async throws -> Value) async throws -> Value {
        try await retrying { try await self.withConnection(body) }
    }

    /// `body` in one SQL transaction, retried whole on a serialisation failure, a deadlock, or a
    /// unique key another transaction took first; other errors roll it back and surface.
    /// `bounded` false lets it run past `callTimeout` (moving a whole ledger).
    func transaction<Value: Sendable>(bounded: Bool = true, _ body: @escaping @Sendable (PostgresConnection) async throws -> Value)
        async throws
        -> Value
    {
        try await retrying {
            try await self.withConnection(bounded: bounded) { connection in
                try await connection.withTransaction(logger: self.logger) { connection in try await body(connection) }
            }
        }
    }

    private func retrying<Value: Sendable>(_ operation: @Sendable () async throws -> Value) async throws -> Value {
        try await schema.ready { try await self.migrate() }
        return try await retryingConflicts(operation)
    }

    /// `operation`, tried again (at most `attempts` times in all) when it threw `Retryable`.
    private func retryingConflicts<Value: Sendable>(_ operation: @Sendable () async throws -> Value) async throws -> Value {
        var attempt = 1
        while true {
            do {
                return try await operation()
            } catch let error as PostgresFault.Retryable {
                guard attempt < Self.attempts else { throw error.underlying }
                logger.debug("ledger transaction retried", metadata: ["sqlstate": .string(error.sqlState)])
                attempt += 1
                try await Task.sleep(for: .milliseconds(Int.random(in: 1...(4 * attempt))))
            }
        }
    }

    /// `body` on a pooled connection; waiting longer than `checkoutTimeout` for one is
    /// `LedgerUnavailable` (`PooledCall`: the caller never waits on the pool past it), and a checkout
    /// that comes later is given back untouched. While the database is known lost, calls wait
    /// only `outageCheckoutTimeout`, so a 503 comes quickly. A `bounded` call still running on its
    /// connection after `callTimeout`, or about a second after that connection closed, is
    /// `LedgerUnavailable` too, and its connection is closed.
    func withConnection<Value: Sendable>(bounded: Bool = true, _ body: @escaping @Sendable (PostgresConnection) async throws -> Value)
        async throws
        -> Value
    {
        let timeout = outage.isLost ? min(checkoutTimeout, Self.outageCheckoutTimeout) : checkoutTimeout
        do {
            let value = try await PooledCall<Value>.answer(within: timeout, callTimeout: bounded ? callTimeout : nil) { call in
                try await self.client.withConnection { connection in
                    let checkedOut = call.checkout(
                        cutting: { let _: EventLoopFuture<Void> = connection.close() }, isClosed: { connection.isClosed })
                    guard checkedOut else { throw CancellationError() }
                    defer { call.release() }
                    // The pool can hand out a connection the database has just closed (it hears
                    // of the close later), and a query on it is never answered: another is tried.
                    guard !connection.isClosed else {
                        throw PostgresFault.Retryable(
                            sqlState: "08006", underlying: LedgerUnavailable(reason: "the database closed the connection"))
                    }
                    return try await body(connection)
                }
            }
            if outage.recovered() { logger.notice("ledger database reachable again", metadata: ["database": .string(address.description)]) }
            return value
        } catch {
            let fault = PostgresFault.classify(error)
            if let lost = fault as? LedgerUnavailable, outage.lost() {
                logger.warning(
                    "ledger database unavailable", metadata: ["database": .string(address.description), "reason": .string(lost.reason)])
            }
            throw fault
        }
    }

    /// How long a call waits for a connection while the database is known lost.
    static let outageCheckoutTimeout: Duration = .milliseconds(500)

    static func configuration(_ address: PostgresAddress, poolSize: Int) -> PostgresClient.Configuration {
        let tls: PostgresClient.Configuration.TLS =
            switch address.tls {
            case .disable: .disable
            case .prefer: .prefer(.makeClientConfiguration())
            case .require: .require(.makeClientConfiguration())
            }
        var configuration = PostgresClient.Configuration(
            host: address.host, port: address.port, username: address.username, password: address.password,
            database: address.database, tls: tls)
        configuration.options.maximumConnections = max(1, poolSize)
        configuration.options.minimumConnections = 0
        configuration.options.connectTimeout = .seconds(5)
        configuration.options.additionalStartupParameters = [("TimeZone", "UTC"), ("application_name", "stockroom")]
        return configuration
    }
}
