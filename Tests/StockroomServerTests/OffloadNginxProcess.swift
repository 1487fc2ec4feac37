import Foundation
import StockroomCore
import StockroomTestSupport
@testable import StockroomServer

#if canImport(Glibc)
    import Glibc
#endif

/// One nginx master process in the foreground, with its whole state (configuration, pid, logs,
/// temporary folders) in a temporary folder; `stop()` ends it and waits.
final class NginxProcess: Sendable {
    let folder: TemporaryFolder
    private let process: ChildProcess

    /// nginx as Debian installs it (`nginx-light`), or the first on `PATH`.
    static var executable: String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        let candidates = ["/usr/sbin/nginx"] + path.split(separator: ":").map { "\($0)/nginx" }
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// A whole `nginx.conf` around `include`, the text nginx's `http {}` block includes.
    static func mainConfiguration(including include: String, in folder: String) -> String {
        // Workers run as root here when the tests do (CI), so they read what root wrote.
        let user = getuid() == 0 ? "user root;\n" : ""
        return """
            \(user)worker_processes 1;
            daemon off;
            pid \(folder)/nginx.pid;
            error_log \(folder)/error.log info;
            events { worker_connections 128; }
            http {
                access_log \(folder)/access.log;
                client_body_temp_path \(folder)/client_body;
                proxy_temp_path \(folder)/proxy;
                fastcgi_temp_path \(folder)/fastcgi;
                uwsgi_temp_path \(folder)/uwsgi;
                scgi_temp_path \(folder)/scgi;
                include \(include);
            }

            """
    }

    /// Starts nginx on `site`'s include; `port` is where it listens.
    init(site: NginxSite, port: Int) throws {
        let folder = try TemporaryFolder()
        try folder.write("stockroom.conf", site.httpInclude)
        try folder.write("nginx.conf", Self.mainConfiguration(including: folder.path + "/stockroom.conf", in: folder.path))
        guard let executable = Self.executable else { throw NginxProcessError.notInstalled }
        let process = try ChildProcess(
            executable, ["-p", folder.path, "-c", folder.path + "/nginx.conf", "-e", folder.path + "/error.log"])
        self.folder = folder
        self.process = process
        self.port = port
    }

    /// Where nginx listens.
    let port: Int

    /// Waits (up to 10 s) until nginx answers on its port; throws if it exited or never did.
    func waitUntilServing() async throws {
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            guard process.isRunning else { throw NginxProcessError.exited(errorLog()) }
            if (try? LimitsConnectionTests.RawConnection(port: port)) != nil { return }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw NginxProcessError.exited("nginx did not listen within 10 s\n" + errorLog())
    }

    /// SIGTERM (nginx's fast shutdown, which takes its worker down too), then waits for the
    /// master to exit.
    func stop() async {
        process.terminate()
        await process.exit(within: .seconds(10))
    }

    func errorLog() -> String {
        (try? String(contentsOfFile: folder.path + "/error.log", encoding: .utf8)) ?? "(no error log)"
    }

    deinit {
        // Not SIGKILL (`ChildProcess`'s own last resort): a killed master leaves its worker behind.
        process.terminate()
        process.reap(within: .seconds(5))
    }
}

enum NginxProcessError: Error, CustomStringConvertible {
    case notInstalled
    case exited(String)

    var description: String {
        switch self {
        case .notInstalled: "nginx is not installed: .ci/install-deps installs nginx-light"
        case .exited(let log): "nginx stopped: \(log)"
        }
    }
}
