import Foundation
import Metrics

/// Every metric Stockroom records, by the name `/metrics` exposes, in one place.
///
/// Recorded through swift-metrics, so they go wherever the process bootstrapped it (`serve`:
/// Prometheus); with nothing bootstrapped, they cost almost nothing and go nowhere. Labels take
/// a few fixed values only: no transaction, product or address ever becomes a label.
public enum StockroomMetrics {
    /// `stockroom_verifications_total{proof, outcome, environment}`: proofs decided upstream or
    /// from the ledger. `outcome`: valid, invalid, revoked, expired, unavailable, recorded (a
    /// proof on record served without a new call).
    public static func verification(proof: String, outcome: String, environment: StoreEnvironment?) {
        Counter(
            label: "stockroom_verifications_total",
            dimensions: [("proof", proof), ("outcome", outcome), ("environment", environment?.rawValue.lowercased() ?? "unknown")]
        ).increment()
    }

    /// `stockroom_upstream_request_duration_seconds{endpoint, outcome}` (a histogram) and, when it
    /// failed, `stockroom_upstream_errors_total{endpoint, kind}`: each call to Apple (or the simulator).
    /// The console's dashboard reads the same calls from `UpstreamCallWindow.shared`.
    public static func upstreamCall(endpoint: String, status: Int?, duration: Duration) {
        let outcome = status.map { "\($0 / 100)xx" } ?? "error"
        Timer(label: "stockroom_upstream_request_duration_seconds", dimensions: [("endpoint", endpoint), ("outcome", outcome)])
            .recordNanoseconds(duration.nanoseconds)
        let kind: String? =
            switch status {
            case nil: "transport"
            case 429: "rate_limited"
            case .some(500...599): "server"
            default: nil
            }
        if let kind { Counter(label: "stockroom_upstream_errors_total", dimensions: [("endpoint", endpoint), ("kind", kind)]).increment() }
        UpstreamCallWindow.shared.record(duration: duration, failed: kind != nil)
    }

    /// `stockroom_bytes_streamed_total`: content bytes handed to clients (or sent by nginx for us).
    public static func bytesStreamed(_ count: Int64) {
        guard count > 0 else { return }
        Counter(label: "stockroom_bytes_streamed_total").increment(by: count)
    }

    /// `stockroom_object_store_errors_total{operation, kind}`: object-store calls that failed
    /// (`operation`: head, read, hash, catalog, presign; `kind`: missing, denied, changed,
    /// unavailable, bad_answer). The log line beside it names the key.
    public static func objectStoreError(operation: String, _ error: ObjectStoreError) {
        let kind =
            switch error {
            case .missing, .noBucket: "missing"
            case .denied: "denied"
            case .changed, .exists: "changed"
            case .unavailable: "unavailable"
            case .badAnswer: "bad_answer"
            }
        Counter(label: "stockroom_object_store_errors_total", dimensions: [("operation", operation), ("kind", kind)]).increment()
    }

    /// `stockroom_digest_cache_write_failures_total`: digest-cache writes that failed (the next
    /// start hashes, for a bucket downloads, the content again). The log line names the file.
    public static func digestCacheWriteFailed() {
        Counter(label: "stockroom_digest_cache_write_failures_total").increment()
    }

    /// `stockroom_downloads_in_flight`: content responses being written now.
    public static func downloadsInFlight(_ count: Int) {
        Gauge(label: "stockroom_downloads_in_flight").record(count)
    }

    /// `stockroom_ledger_rows{state}`: fulfilments per state, refreshed on each scrape.
    public static func ledgerRows(_ counts: [FulfilmentState: Int]) {
        for state in FulfilmentState.allCases {
            Gauge(label: "stockroom_ledger_rows", dimensions: [("state", state.rawValue)]).record(counts[state] ?? 0)
        }
    }
}

extension Duration {
    /// Whole nanoseconds, saturating: a duration is never outside data, but never traps either.
    var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        let (scaled, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        guard !overflow else { return seconds < 0 ? .min : .max }
        return scaled.addingReportingOverflow(attoseconds / 1_000_000_000).partialValue
    }
}
