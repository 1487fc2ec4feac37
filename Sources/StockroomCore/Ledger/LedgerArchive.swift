import Foundation

/// A whole ledger as rows, engine-neutral: what `stockroom ledger export` writes (one JSON object
/// a line) and `ledger import` reads, to move a ledger between SQLite and PostgreSQL.
///
/// Each line is `{"table": NAME, "row": {...}}`; a row's keys are its columns, times are seconds
/// since 1970 (exact, as a `Double`). The file's SHA-256 is reported by both commands.
public struct LedgerArchive: Sendable, Equatable {
    public var fulfilments: [Fulfilment] = []
    public var attempts: [DownloadAttempt] = []
    public var pendingProofs: [PendingProof] = []
    public var notifications: [NotificationRecord] = []
    public var serverCalls: [ServerCall] = []
    public var events: [LedgerEvent] = []
    public var webhookDeliveries: [WebhookDelivery] = []
    public var consentRescissions: [ConsentRescission] = []

    public init() {}

    /// The ledger's tables, in the order an import writes them.
    public static let tables = [
        "fulfilments", "download_attempts", "pending_proofs", "notifications", "server_calls", "ledger_events", "webhook_deliveries",
        "consent_rescissions",
    ]

    /// The statements that write every row, IDs included, in an order that keeps references whole.
    public var insertions: [LedgerStatement] {
        fulfilments.map { .insert($0) } + attempts.map { .insert($0) } + pendingProofs.map { .insert($0) }
            + notifications.map { .insert($0) }
            + serverCalls.map { .insert($0) } + events.map { .insert($0) } + webhookDeliveries.map { .insert($0) }
            + consentRescissions.map { .insert($0) }
    }

    /// Rows per table, in the order the file holds them.
    public var counts: KeyValuePairs<String, Int> {
        [
            "fulfilments": fulfilments.count, "download_attempts": attempts.count, "pending_proofs": pendingProofs.count,
            "notifications": notifications.count, "server_calls": serverCalls.count, "ledger_events": events.count,
            "webhook_deliveries": webhookDeliveries.count, "consent_rescissions": consentRescissions.count,
        ]
    }

    /// "12 fulfilments, 30 download_attempts, …": for the commands' summaries.
    public var summary: String { counts.map { "\($0.value) \($0.key)" }.joined(separator: ", ") }

    /// Whether there is nothing in it: an import goes only into an empty ledger.
    public var isEmpty: Bool { counts.allSatisfy { $0.value == 0 } }

    private struct Line<Row: Codable>: Codable {
        var table: String
        var row: Row
    }

    private struct Table: Decodable {
        var table: String
    }

    /// The JSON Lines text, rows sorted by key so that one ledger always gives the same bytes.
    public func jsonLines() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .secondsSince1970
        var text = Data()
        func add<Row: Codable>(_ table: String, _ rows: [Row]) throws {
            for row in rows {
                text.append(try encoder.encode(Line(table: table, row: row)))
                text.append(0x0A)
            }
        }
        try add("fulfilments", fulfilments.sorted { $0.transactionID < $1.transactionID })
        try add("download_attempts", attempts.sorted { ($0.id ?? 0) < ($1.id ?? 0) })
        try add("pending_proofs", pendingProofs.sorted { ($0.id ?? 0) < ($1.id ?? 0) })
        try add("notifications", notifications.sorted { $0.uuid < $1.uuid })
        try add("server_calls", serverCalls.sorted { ($0.id ?? 0) < ($1.id ?? 0) })
        try add("ledger_events", events.sorted { ($0.id ?? 0) < ($1.id ?? 0) })
        try add("webhook_deliveries", webhookDeliveries.sorted { ($0.id ?? 0) < ($1.id ?? 0) })
        try add(
            "consent_rescissions",
            consentRescissions.sorted { ($0.appTransactionID, $0.environment.rawValue) < ($1.appTransactionID, $1.environment.rawValue) })
        return text
    }

    /// Reads JSON Lines as `jsonLines()` writes them; a line of an unknown table is an error
    /// naming its line number.
    public init(jsonLines data: Data) throws {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .secondsSince1970
        for (index, line) in data.split(separator: 0x0A, omittingEmptySubsequences: true).enumerated() {
            let bytes = Data(line)
            do {
                switch try decoder.decode(Table.self, from: bytes).table {
                case "fulfilments": fulfilments.append(try decoder.decode(Line<Fulfilment>.self, from: bytes).row)
                case "download_attempts": attempts.append(try decoder.decode(Line<DownloadAttempt>.self, from: bytes).row)
                case "pending_proofs": pendingProofs.append(try decoder.decode(Line<PendingProof>.self, from: bytes).row)
                case "notifications": notifications.append(try decoder.decode(Line<NotificationRecord>.self, from: bytes).row)
                case "server_calls": serverCalls.append(try decoder.decode(Line<ServerCall>.self, from: bytes).row)
                case "ledger_events": events.append(try decoder.decode(Line<LedgerEvent>.self, from: bytes).row)
                case "webhook_deliveries": webhookDeliveries.append(try decoder.decode(Line<WebhookDelivery>.self, from: bytes).row)
                case "consent_rescissions": consentRescissions.append(try decoder.decode(Line<ConsentRescission>.self, from: bytes).row)
                case let other: throw Malformed(description: "line \(index + 1): unknown table \"\(other)\"")
                }
            } catch let error as Malformed {
                throw error
            } catch {
                throw Malformed(description: "line \(index + 1): \(error)")
            }
        }
    }

    /// An archive line that cannot be read, or a ledger that cannot take an archive.
    public struct Malformed: Error, CustomStringConvertible {
        public let description: String

        public init(description: String) {
            self.description = description
        }
    }
}
