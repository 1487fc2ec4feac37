import Foundation
import Hummingbird
import StockroomCore
import StockroomEntitlement

/// The console's pages: the dashboard here, the fulfilment list and a fulfilment's page in
/// their own files. Each reads the ledger's views (`LedgerViews`) and nothing else of it.
struct ConsolePages: Sendable {
    let entitlements: Entitlements

    var ledger: any Ledger { entitlements.ledger }

    /// `/console`: the last day's deliveries and failures, upstream latency and errors, top
    /// products, bytes sent, and the ledger's rows by state.
    func dashboard(session: ConsoleSession) async throws -> ConsoleResponse {
        let now = Date()
        let current = HourlyDeliveries.hourIndex(now)
        let hours = (0..<24).map { current - 23 + Int64($0) }
        let labels = hours.map { Self.hourLabel($0) }
        let since = Date(timeIntervalSince1970: TimeInterval(hours[0]) * 3600)
        let deliveries = Dictionary(try await ledger.deliveriesPerHour(since: since).map { (HourlyDeliveries.hourIndex($0.hour), $0) }) {
            first, _ in first
        }
        let upstream = Dictionary(UpstreamCallWindow.shared.lastDay(now: now).map { (HourlyDeliveries.hourIndex($0.start), $0) }) {
            first, _ in first
        }
        let tallies = try await ledger.productTallies(limit: 8)
        let states = try await ledger.stateCounts()

        let complete = hours.map { Double(deliveries[$0]?.complete ?? 0) }
        let interrupted = hours.map { Double(deliveries[$0]?.interrupted ?? 0) }
        let bytesPerHour = hours.map { Double(deliveries[$0]?.bytes ?? 0) }
        let latency = hours.map { (upstream[$0]?.meanSeconds ?? 0) * 1000 }
        let errorRate = hours.map { (upstream[$0]?.errorRate ?? 0) * 100 }
        let calls = upstream.values.reduce(0) { $0 + $1.calls }
        let errors = upstream.values.reduce(0) { $0 + $1.errors }
        let dayBytes = deliveries.values.reduce(Int64(0)) { $0 &+ $1.bytes }

        var body = "<h1>Dashboard</h1>\n<div class=\"grid\">\n"
        body += "<section class=\"card\" id=\"deliveries\"><h2>Deliveries and failures per hour</h2>\n"
        body += ConsoleChart.bars(
            id: "deliveries-chart", title: "Download attempts per hour, last 24 hours (UTC)", labels: labels,
            series: [
                .init(name: "delivered", color: "#2f8f4e", values: complete), .init(name: "failed", color: "#c23b3b", values: interrupted),
            ],
            format: { String(format: "%.0f", $0) })
        body +=
            """
            <p class=\"muted\">\(deliveries.values.reduce(0) { $0 + $1.complete }) complete, \
            \(deliveries.values.reduce(0) { $0 + $1.interrupted }) interrupted in the last 24 hours.</p></section>\n
            """
        body += "<section class=\"card\" id=\"upstream\"><h2>Upstream latency and error rate</h2>\n"
        body += ConsoleChart.bars(
            id: "latency-chart", title: "Mean App Store call latency per hour (ms)", labels: labels,
            series: [.init(name: "mean ms", color: "#3a6ea5", values: latency)], format: { String(format: "%.0f ms", $0) }, height: 150)
        body += ConsoleChart.bars(
            id: "error-chart", title: "App Store call error rate per hour (%)", labels: labels,
            series: [.init(name: "errors %", color: "#c23b3b", values: errorRate)], format: { String(format: "%.0f%%", $0) }, height: 120)
        body +=
            """
            <p class=\"muted\">\(calls) calls, \(errors) failed (transport, 429, 5xx), in this process over the last 24 \
            hours.</p></section>\n
            """
        body += "<section class=\"card\" id=\"products\"><h2>Top products</h2>\n"
        body += ConsoleChart.horizontalBars(
            id: "products-chart", title: "Fulfilments per product",
            items: tallies.top.map { ($0.productID, Double($0.fulfilments), "\($0.fulfilments) · \(HTML.bytes($0.bytesDelivered))") },
            color: "#6b5ca5")
        body += "</section>\n<section class=\"card\" id=\"bytes\"><h2>Bytes sent</h2>\n"
        body += ConsoleChart.bars(
            id: "bytes-chart", title: "Bytes sent per hour", labels: labels,
            series: [.init(name: "bytes", color: "#d08a2e", values: bytesPerHour)],
            format: { HTML.bytes(Int64(exactly: $0.rounded()) ?? 0) }, height: 150)
        body +=
            """
            <p><strong id=\"bytes-total\">\(HTML.bytes(tallies.bytesDelivered))</strong> sent for \(tallies.fulfilments) fulfilments \
            in all;
            """
        body += " \(HTML.bytes(dayBytes)) in the last 24 hours.</p></section>\n"
        body += "<section class=\"card\" id=\"states\"><h2>Ledger rows by state</h2>\n"
        body += ConsoleChart.horizontalBars(
            id: "states-chart", title: "Fulfilments by state",
            items: FulfilmentState.allCases.map { ($0.rawValue, Double(states[$0] ?? 0), String(states[$0] ?? 0)) }, color: "#4f7f8f")
        body += "<table><tr><th>State</th><th class=\"num\">Rows</th></tr>\n"
        for state in FulfilmentState.allCases {
            body += "<tr><td><a href=\"/console/fulfilments?state=\(state.rawValue)\">\(state.rawValue)</a></td>"
            body += "<td class=\"num\" data-state=\"\(state.rawValue)\">\(states[state] ?? 0)</td></tr>\n"
        }
        body += "</table></section>\n</div>\n"
        return .page(title: "Dashboard", body: body, session: session)
    }

    static func hourLabel(_ index: Int64) -> String {
        let hour = ((index % 24) + 24) % 24
        return (hour < 10 ? "0" : "") + "\(hour):00"
    }
}
