import Foundation
import NIOCore
import NIOPosix
import StockroomCore
import Synchronization

/// A `stockroom serve` process a test started, spoken to over loopback, stopped by the test.
public final class StockroomProcess: Sendable {
    private let process: ChildProcess
    private let log: String
    public let port: Int

    private init(process: ChildProcess, log: String, port: Int) {
        self.process = process
        self.log = log
        self.port = port
    }

    /// Why a process could not be had.
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// The `stockroom` binary beside the test runner (`swift build` puts both in `.build/debug`).
    public static func binary() throws -> String {
        var folder = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
        for _ in 0..<4 {
            let candidate = folder.appendingPathComponent("stockroom").path
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            folder.deleteLastPathComponent()
        }
        throw Failure(
            description: "no stockroom binary beside the test runner: run `swift build --product stockroom` first (make test does)")
    }

    /// A TCP port nothing listens on at the moment of asking, for a child process to bind.
    ///
    /// Chosen below the kernel's ephemeral range (32768-60999), from which every outgoing
    /// connection takes its source port: a port chosen there was once taken by another test's
    /// connection before the child could bind it (`EADDRINUSE`). No port is handed out twice.
    public static func freePort() throws -> Int {
        for _ in 0..<500 {
            let candidate = Int.random(in: 20_000..<32_000)
            guard handedOut.withLock({ $0.insert(candidate).inserted }) else { continue }
            guard
                let channel = try? ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton).bind(host: "127.0.0.1", port: candidate)
                    .wait()
            else { continue }
            try? channel.close().wait()
            return candidate
        }
        throw Failure(description: "no free port between 20000 and 32000")
    }

    private static let handedOut = Mutex<Set<Int>>([])

    /// Starts `stockroom serve` on 127.0.0.1:`port` in `folder` (its working directory and log).
    /// `descriptors` sets the process's soft and hard open-file limits first (through `sh`'s
    /// `ulimit`, which `exec`s the server), as a low systemd or container limit would.
    public static func serve(
        _ binary: String, folder: String, port: Int, arguments: [String], environment: [String: String],
        descriptors: (soft: Int, hard: Int)? = nil
    ) throws -> StockroomProcess {
        let serve = ["serve", "--host", "127.0.0.1", "--port", String(port)] + arguments
        let log = folder + "/serve.log"
        let environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        let process =
            if let descriptors {
                try ChildProcess(
                    "/bin/sh",
                    ["-c", "ulimit -Sn \(descriptors.soft) && ulimit -Hn \(descriptors.hard) && exec \"$0\" \"$@\"", binary] + serve,
                    environment: environment, directory: folder, output: .file(log))
            } else {
                try ChildProcess(binary, serve, environment: environment, directory: folder, output: .file(log))
            }
        return StockroomProcess(process: process, log: log, port: port)
    }

    /// Waits (up to 60 s) until `/healthz` answers; a process that exits first fails with its log.
    public func waitUntilHealthy() async throws {
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            guard process.isRunning else {
                throw Failure(description: "stockroom serve exited: " + ((try? String(contentsOfFile: log, encoding: .utf8)) ?? ""))
            }
            if (try? await send(.get, "/healthz"))?.status == 200 { return }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw Failure(description: "stockroom serve on port \(port) was not healthy within 60 s")
    }

    /// Runs a `stockroom` command to its end; its standard output, or a failure with both streams
    /// when it exits non-zero. The streams go to files, so no thread of the test blocks on a pipe
    /// (the simulator the command talks to runs in this process).
    public static func run(_ binary: String, _ arguments: [String], environment: [String: String]) async throws -> String {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("stockroom-run-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let outputPath = folder.appendingPathComponent("stdout").path, errorPath = folder.appendingPathComponent("stderr").path
        let process = try ChildProcess(
            binary, arguments, environment: ProcessInfo.processInfo.environment.merging(environment) { $1 },
            output: .files(output: outputPath, error: errorPath))
        let status = await process.exit(within: .seconds(300)) ?? -1
        let stdout = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
        guard status == 0 else {
            let stderr = (try? String(contentsOfFile: errorPath, encoding: .utf8)) ?? ""
            throw Failure(description: "stockroom \(arguments.first ?? "") exited \(status): \(stderr) \(stdout)")
        }
        return stdout
    }

    /// One request to this instance.
    public func send(_ method: UpstreamRequest.Method, _ path: String, headers: [(String, String)] = [], body: [UInt8]? = nil) async throws
        -> UpstreamResponse
    {
        let request = UpstreamRequest(
            method: method, url: "http://127.0.0.1:\(port)\(path)", headers: headers.map { (name: $0.0, value: $0.1) }, body: body)
        return try await Self.client.send(request)
    }

    /// The process ID, for reading `/proc/<pid>/fd`.
    public var pid: Int32 { process.pid }

    /// Whether the process still runs.
    public var isRunning: Bool { process.isRunning }

    /// The exit status once it has exited (a signal's number when a signal ended it).
    public var exitStatus: Int32? { process.exitStatus }

    /// What the process has logged so far.
    public var logText: String { (try? String(contentsOfFile: log, encoding: .utf8)) ?? "" }

    /// How long until the process exits, polled without blocking a thread; nil when it still
    /// runs after `limit`.
    public func timeUntilExit(within limit: Duration) async -> Duration? {
        let start = ContinuousClock.now
        while ContinuousClock.now - start < limit {
            if !process.isRunning { return ContinuousClock.now - start }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return nil
    }

    /// SIGTERM; the process stops gracefully on its own. Not waited for here: a blocking wait
    /// would hold one of the few threads the in-process simulator (and every other test) runs on.
    public func stop() {
        process.terminate()
    }

    private static let client = CurlHTTPClient(configuration: .init(totalTimeout: .seconds(30), maximumResponseBytes: 16 << 20))
}
