import Metrics

extension StockroomMetrics {
    /// Why the server closed a connection before its client was done.
    public enum ConnectionCut: String, Sendable, CaseIterable {
        /// Past `--max-connections`: closed as it arrived.
        case overCapacity = "over_capacity"
        /// A request body slower than `--body-timeout` or `--body-min-rate` allow.
        case slowBody = "slow_body"
        /// A response its reader took slower than `--min-send-rate` allows.
        case slowReader = "slow_reader"
        /// Still open when `--shutdown-grace` ran out.
        case shutdown
    }

    /// `stockroom_connections_open`: client connections open now.
    public static func connectionsOpen(_ count: Int) {
        Gauge(label: "stockroom_connections_open").record(count)
    }

    /// `stockroom_connections_cut_total{reason}`: connections the server closed on a client.
    public static func connectionCut(_ reason: ConnectionCut) {
        connectionCutCounter(reason).increment()
    }

    /// Shows every series at zero from the start, so a dashboard has a line before the first cut.
    public static func registerConnectionCuts() {
        for reason in ConnectionCut.allCases { connectionCutCounter(reason).increment(by: 0) }
        connectionsOpen(0)
    }

    private static func connectionCutCounter(_ reason: ConnectionCut) -> Counter {
        Counter(label: "stockroom_connections_cut_total", dimensions: [("reason", reason.rawValue)])
    }
}
