import PostgresNIO
import StockroomCore
import _ConnectionPoolModule

/// Sorts what a PostgreSQL call threw: a lost database becomes `LedgerUnavailable`, a conflict
/// worth retrying becomes `Retryable`, and anything else (the ledger's own errors, a constraint
/// the schema enforces) surfaces as it is.
enum PostgresFault {
    /// A serialisation failure, a deadlock, or a unique key a concurrent transaction took first:
    /// the whole transaction is tried again.
    struct Retryable: Error {
        let sqlState: String
        let underlying: any Error
    }

    /// SQLSTATEs of a server that is going away or cannot take a connection now: class 08
    /// (connection exception), shutdowns, too many connections, out of memory or disk.
    static let unavailableStates: Set<String> = ["57P01", "57P02", "57P03", "53000", "53100", "53200", "53300", "53400", "58000", "58030"]
    /// SQLSTATEs after which the same transaction may well succeed.
    static let retryableStates: Set<String> = ["40001", "40P01", "23505"]

    static func classify(_ error: any Error) -> any Error {
        switch error {
        case is LedgerUnavailable, is LedgerError, is Retryable, is DecodingError, is PostgresDecodingError:
            return error
        case let failed as PostgresTransactionError:
            guard let inner = failed.closureError ?? failed.commitError ?? failed.beginError else {
                return LedgerUnavailable(reason: "the transaction could not be rolled back")
            }
            return classify(inner)
        case let failed as PSQLError:
            guard failed.code == .server else { return LedgerUnavailable(reason: reason(failed.code)) }
            let state = failed.serverInfo?[.sqlState] ?? ""
            if state.hasPrefix("08") || unavailableStates.contains(state) {
                return LedgerUnavailable(reason: "the database server said \(state)")
            }
            if retryableStates.contains(state) { return Retryable(sqlState: state, underlying: error) }
            return error
        case is ConnectionPoolError, is CancellationError, is IOError, is ChannelError:
            return LedgerUnavailable(reason: "the database connection failed")
        default:
            return error
        }
    }

    /// Why the database refused to start a ledger, as one line an operator can act on: the
    /// server's own message (SQLSTATE and text) where there is one.
    static func refusal(_ error: any Error) -> StartupRefusal {
        if let failed = error as? PSQLError {
            if failed.code == .server, let info = failed.serverInfo {
                return StartupRefusal(description: "\(info[.sqlState] ?? "?"): \(info[.message] ?? "the server refused")")
            }
            return StartupRefusal(description: reason(failed.code))
        }
        if let newer = error as? PostgresSchema.NewerSchema { return StartupRefusal(description: newer.description) }
        return StartupRefusal(description: "\(classify(error))")
    }

    /// A start-up failure of the PostgreSQL ledger, described without secrets.
    struct StartupRefusal: Error, CustomStringConvertible {
        let description: String
    }

    /// A few words for a client-side failure, without the query or the address.
    private static func reason(_ code: PSQLError.Code) -> String {
        switch code {
        case .serverClosedConnection, .uncleanShutdown: "the database closed the connection"
        case .connectionError: "the database cannot be reached"
        case .poolClosed, .clientClosedConnection: "the connection pool is closed"
        case .queryCancelled: "the query was cancelled"
        case .sslUnsupported, .failedToAddSSLHandler: "the database refused TLS"
        case .authMechanismRequiresPassword, .unsupportedAuthMechanism, .saslError: "the database refused the credentials"
        default: "the database connection failed (\(code))"
        }
    }
}
