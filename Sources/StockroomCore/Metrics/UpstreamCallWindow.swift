import Foundation
import Synchronization

/// The last day of calls to the App Store, per hour, in this process: what the console's
/// dashboard charts as upstream latency and error rate.
///
/// Fed where `StockroomMetrics.upstreamCall` records the Prometheus series; bounded to
/// `hours` buckets, so it never grows. Per process: instances sharing a ledger each see their own.
public final class UpstreamCallWindow: Sendable {
    /// The process's window.
    public static let shared = UpstreamCallWindow()
    /// Buckets kept.
    public static let hours = 24

    /// One hour's calls.
    public struct Hour: Sendable, Equatable {
        /// The hour's start (UTC).
        public var start: Date
        public var calls: Int
        /// Transport errors, HTTP 429 and 5xx.
        public var errors: Int
        public var totalSeconds: Double
        public var slowestSeconds: Double

        /// Mean call duration, or nil without calls.
        public var meanSeconds: Double? { calls > 0 ? totalSeconds / Double(calls) : nil }
        /// Errors per call, or nil without calls.
        public var errorRate: Double? { calls > 0 ? Double(errors) / Double(calls) : nil }
    }

    private let buckets = Mutex<[Int64: Hour]>([:])

    public init() {}

    /// Counts one call that took `duration` and failed or not, in the hour of `now`.
    public func record(duration: Duration, failed: Bool, now: Date = Date()) {
        let index = HourlyDeliveries.hourIndex(now)
        let seconds = max(0, Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18)
        buckets.withLock { buckets in
            var hour =
                buckets[index]
                ?? Hour(
                    start: Date(timeIntervalSince1970: TimeInterval(index) * 3600), calls: 0, errors: 0, totalSeconds: 0, slowestSeconds: 0)
            hour.calls &+= 1
            if failed { hour.errors &+= 1 }
            hour.totalSeconds += seconds
            hour.slowestSeconds = max(hour.slowestSeconds, seconds)
            buckets[index] = hour
            let oldest = index - Int64(Self.hours) + 1
            buckets = buckets.filter { $0.key >= oldest }
        }
    }

    /// The hours of the last day up to `now` that saw calls, oldest first.
    public func lastDay(now: Date = Date()) -> [Hour] {
        let oldest = HourlyDeliveries.hourIndex(now) - Int64(Self.hours) + 1
        return buckets.withLock { buckets in
            buckets.filter { $0.key >= oldest }.sorted { $0.key < $1.key }.map(\.value)
        }
    }
}
