import Foundation
import StockroomCore
import StockroomSQLite
import StockroomTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The real binary killed (SIGKILL) around a webhook's send: nothing is lost, and an event sent
/// twice comes under its one ID with its one body.
@Suite(.serialized) struct WebhookCrashTests {
    static func serve(_ folder: String, interval: String) async throws -> StockroomProcess {
        try await PressureProcessTests.serve(
            folder,
            [
                "--webhooks", folder + "/webhooks.json", "--webhook-interval", interval, "--webhook-first-retry", "100ms",
                "--webhook-timeout",
                "2s",
            ])
    }

    static func configure(_ folder: String, _ receiver: WebhookReceiver) throws {
        let file = #"{"endpoints": [{"name": "backend", "url": "\#(receiver.url)", "secrets": ["\#(WebhookTests.secret)"]}]}"#
        _ = FileManager.default.createFile(atPath: folder + "/webhooks.json", contents: Data(file.utf8))
    }

    /// Every event the ledger holds, by ID, with its body.
    static func ledgerEvents(_ folder: String, _ transactions: [String]) async throws -> [String: String] {
        let ledger = SQLiteLedger(database: try SQLiteDatabase(path: folder + "/ledger.sqlite"))
        var events: [String: String] = [:]
        for transaction in transactions {
            for event in try await ledger.events(of: transaction, limit: 100) { events[event.eventID] = event.body }
        }
        return events
    }

    static func eventually(seconds: Int = 30, _ condition: () async throws -> Bool) async throws -> Bool {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while ContinuousClock.now < deadline {
            if try await condition() { return true }
            try await Task.sleep(for: .milliseconds(100))
        }
        return try await condition()
    }

    @Test func aKillBetweenTheLedgerWriteAndTheSendLosesNoEvent() async throws {
        let folder = try PressureProcessTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let receiver = try WebhookReceiver(secrets: [WebhookTests.secret])
        defer { receiver.stop() }
        try Self.configure(folder, receiver)
        // An hour between reads of the event log: what the downloads write waits there, unsent.
        let first = try await Self.serve(folder, interval: "1h")
        var transactions: [String] = []
        for _ in 0..<3 {
            let (status, purchase) = try await PressureProcessTests.buy(first)
            #expect(status == 200)
            transactions.append(try #require(purchase["transactionId"] as? String))
        }
        let written = try await Self.ledgerEvents(folder, transactions)
        #expect(written.count >= 6)
        kill(first.pid, SIGKILL)
        _ = await first.timeUntilExit(within: .seconds(10))
        #expect(receiver.received.isEmpty)

        let second = try await Self.serve(folder, interval: "100ms")
        defer { second.stop() }
        #expect(try await Self.eventually { Set(receiver.delivered.map(\.eventID)).isSuperset(of: written.keys) })
        for received in receiver.delivered where written[received.eventID] != nil {
            #expect(String(decoding: received.body, as: UTF8.self) == written[received.eventID])
        }
        WebhookTests.checkDeliveries(receiver)
    }

    @Test func aKillAfterTheSendBeforeItIsRecordedSendsItAgainUnderItsOneID() async throws {
        let folder = try PressureProcessTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        // The receiver takes each request in, then holds its answer: the server dies meanwhile. The
        // delivery's lease (its timeout and 10 s) runs out before the restarted server sends it again.
        let receiver = try WebhookReceiver(secrets: [WebhookTests.secret], mode: .slowAccept(1.5))
        defer { receiver.stop() }
        try Self.configure(folder, receiver)
        let first = try await Self.serve(folder, interval: "100ms")
        let (status, purchase) = try await PressureProcessTests.buy(first)
        #expect(status == 200)
        let transaction = try #require(purchase["transactionId"] as? String)
        #expect(try await Self.eventually { !receiver.received.isEmpty })
        let inFlight = try #require(receiver.received.first)
        kill(first.pid, SIGKILL)
        _ = await first.timeUntilExit(within: .seconds(10))

        receiver.set(.accept)
        let second = try await Self.serve(folder, interval: "100ms")
        defer { second.stop() }
        // The kill may come before the download's end was recorded: then its one event is the verified one.
        let written = try await Self.ledgerEvents(folder, [transaction])
        #expect(written[inFlight.eventID] == String(decoding: inFlight.body, as: UTF8.self))
        // The event whose answer never got recorded comes again: the same ID, the same bytes.
        #expect(try await Self.eventually { receiver.received.filter { $0.eventID == inFlight.eventID }.count >= 2 })
        #expect(receiver.received.filter { $0.eventID == inFlight.eventID }.allSatisfy { $0.body == inFlight.body })
        #expect(try await Self.eventually { Set(receiver.delivered.map(\.eventID)).isSuperset(of: written.keys) })
        WebhookTests.checkDeliveries(receiver)
    }
}
