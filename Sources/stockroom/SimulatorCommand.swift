import AppStoreSimulator
import ArgumentParser
import Foundation
import Hummingbird
import Logging

/// `stockroom simulator`: the local App Store, for offline development and demos.
struct SimulatorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "simulator",
        abstract: "Run the local App Store simulator: verifyReceipt (production and sandbox) and its control API.",
        discussion: """
            It answers POST /verifyReceipt and /sandbox/verifyReceipt in Apple's format, and mints
            purchases, refunds them and injects faults through /sim (the README lists it). State lives in
            memory; receipts are signed with a key made at start, so they verify only against the
            simulator run that issued them. Options read STOCKROOM_SIMULATOR_<OPTION>, apart from
            serve's STOCKROOM_<OPTION>.
            """)

    @Option(help: "Address to listen on (STOCKROOM_SIMULATOR_HOST; default 127.0.0.1).")
    var host: String?

    @Option(help: "Port to listen on (STOCKROOM_SIMULATOR_PORT; default 9090).")
    var port: Int?

    @Option(help: "The bundle ID purchases carry by default (STOCKROOM_SIMULATOR_BUNDLE_ID).")
    var bundleId: String?

    @Option(help: "Answer 21004 unless verifyReceipt's password is this (STOCKROOM_SIMULATOR_SHARED_SECRET).")
    var sharedSecret: String?

    @Option(help: "Where refunds post their App Store Server Notification V2 (STOCKROOM_SIMULATOR_NOTIFICATION_URL).")
    var notificationUrl: String?

    @Option(help: "Milliseconds added before every upstream answer, to imitate Apple (STOCKROOM_SIMULATOR_LATENCY_MS; default 0).")
    var latencyMs: Int?

    func run() async throws {
        let environment = ProcessInfo.processInfo.environment
        func value(_ flag: String?, _ name: String) -> String? { flag ?? environment["STOCKROOM_SIMULATOR_\(name)"] }
        var configuration = SimulatorConfiguration()
        if let host = value(host, "HOST") { configuration.host = host }
        if let text = value(port.map(String.init), "PORT") { configuration.port = try parsePort(text) }
        if let bundleID = value(bundleId, "BUNDLE_ID") { configuration.bundleID = bundleID }
        configuration.sharedSecret = value(sharedSecret, "SHARED_SECRET")
        configuration.notificationURL = value(notificationUrl, "NOTIFICATION_URL")
        if let text = value(latencyMs.map(String.init), "LATENCY_MS") {
            guard let latency = Int(text), latency >= 0 else {
                throw ValidationError("latency must be a number of milliseconds, not \"\(text)\"")
            }
            configuration.latency = .milliseconds(latency)
        }
        LoggingSystem.bootstrap(StreamLogHandler.standardError)
        do {
            try await buildSimulatorApplication(configuration: configuration).runService()
        } catch {
            fail("could not run the simulator on \(configuration.host):\(configuration.port): \(error)")
        }
    }
}
