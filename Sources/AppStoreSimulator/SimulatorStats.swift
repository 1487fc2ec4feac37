import StockroomCore

/// Upstream calls received, per endpoint and environment (`GET /sim/stats`).
struct SimulatorStats: Encodable, Sendable {
    private(set) var total = 0
    private(set) var endpoints: [String: [String: Int]] = [:]

    mutating func record(_ endpoint: String, environment: StoreEnvironment) {
        total += 1
        endpoints[endpoint, default: [:]][environment.rawValue, default: 0] += 1
    }
}
