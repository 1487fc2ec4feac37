import AppStoreSimulator
import Foundation
import Hummingbird
import HummingbirdTesting
import StockroomCore
import StockroomSQLite
import StockroomPostgres
import StockroomPostgresTestSupport
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
            #expect(
                findings.map(\.check) == [
                    "catalogue", "trust root \(rootFile)", "Server API key", "shared secret", "database", "disk space", "upstream", "clock",
                ])
            #expect(findings[0].detail.hasPrefix("2 products"))
            #expect(!FileManager.default.fileExists(atPath: server.configuration.databaseLocation))
            #expect(!FileManager.default.fileExists(atPath: server.configuration.digestCachePath))
        }
    }

    @Test func anExistingLedgerIsCheckedForWritesAndLeftAsItWas() async throws {
        try await Self.withUpstream { server, rootFile in
            let database = try SQLiteDatabase(path: server.configuration.databaseLocation)
            try await database.writer.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)") }
            let before = try Data(contentsOf: URL(fileURLWithPath: server.configuration.databaseLocation))
            let findings = await Doctor(configuration: server.configuration, trustRootFiles: [rootFile]).run()
            #expect(findings.first { $0.check == "database" }?.detail.hasSuffix("is writable (0 fulfilments)") == true)
            #expect(try Data(contentsOf: URL(fileURLWithPath: server.configuration.databaseLocation)) == before)
        }
    }

    @Test func eachBrokenPartFailsItsOwnLine() async throws {
        try await Self.withUpstream { server, rootFile in
            var configuration = server.configuration
            configuration.databaseLocation = server.root.path + "/missing/folder/stockroom.sqlite"
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
                #"""
                {"products": [{"productId": "com.example.monthly", "title": "Monthly", "type": "auto-renewable", "file": \#
                "books/book.epub"}]}
                """#
            )
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
            let ahead = await Doctor(
                configuration: server.configuration, trustRootFiles: [rootFile], now: { Date().addingTimeInterval(120) }
            ).run()
            #expect(Self.failed(ahead) == ["clock"])
            #expect(ahead.last?.detail.hasPrefix("+12") == true)
            let behind = await Doctor(
                configuration: server.configuration, trustRootFiles: [rootFile], now: { Date().addingTimeInterval(-30) }
            ).run()
            #expect(Self.failed(behind) == [])
        }
        let doctor = Doctor(configuration: ServerConfiguration(), trustRootFiles: [], now: { Date(timeIntervalSince1970: 1_795_000_000) })
        #expect(!doctor.clock(nil).passed)
        #expect(!doctor.clock("yesterday").passed)
        #expect(Doctor.httpDate("Sun, 22 Nov 2026 17:35:09 GMT") == Date(timeIntervalSince1970: 1_795_368_909))
        // DateFormatter trapped on this (bytes past ASCII): a hostile upstream stopped the command.
        #expect(!doctor.clock("Fri, 13\u{5bb}\u{29a}9 23:59:59 GMT").passed)
    }
}

/// `stockroom doctor --database postgres://…` against the throwaway cluster of `.ci/postgres`: an
/// empty database passes (serve creates the tables), a migrated one passes with its counts, an
/// address nothing answers at fails within the pool's timeout, and no password is ever printed.
@Suite struct DoctorPostgresTests {
    static let password = "doctor-secret-\(UUID().uuidString.prefix(8))"

    /// The address with a password (the cluster trusts loopback, so any password is accepted).
    static func withPassword(_ address: PostgresAddress) -> String {
        var address = address
        address.password = password
        return address.url
    }

    /// A loaded test machine is slow, not a lost database: reachable cases wait as the server
    /// fixture's do; the unreachable case passes a short timeout of its own.
    static func run(_ server: ServerFixture, rootFile: String, database: String, timeout: Duration = .seconds(30)) async -> [Doctor.Finding]
    {
        var configuration = server.configuration
        configuration.databaseLocation = database
        configuration.databaseTimeout = timeout
        let findings = await Doctor(configuration: configuration, trustRootFiles: [rootFile]).run()
        for finding in findings { #expect(!finding.description.contains(password), "\(finding.check) prints the password") }
        return findings
    }

    @Test func anUnmigratedDatabasePassesAndIsLeftEmpty() async throws {
        try await DoctorTests.withUpstream { server, rootFile in
            try await ScratchPostgres.withDatabase { address in
                let findings = await Self.run(server, rootFile: rootFile, database: Self.withPassword(address))
                #expect(DoctorTests.failed(findings) == [], "\(findings)")
                #expect(!findings.map(\.check).contains("disk space"), "the database's disk is the database server's")
                let database = try #require(findings.first { $0.check == "database" })
                #expect(database.detail.hasSuffix("answers; its tables are created when serve starts"), "\(database.detail)")
                #expect(database.detail.contains("127.0.0.1"))
            }
        }
    }

    @Test func aMigratedDatabasePassesWithItsCounts() async throws {
        try await DoctorTests.withUpstream { server, rootFile in
            try await ScratchPostgres.withLedger { ledger in
                for id in ["d1", "d2"] {
                    _ = try await ledger.recordProof(ConsoleInsightsTests.proof(id), terms: ConsoleInsightsTests.download, now: Date())
                }
                let findings = await Self.run(server, rootFile: rootFile, database: Self.withPassword(ledger.database.address))
                #expect(DoctorTests.failed(findings) == [], "\(findings)")
                #expect(findings.first { $0.check == "database" }?.detail.hasSuffix("answers (2 fulfilments)") == true, "\(findings)")
            }
        }
    }

    @Test(arguments: ["127.0.0.1:1", "192.0.2.1:5432"])
    func anAddressNothingAnswersAtFailsWithinItsTimeout(host: String) async throws {
        try await DoctorTests.withUpstream { server, rootFile in
            let address = "postgres://stockroom:\(Self.password)@\(host)/stockroom?sslmode=disable"
            let findings = await Self.run(server, rootFile: rootFile, database: address, timeout: .seconds(2))
            #expect(DoctorTests.failed(findings) == ["database"], "\(findings)")
            #expect(findings.first { $0.check == "database" }?.detail.contains("cannot be reached") == true, "\(findings)")
            var configuration = server.configuration
            configuration.databaseLocation = address
            configuration.databaseTimeout = .seconds(2)
            let started = ContinuousClock.now
            let database = await Doctor(configuration: configuration, trustRootFiles: [rootFile]).postgresDatabase()
            #expect(!database.passed)
            #expect(ContinuousClock.now - started < .seconds(10), "the 2 s database timeout bounds the wait")
        }
    }
}
