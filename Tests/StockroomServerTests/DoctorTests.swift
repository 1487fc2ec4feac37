import AppStoreSimulator
import Foundation
import Hummingbird
import HummingbirdTesting
import StockroomCore
import StockroomTestSupport
import Testing
@testable import StockroomServer

/// `stockroom doctor` against a live simulator as the upstream: every check passes on a good
/// deployment, each broken part fails its own line, and nothing on disk changes.
@Suite struct DoctorTests {
    /// A live simulator, a server fixture pointing at it, and its root as a PEM file.
    static func withUpstream(_ body: @Sendable @escaping (ServerFixture, String) async throws -> Void) async throws {
        var simulator = SimulatorConfiguration()
        simulator.port = 0
        try await buildSimulatorApplication(configuration: simulator).test(.live) { client in
            let control = SimulatorControl(client)
            var server = try ServerFixture()
            server.configuration.upstream = .url(control.baseURL)
            let pem = try await client.execute(uri: "/sim/root.pem", method: .get)
            let rootFile = try server.root.write("sim-root.pem", String(buffer: pem.body))
            try await body(server, rootFile)
        }
    }

    static func failed(_ findings: [Doctor.Finding]) -> [String] { findings.filter { !$0.passed }.map(\.check) }

    @Test func aGoodDeploymentPassesEveryCheckAndCreatesNothing() async throws {
        try await Self.withUpstream { server, rootFile in
            let findings = await Doctor(configuration: server.configuration, trustRootFiles: [rootFile]).run()
            #expect(Self.failed(findings) == [], "\(findings)")
            #expect(findings.map(\.check) == [
                "catalogue", "trust root \(rootFile)", "Server API key", "shared secret", "database", "disk space", "upstream", "clock",
            ])
            #expect(findings[0].detail.hasPrefix("2 products"))
            #expect(!FileManager.default.fileExists(atPath: server.configuration.databasePath))
            #expect(!FileManager.default.fileExists(atPath: server.configuration.digestCachePath))
        }
    }

    @Test func anExistingLedgerIsCheckedForWritesAndLeftAsItWas() async throws {
        try await Self.withUpstream { server, rootFile in
            let database = try AppDatabase(path: server.configuration.databasePath)
            try await database.writer.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)") }
            let before = try Data(contentsOf: URL(fileURLWithPath: server.configuration.databasePath))
            let findings = await Doctor(configuration: server.configuration, trustRootFiles: [rootFile]).run()
            #expect(findings.first { $0.check == "database" }?.detail.hasSuffix("is writable (0 fulfilments)") == true)
            #expect(try Data(contentsOf: URL(fileURLWithPath: server.configuration.databasePath)) == before)
        }
    }

    @Test func eachBrokenPartFailsItsOwnLine() async throws {
        try await Self.withUpstream { server, rootFile in
            var configuration = server.configuration
            configuration.databasePath = server.root.path + "/missing/folder/stockroom.sqlite"
            configuration.appStoreKeyPath = try server.root.write("key.p8", "not a key")
            configuration.appStoreKeyID = "KEY"
            configuration.appStoreIssuerID = "ISSUER"
            let findings = await Doctor(configuration: configuration, trustRootFiles: [rootFile, server.root.path + "/none.pem"]).run()
            #expect(Self.failed(findings) == ["trust root \(server.root.path)/none.pem", "Server API key", "database", "disk space"])

            configuration = server.configuration
            configuration.upstream = .url(ServerFixture.unreachableUpstream)
            let unreachable = await Doctor(configuration: configuration, trustRootFiles: [rootFile]).run()
            #expect(Self.failed(unreachable) == ["upstream", "clock"])

            configuration = server.configuration
            configuration.upstream = .url("http://127.0.0.1:1/x")
            #expect(Self.failed(await Doctor(configuration: configuration, trustRootFiles: []).run()).contains("trust roots"))
        }
    }

    @Test func aCatalogueSellingSubscriptionsNeedsTheSharedSecret() async throws {
        try await Self.withUpstream { server, rootFile in
            try server.root.write(
                "catalog/products.json",
                #"{"products": [{"productId": "com.example.monthly", "title": "Monthly", "type": "auto-renewable", "file": "books/book.epub"}]}"#)
            var configuration = server.configuration
            #expect(Self.failed(await Doctor(configuration: configuration, trustRootFiles: [rootFile]).run()) == ["shared secret"])
            configuration.sharedSecret = "0123456789abcdef0123456789abcdef"
            #expect(Self.failed(await Doctor(configuration: configuration, trustRootFiles: [rootFile]).run()) == [])
            try server.root.write("catalog/products.json", "{")
            #expect(Self.failed(await Doctor(configuration: configuration, trustRootFiles: [rootFile]).run()) == ["catalogue"])
        }
    }

    @Test func aClockMoreThanAMinuteFromTheUpstreamsFails() async throws {
        try await Self.withUpstream { server, rootFile in
            let ahead = await Doctor(configuration: server.configuration, trustRootFiles: [rootFile], now: { Date().addingTimeInterval(120) }).run()
            #expect(Self.failed(ahead) == ["clock"])
            #expect(ahead.last?.detail.hasPrefix("+12") == true)
            let behind = await Doctor(configuration: server.configuration, trustRootFiles: [rootFile], now: { Date().addingTimeInterval(-30) }).run()
            #expect(Self.failed(behind) == [])
        }
        let doctor = Doctor(configuration: ServerConfiguration(), trustRootFiles: [], now: { Date(timeIntervalSince1970: 1_795_000_000) })
        #expect(!doctor.clock(nil).passed)
        #expect(!doctor.clock("yesterday").passed)
        #expect(Doctor.httpDate("Sun, 22 Nov 2026 17:35:09 GMT") == Date(timeIntervalSince1970: 1_795_368_909))
    }
}
