import Foundation
import Logging
import StockroomCore
import StockroomSQLite
import StockroomPostgres

#if canImport(Glibc)
    import Glibc
#endif

extension Doctor {
    // MARK: The ledger

    /// The ledger can be written: an existing file takes a write transaction (rolled back); a
    /// missing one needs a writable folder. Nothing is created.
    func database() -> Finding {
        let path = configuration.databaseLocation
        guard FileManager.default.fileExists(atPath: path) else {
            let folder = Self.folder(of: path)
            guard access(folder, W_OK) == 0 else {
                return Finding(check: "database", passed: false, detail: "\(path) does not exist and \(folder) is not writable")
            }
            return Finding(check: "database", passed: true, detail: "\(path) will be created in a writable folder")
        }
        do {
            let count = try SQLiteDatabase.checkWritable(path: path)
            return Finding(check: "database", passed: true, detail: "\(path) is writable (\(count) fulfilments)")
        } catch {
            return Finding(check: "database", passed: false, detail: "\(path) cannot be written: \(error)")
        }
    }

    /// A PostgreSQL ledger answers (and has been migrated): read only, the password never shown.
    /// Its disk is the database server's, so no disk check is made here.
    func postgresDatabase() async -> Finding {
        let address: PostgresAddress
        do {
            address = try PostgresAddress(url: configuration.databaseLocation)
        } catch {
            return Finding(check: "database", passed: false, detail: "not a usable postgres:// address")
        }
        // As long as serve would wait for a connection (--database-timeout, 5 s by default).
        let pool = PostgresPool(
            address: address, poolSize: 1, checkoutTimeout: configuration.databaseTimeout, migrated: true,
            logger: Logger(label: "stockroom.doctor"))
        do {
            let counts = try await pool.running { try await PostgresLedger(database: $0).stateCounts() }
            return Finding(check: "database", passed: true, detail: "\(address) answers (\(counts.values.reduce(0, +)) fulfilments)")
        } catch let error as LedgerUnavailable {
            return Finding(check: "database", passed: false, detail: "\(address) cannot be reached: \(error.reason)")
        } catch  where String(reflecting: error).contains("42P01") {
            // undefined_table: reachable, not migrated yet; serve creates the tables at start.
            return Finding(check: "database", passed: true, detail: "\(address) answers; its tables are created when serve starts")
        } catch {
            return Finding(check: "database", passed: false, detail: "\(address) cannot be used (the server refused the query)")
        }
    }

    func diskSpace() -> Finding {
        let folder = Self.folder(of: configuration.databaseLocation)
        var status = statvfs()
        guard statvfs(folder, &status) == 0 else {
            return Finding(check: "disk space", passed: false, detail: "cannot read \(folder): errno \(errno)")
        }
        let free = Int64(clamping: UInt64(status.f_bavail).multipliedReportingOverflow(by: UInt64(status.f_frsize)).partialValue)
        let megabytes = free >> 20
        guard free >= Self.minimumFreeBytes else {
            return Finding(
                check: "disk space", passed: false,
                detail: "\(megabytes) MiB free for the ledger in \(folder); at least \(Self.minimumFreeBytes >> 20) MiB")
        }
        return Finding(check: "disk space", passed: true, detail: "\(megabytes) MiB free for the ledger in \(folder)")
    }

    static func folder(of path: String) -> String {
        let folder = (path as NSString).deletingLastPathComponent
        return folder.isEmpty ? "." : folder
    }

    // MARK: The App Store

    /// The upstream answers verifyReceipt, and its `Date` is within a minute of ours.
    func upstream() async -> [Finding] {
        let base: String
        switch configuration.upstream {
        case .simulator:
            return [
                Finding(check: "upstream", passed: true, detail: "the built-in simulator, served by this process (a test tool)"),
                Finding(check: "clock", passed: true, detail: "the simulator shares this machine's clock"),
            ]
        case .apple: base = AppStoreEndpoints.apple.production
        case .url: base = configuration.upstream.endpoints(simulatorURL: configuration.simulatorURL).production
        }
        let started = ContinuousClock.now
        let response: UpstreamResponse
        do {
            // An empty request: any verifyReceipt answers it with a status (21000), and a Date.
            response = try await transport.send(
                UpstreamRequest(
                    method: .post, url: base, headers: [("Content-Type", "application/json")], body: Array("{}".utf8), timeout: .seconds(10)
                ))
        } catch {
            return [
                Finding(
                    check: "upstream", passed: false, detail: "\(URLText.redacted(base)) cannot be reached: \(URLText.redacted("\(error)"))"
                ),
                Finding(check: "clock", passed: false, detail: "not compared: no answer from the upstream"),
            ]
        }
        let elapsed = ContinuousClock.now - started
        let milliseconds = elapsed.components.seconds * 1000 + elapsed.components.attoseconds / 1_000_000_000_000_000
        let reached =
            response.status == 200
            ? Finding(check: "upstream", passed: true, detail: "\(URLText.redacted(base)) answered in \(milliseconds) ms")
            : Finding(check: "upstream", passed: false, detail: "\(URLText.redacted(base)) answered HTTP \(response.status)")
        return [reached, clock(response.headers["date"])]
    }

    /// Our clock against the upstream's `Date` header.
    func clock(_ header: String?) -> Finding {
        guard let header, let theirs = Self.httpDate(header) else {
            return Finding(check: "clock", passed: false, detail: "the upstream sent no usable Date header")
        }
        let skew = now().timeIntervalSince(theirs)
        let detail = String(format: "%+.0f s from the upstream's clock", skew)
        guard abs(skew) <= Self.maximumClockSkew else {
            return Finding(
                check: "clock", passed: false,
                detail: "\(detail); at most \(Int(Self.maximumClockSkew)) s (tokens and JWS dates depend on it)")
        }
        return Finding(check: "clock", passed: true, detail: detail)
    }

    /// An IMF-fixdate (`Sun, 22 Nov 2026 17:35:09 GMT`), the form HTTP servers send; read by
    /// `HTTPDate`, since `DateFormatter` traps on some text a hostile upstream could send.
    static func httpDate(_ text: String) -> Date? {
        HTTPDate.parse(text.trimmingCharacters(in: .whitespaces))
    }
}
