import Foundation
import StockroomCore
import StockroomTestSupport
import Testing
@testable import StockroomServer

#if canImport(Glibc)
import Glibc
#endif

/// Issue 17 case 1 and the shutdown point against `stockroom serve` as a process, where the
/// descriptor limit and SIGTERM are real: a flood of idle connections under a low limit leaves
/// it answering, and a stalled stream does not hold its stop past `--shutdown-grace`.
@Suite(.serialized) struct PressureProcessTests {
    /// A folder with the sample catalogue's shape: a small book and a 128 MiB sparse file.
    static func folder() throws -> String {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("stockroom-pressure-\(UUID().uuidString)").path
        for sub in ["catalog", "content"] { try FileManager.default.createDirectory(atPath: root + "/" + sub, withIntermediateDirectories: true) }
        _ = FileManager.default.createFile(atPath: root + "/content/book.epub", contents: Data(ServerFixture.book))
        _ = FileManager.default.createFile(atPath: root + "/content/huge.bin", contents: nil)
        let handle = try #require(FileHandle(forWritingAtPath: root + "/content/huge.bin"))
        try handle.truncate(atOffset: 128 << 20)
        try handle.close()
        let catalog = ServerFixture.catalog([
            ServerFixture.entry(DownloadFixture.book, file: "book.epub"), ServerFixture.entry(AttackLimitTests.huge, file: "huge.bin"),
        ])
        _ = FileManager.default.createFile(atPath: root + "/catalog/products.json", contents: Data(catalog.utf8))
        return root
    }

    static func serve(_ folder: String, _ extra: [String] = [], descriptors: (soft: Int, hard: Int)? = nil) async throws -> StockroomProcess {
        let port = try FreePort.make(SOCK_STREAM)
        let server = try StockroomProcess.serve(
            try StockroomProcess.binary(), folder: folder, port: port,
            arguments: [
                "--upstream", "simulator", "--catalog", folder + "/catalog", "--content", folder + "/content", "--database", folder + "/ledger.sqlite",
                "--bundle-id", "com.example.stockroom.demo", "--upstream-rate", "off",
            ] + extra,
            environment: ["STOCKROOM_TOKEN_SECRET": ServerFixture.tokenSecret], descriptors: descriptors)
        try await server.waitUntilHealthy()
        return server
    }

    /// A purchase from the built-in simulator, downloaded whole over a fresh connection: the status.
    static func buy(_ server: StockroomProcess, product: String = DownloadFixture.book) async throws -> (status: Int, purchase: [String: Any]) {
        let minted = try await server.send(.post, "/simulator/sim/purchases", headers: [("Content-Type", "application/json")], body: Array(#"{"productId":"\#(product)"}"#.utf8))
        let purchase = try #require(try JSONSerialization.jsonObject(with: Data(minted.body)) as? [String: Any])
        let jws = try #require(purchase["signedTransaction"] as? String)
        guard product == DownloadFixture.book else { return (minted.status, purchase) }
        let body = try JSONSerialization.data(withJSONObject: ["productId": product, "signedTransaction": jws])
        let response = try await server.send(.post, "/v1/downloads", headers: [("Content-Type", "application/json")], body: Array(body))
        if response.status == 200 { #expect(response.body == ServerFixture.book) }
        return (response.status, purchase)
    }

    static func openDescriptors(_ pid: Int32) -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count) ?? -1
    }

    @Test func aFloodOfIdleConnectionsUnderALowDescriptorLimitLeavesTheServerAnswering() async throws {
        _ = DescriptorLimit.raise()  // this test process holds the flood's 600 sockets
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let server = try await Self.serve(folder, descriptors: (soft: 256, hard: 300))
        defer { server.stop() }
        #expect(server.logText.contains("descriptorsAtStart=256"), "the soft limit it was given")
        #expect(server.logText.contains("descriptors=300 "), "raised to the hard limit at start")
        #expect(server.logText.contains("maxConnections=118"), "capped below the limit")
        var flood: [LimitsConnectionTests.RawConnection] = []
        for _ in 0..<600 { flood.append(try LimitsConnectionTests.RawConnection(port: server.port)) }
        try await Task.sleep(for: .seconds(2))
        #expect(server.isRunning, "libdispatch did not abort on EMFILE")
        #expect(Self.openDescriptors(server.pid) <= 300)
        for _ in 0..<3 {
            #expect(try await Self.buy(server).status == 200, "a buyer is served while the flood holds its connections")
        }
        #expect(Self.openDescriptors(server.pid) < 250, "room is left for files, the ledger and upstream calls")
        let metrics = String(decoding: try await server.send(.get, "/metrics").body, as: UTF8.self)
        #expect(metrics.contains("stockroom_connections_cut_total{reason=\"over_capacity\"}"))
        flood.removeAll()
        #expect(try await Self.buy(server).status == 200)
        #expect(server.isRunning)
    }

    @Test func sigtermWithAStalledStreamExitsWithinTheShutdownGrace() async throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let server = try await Self.serve(folder, ["--shutdown-grace", "2s", "--min-send-rate", "0"])
        defer { server.stop() }
        let (status, purchase) = try await Self.buy(server, product: AttackLimitTests.huge)
        #expect(status == 201)
        let jws = try #require(purchase["signedTransaction"] as? String)
        // A client that asks for 128 MiB and reads only the head.
        let stalled = try LimitsConnectionTests.RawConnection(port: server.port, receiveBuffer: 4096)
        let body = #"{"productId":"\#(AttackLimitTests.huge)","signedTransaction":"\#(jws)"}"#
        stalled.send("POST /v1/downloads HTTP/1.1\r\nHost: s\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)")
        let head = await stalled.receive().map { String(decoding: $0.prefix(200), as: UTF8.self) }
        #expect(head?.hasPrefix("HTTP/1.1 200") == true, "\(head ?? "closed")")
        kill(server.pid, SIGTERM)
        let exit = await server.timeUntilExit(within: .seconds(30))
        #expect(exit != nil, "the stop was not held by the stalled stream")
        #expect((exit ?? .seconds(99)) < .seconds(6), "2 s of grace, then the stream is closed: \(exit.map { "\($0)" } ?? "still running")")
        #expect(server.exitStatus == 0, "\(server.logText)")
        withExtendedLifetime(stalled) {}
    }
}
