import Foundation
import Hummingbird
import HummingbirdTesting
import StockroomCore
import GRDB
@testable import StockroomSQLite
import StockroomTestSupport
import Synchronization
import Testing
@testable import StockroomServer

/// `stockroom ledger backup`: a consistent copy of a live SQLite ledger, taken while a server
/// records downloads, that `ledger check` passes and a server serves from.
@Suite struct LedgerBackupTests {
    @Test func aBackupTakenWhileDownloadsAreRecordedChecksAndServes() async throws {
        try await DownloadFixture.run { fixture in
            let folder = try TemporaryFolder()
            let before = try await fixture.control.purchase(DownloadFixture.book)
            #expect(try await fixture.post(before).status == .ok)

            // Buyers download without pause while the backups are taken.
            let recorded = Counter()
            let buyers = Task {
                while !Task.isCancelled {
                    do {
                        let purchase = try await fixture.control.purchase(DownloadFixture.book)
                        if try await fixture.post(purchase).status == .ok { recorded.add() }
                    } catch {
                        if Task.isCancelled { break }  // the end of the test, mid-request
                        throw error
                    }
                }
            }
            while recorded.value == 0 { try await Task.sleep(for: .milliseconds(20)) }
            let atFirstBackup = recorded.value
            let binary = try StockroomProcess.binary()
            var reports: [String] = []
            for round in 0..<3 {
                let path = folder.path + "/ledger-\(round).sqlite"
                if round % 2 == 0 {
                    _ = try await SQLiteDatabase.backup(path: fixture.databaseLocation, to: path)
                } else {
                    reports.append(
                        try await StockroomProcess.run(
                            binary, ["ledger", "backup", "--database", fixture.databaseLocation, path], environment: [:]))
                }
            }
            // At least one more download recorded before the last backup ended.
            while recorded.value == atFirstBackup { try await Task.sleep(for: .milliseconds(20)) }
            let path = folder.path + "/ledger-3.sqlite"
            reports.append(
                try await StockroomProcess.run(
                    binary, ["ledger", "backup", "--database", fixture.databaseLocation, path], environment: [:]))
            buyers.cancel()
            try await buyers.value
            #expect(reports.allSatisfy { $0.hasPrefix("backed up ") && $0.contains(" fulfilments, ") }, "\(reports)")

            for round in 0..<4 {
                let path = folder.path + "/ledger-\(round).sqlite"
                let mode = try #require(try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber)
                #expect(mode.intValue & 0o777 == 0o600, "it holds buyers' proofs")
                #expect(!FileManager.default.fileExists(atPath: path + "-wal"), "one self-contained file")
                let check = try await StockroomProcess.run(binary, ["ledger", "check", "--database", path], environment: [:])
                #expect(check.hasPrefix("ok: "), "\(check)")
            }
            #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted() == (0..<4).map { "ledger-\($0).sqlite" })

            // A server on the last copy knows the purchase delivered before: the same POST is
            // answered from the copy's record, with no new upstream verification.
            var restored = try ServerFixture()
            let trust = try await fixture.control.trust(bundleID: "com.example.stockroom.demo")
            restored.configuration.databaseLocation = folder.path + "/ledger-3.sqlite"
            restored.configuration.upstream = .url(fixture.control.baseURL)
            restored.configuration.trustedRoots = [trust.root]
            restored.configuration.serverAPICredentials = trust.credentials
            let upstreamCalls = try await fixture.control.calls().total
            try await restored.application().test(.live) { client in
                let body = try JSONSerialization.data(withJSONObject: [
                    "productId": DownloadFixture.book, "receiptData": before.receiptData, "transactionId": before.transactionId,
                ])
                let response = try await client.execute(uri: "/v1/downloads", method: .post, body: ByteBuffer(bytes: body))
                #expect(response.status == .ok)
                #expect(Array(buffer: response.body) == ServerFixture.book)
            }
            #expect(try await fixture.control.calls().total == upstreamCalls, "served from the copy's record")
        }
    }

    /// The binary is upgraded before its server restarts: the nightly backup meets a ledger at the
    /// old schema. It is copied as it is (restorable by the old build), its pages checked, its rows
    /// left for the server that migrates it, and the report says so.
    @Test func aLedgerItsServerHasNotMigratedYetIsBackedUpAsItIs() async throws {
        let folder = try TemporaryFolder()
        let path = folder.path + "/v9.sqlite"
        let queue = try DatabaseQueue(path: path)
        try SQLiteDatabase.migrator.migrate(queue, upTo: "v9: calls owed to Apple include Set App Account Token")
        try queue.close()
        let backup = try await SQLiteDatabase.backup(path: path, to: folder.path + "/copy.sqlite") { _ in
            Issue.record("the rows of a ledger at an older schema are not read")
        }
        #expect(!backup.rowsChecked && backup.fulfilments == 0)
        let copy = try DatabaseQueue(path: folder.path + "/copy.sqlite")
        #expect(
            try await copy.read { try SQLiteDatabase.migrator.completedMigrations($0).last }
                == "v9: calls owed to Apple include Set App Account Token")
        try copy.close()
        let report = try await StockroomProcess.run(
            try StockroomProcess.binary(), ["ledger", "backup", "--database", path, folder.path + "/again.sqlite"], environment: [:])
        #expect(report.hasPrefix("backed up ") && report.contains("rows not: the ledger's schema is older"), "\(report)")
    }

    @Test func aBackupOverTheLedgerItselfOrIntoNoFolderIsRefusedAndTheLedgerIsUnchanged() async throws {
        try await DownloadFixture.run { fixture in
            let purchase = try await fixture.control.purchase(DownloadFixture.book)
            #expect(try await fixture.post(purchase).status == .ok)
            let snapshot = try await fixture.settledSnapshot()
            let binary = try StockroomProcess.binary()
            for (path, reason) in [
                (fixture.databaseLocation, "is the live ledger itself"), ("/nonexistent-\(UUID())/ledger.sqlite", "does not exist"),
            ] {
                await #expect {
                    _ = try await StockroomProcess.run(
                        binary, ["ledger", "backup", "--database", fixture.databaseLocation, path], environment: [:])
                } throws: { error in
                    "\(error)".contains(reason)
                }
            }
            await #expect {
                _ = try await StockroomProcess.run(
                    binary, ["ledger", "backup", "--database", "postgres://stockroom@127.0.0.1:9/none", "/tmp/x.sqlite"], environment: [:])
            } throws: { error in
                "\(error)".contains("pg_dump")
            }
            #expect(try await fixture.snapshot() == snapshot)
        }
    }
}

/// Downloads recorded so far, counted by the buyers' task and read by the test.
final class Counter: Sendable {
    private let count = Mutex(0)
    func add() { count.withLock { $0 += 1 } }
    var value: Int { count.withLock { $0 } }
}
