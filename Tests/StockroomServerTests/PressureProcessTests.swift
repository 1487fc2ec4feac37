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
/// it answering, a stalled stream does not hold its stop past `--shutdown-grace`, and a server
/// with nothing to do does nothing.
@Suite(.serialized) struct PressureProcessTests {
    /// A folder with the sample catalogue's shape: a small book and a 128 MiB sparse file.
    static func folder() throws -> String {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("stockroom-pressure-\(UUID().uuidString)").path
        for sub in ["catalog", "content"] {
            try FileManager.default.createDirectory(atPath: root + "/" + sub, withIntermediateDirectories: true)
        }
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

    static func serve(_ folder: String, _ extra: [String] = [], descriptors: (soft: Int, hard: Int)? = nil) async throws -> StockroomProcess
    {
        let port = try FreePort.make(SOCK_STREAM)
        let server = try StockroomProcess.serve(
            try StockroomProcess.binary(), folder: folder, port: port,
            arguments: [
                "--upstream", "simulator", "--catalog", folder + "/catalog", "--content", folder + "/content", "--database",
                folder + "/ledger.sqlite",
                "--bundle-id", "com.example.stockroom.demo", "--upstream-rate", "off",
            ] + extra,
            environment: ["STOCKROOM_TOKEN_SECRET": ServerFixture.tokenSecret], descriptors: descriptors)
        do {
            try await server.waitUntilHealthy()
        } catch {
            server.stop()  // else a server too slow to start on a loaded machine outlives the test run
            throw error
        }
        return server
    }

    /// A purchase from the built-in simulator, downloaded whole over a fresh connection: the status.
    static func buy(_ server: StockroomProcess, product: String = DownloadFixture.book) async throws -> (
        status: Int, purchase: [String: Any]
    ) {
        let minted = try await server.send(
            .post, "/simulator/sim/purchases", headers: [("Content-Type", "application/json")],
            body: Array(#"{"productId":"\#(product)"}"#.utf8))
        let purchase = try #require(try JSONSerialization.jsonObject(with: Data(minted.body)) as? [String: Any])
        let jws = try #require(purchase["signedTransaction"] as? String)
        guard product == DownloadFixture.book else { return (minted.status, purchase) }
        let body = try JSONSerialization.data(withJSONObject: ["productId": product, "signedTransaction": jws])
        let response = try await server.send(.post, "/v1/downloads", headers: [("Content-Type", "application/json")], body: Array(body))
        if response.status == 200 { #expect(response.body == ServerFixture.book) }
        return (response.status, purchase)
    }

    /// `count` connections to `port`, opened on a dispatch thread: a `connect` that waits for a
    /// busy server's backlog would otherwise hold one of the few threads every test's tasks share.
    static func connections(_ count: Int, to port: Int) async throws -> [LimitsConnectionTests.RawConnection] {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(with: Result { try (0..<count).map { _ in try LimitsConnectionTests.RawConnection(port: port) } })
            }
        }
    }

    /// The flood comes from a child process: 600 sockets opened and closed in this test process
    /// would race Foundation's `Process.run` in other tests, which reads this process's
    /// descriptors while it launches a child.
    final class Flood: Sendable {
        private let process: ChildProcess
        private let ready: String

        private init(process: ChildProcess, ready: String) {
            self.process = process
            self.ready = ready
        }

        static func open(_ count: Int, to port: Int) async throws -> Flood {
            let ready = FileManager.default.temporaryDirectory.appendingPathComponent("flood-\(UUID().uuidString)").path
            let process = try ChildProcess(
                "/usr/bin/env",
                [
                    "python3", "-c",
                    "import resource, socket, sys, time\n"
                        + "soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)\n"
                        + "resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4096)), hard))\n"
                        + "held = [socket.create_connection(('127.0.0.1', int(sys.argv[1]))) for _ in range(int(sys.argv[2]))]\n"
                        + "open(sys.argv[3], 'w').write(str(len(held)))\n"
                        + "time.sleep(120)\n",
                    String(port), String(count), ready,
                ])
            return Flood(process: process, ready: ready)
        }

        /// How many connections the flood holds, once it has opened them all (0 if it failed).
        func opened() async -> Int {
            let deadline = ContinuousClock.now + .seconds(60)
            while ContinuousClock.now < deadline {
                if let text = try? String(contentsOfFile: ready, encoding: .utf8), let count = Int(text) { return count }
                if !process.isRunning { return 0 }
                try? await Task.sleep(for: .milliseconds(100))
            }
            return 0
        }

        func stop() {
            process.terminate()
            try? FileManager.default.removeItem(atPath: ready)
        }

        func timeUntilExit() async -> Bool {
            for _ in 0..<100 where process.isRunning { try? await Task.sleep(for: .milliseconds(50)) }
            return !process.isRunning
        }
    }

    static func openDescriptors(_ pid: Int32) -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count) ?? -1
    }

    /// CPU time (user and system) `pid` has used so far, from `/proc/<pid>/stat`.
    static func cpuTime(_ pid: Int32) throws -> Duration {
        let stat = try String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)
        // Fields after the command name (which may hold spaces, so split after its ")").
        let fields = stat[stat.index(after: try #require(stat.lastIndex(of: ")")))...].split(separator: " ")
        let ticks = try #require(Int(fields[11])) + (try #require(Int(fields[12])))
        return .milliseconds(ticks * 1000 / sysconf(Int32(_SC_CLK_TCK)))
    }

    @Test func anIdleServerUsesNoCPUAfterItsQueuesFallQuiet() async throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        // The built-in simulator gives the server Server API credentials, so the sender that
        // makes Finish Transaction calls runs; a download queues one.
        let server = try await Self.serve(folder)
        defer { server.stop() }
        #expect(try await Self.buy(server).status == 200)
        // Past the sender's quiet interval (2 s) more than once: it used to spin from its first.
        try await Task.sleep(for: .seconds(5))
        let before = try Self.cpuTime(server.pid)
        try await Task.sleep(for: .seconds(3))
        let used = try Self.cpuTime(server.pid) - before
        #expect(used < .milliseconds(300), "an idle server used \(used) of CPU in 3 s")
        #expect(server.isRunning)
    }

    @Test func aFloodOfIdleConnectionsUnderALowDescriptorLimitLeavesTheServerAnswering() async throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let server = try await Self.serve(folder, descriptors: (soft: 256, hard: 300))
        defer { server.stop() }
        #expect(server.logText.contains("descriptorsAtStart=256"), "the soft limit it was given")
        #expect(server.logText.contains("descriptors=300 "), "raised to the hard limit at start")
        #expect(server.logText.contains("maxConnections=118"), "capped below the limit")
        let flood = try await Flood.open(600, to: server.port)
        defer { flood.stop() }
        #expect(await flood.opened() == 600)
        try await Task.sleep(for: .seconds(2))
        #expect(server.isRunning, "libdispatch did not abort on EMFILE")
        #expect(Self.openDescriptors(server.pid) <= 300)
        for _ in 0..<3 {
            #expect(try await Self.buy(server).status == 200, "a buyer is served while the flood holds its connections")
        }
        #expect(Self.openDescriptors(server.pid) < 250, "room is left for files, the ledger and upstream calls")
        let metrics = String(decoding: try await server.send(.get, "/metrics").body, as: UTF8.self)
        #expect(metrics.contains("stockroom_connections_cut_total{reason=\"over_capacity\"}"))
        flood.stop()
        _ = await flood.timeUntilExit()
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
        stalled.send(
            "POST /v1/downloads HTTP/1.1\r\nHost: s\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)")
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
