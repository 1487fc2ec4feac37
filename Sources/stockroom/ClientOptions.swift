import ArgumentParser
import Foundation
import StockroomCore
import StockroomKit

/// How the `client` subcommands reach the server: its URL, whom TLS trusts, how long to wait.
struct ClientConnection: ParsableArguments {
    @Option(help: "Stockroom's base URL (STOCKROOM_SERVER).")
    var server: String?

    @Option(
        help: """
            A PEM file of certificate authorities to trust instead of the system's (else CURL_CA_BUNDLE or SSL_CERT_FILE, when set); \
            also for an object store the server sends content to, as curl -L does.
            """)
    var cacert: String?

    @Option(
        help: ArgumentHelp(
            """
            A pinned public key of the server, curl's spelling: sha256//BASE64 (several joined by ';', or repeated); not an object \
            store's.
            """,
            valueName: "sha256//…"))
    var pin: [String] = []

    @Option(help: "Seconds to wait for an answer's head or the next byte; a body slower than 1 KiB/s over that window ends too.")
    var timeout: Double = 60

    func validate() throws {
        _ = try url()
        _ = try trust()
        guard timeout.isFinite, (0.1...3600).contains(timeout) else { throw ValidationError("--timeout must be from 0.1 to 3600 seconds.") }
    }

    func url() throws -> URL {
        guard let text = server ?? ProcessInfo.processInfo.environment["STOCKROOM_SERVER"], let url = URL(string: text),
            let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https", url.host?.isEmpty == false
        else {
            throw ValidationError("--server must be an http or https URL such as http://127.0.0.1:8080 (or set STOCKROOM_SERVER).")
        }
        return url
    }

    /// `--cacert`, else `CURL_CA_BUNDLE` or `SSL_CERT_FILE`, as curl reads them; the pins.
    func trust() throws -> TLSTrust {
        var trust = TLSTrust.system
        let environment = ProcessInfo.processInfo.environment
        let named = ["CURL_CA_BUNDLE", "SSL_CERT_FILE"].lazy.compactMap { environment[$0] }.first { !$0.isEmpty }
        if let file = cacert ?? named {
            guard FileManager.default.isReadableFile(atPath: file) else { throw ValidationError("Cannot read the CA file \(file).") }
            trust.certificateAuthorities = URL(fileURLWithPath: file)
        }
        for text in pin {
            guard let pins = TLSTrust.pins(text) else {
                throw ValidationError("--pin must be sha256// and the base64 SHA-256 of a public key (SPKI).")
            }
            trust.pinnedPublicKeys += pins
        }
        return trust
    }

    /// A delivery into `into` with its journal in `journal`; with `catalogued`, bounded by the
    /// server's catalogue (only its products, none longer than its size) when it can be read.
    func delivery(into: String, journal: String, catalogued: Bool = false) async throws -> Delivery {
        var configuration = try configuration(into: into, journal: journal)
        if catalogued {
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("stockroom-catalog-\(UUID().uuidString)")
            defer { try? FileManager.default.removeItem(at: folder) }
            configuration.catalog = try? await CatalogClient(server: url(), cacheFolder: folder, timeout: timeout, trust: trust()).catalog()
                .catalog
        }
        do {
            return try Delivery(configuration: configuration)
        } catch Delivery.ConfigurationError.journalAmongFiles {
            throw ValidationError("--journal must be another folder than --into: a file could take a journal entry's name.")
        } catch let failure as Journal.Failure {
            throw ValidationError("\(failure)")
        }
    }

    /// A delivery's configuration into `into` with its journal in `journal`, reporting entries set aside.
    func configuration(into: String, journal: String) throws -> Delivery.Configuration {
        var configuration = Delivery.Configuration(
            server: try url(), journalFolder: URL(fileURLWithPath: journal), folder: URL(fileURLWithPath: into))
        configuration.trust = try trust()
        // An object store that content is redirected to: the same authorities, never the server's pins.
        configuration.storeTrust = TLSTrust(certificateAuthorities: configuration.trust.certificateAuthorities)
        configuration.requestTimeout = timeout
        configuration.observer = { event in
            switch event {
            case .journalEntrySetAside(let transactionID, let reason):
                ClientOptions.note("journal entry of \(transactionID) set aside (\(reason)): starting over from the proof")
            case .answerRefused(let transactionID, let reason):
                ClientOptions.note("\(transactionID): answer refused: \(reason)")
            default:
                break
            }
        }
        return configuration
    }
}

/// What the `client` subcommands share: reading proofs, printing outcomes.
enum ClientOptions {
    /// A file's text, trimmed.
    static func text(_ path: String) throws -> String {
        guard let data = FileManager.default.contents(atPath: path) else { throw ValidationError("Cannot read \(path).") }
        return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// A receipt file's bytes: base64 text is decoded, anything else taken as it is.
    static func bytes(_ path: String) throws -> Data {
        guard let data = FileManager.default.contents(atPath: path) else { throw ValidationError("Cannot read \(path).") }
        let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        if !text.isEmpty, let decoded = Data(base64Encoded: text, options: .ignoreUnknownCharacters),
            text.allSatisfy({ $0.isLetter || $0.isNumber || "+/=\n\r".contains($0) })
        {
            return decoded
        }
        return data
    }

    /// What a JWS's payload claims about its transaction (not verified: the server verifies).
    struct Claims: Decodable {
        var transactionId: String?
        var originalTransactionId: String?
        var appAccountToken: String?

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            func text(_ key: CodingKeys) -> String? {
                (try? container.decodeIfPresent(String.self, forKey: key))
                    ?? (try? container.decodeIfPresent(Int64.self, forKey: key)).flatMap { $0.map(String.init) }
            }
            transactionId = text(.transactionId)
            originalTransactionId = text(.originalTransactionId)
            appAccountToken = text(.appAccountToken)
        }

        private enum CodingKeys: String, CodingKey { case transactionId, originalTransactionId, appAccountToken }
    }

    static func claims(_ jws: String) -> Claims? {
        let parts = jws.split(separator: ".")
        guard parts.count == 3 else { return nil }
        var text = parts[1].replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while text.count % 4 != 0 { text += "=" }
        guard let data = Data(base64Encoded: text), StockroomCore.JSONNesting.isShallow(data) else { return nil }
        return try? JSONDecoder().decode(Claims.self, from: data)
    }

    /// Progress on standard error, a line per 5% (or per 8 MiB when the size is unknown).
    static func showProgress(_ delivery: Delivery, _ transactionID: String) -> Task<Void, Never> {
        let stream = delivery.progress(of: transactionID)
        return Task {
            var last: Int64 = -1
            for await step in stream {
                let mark = step.fraction.map { Int64($0 * 20) } ?? step.bytes >> 23
                guard mark != last else { continue }
                last = mark
                let total = step.total.map { " of \($0)" } ?? ""
                let percent = step.fraction.map { String(format: " (%.0f%%)", $0 * 100) } ?? ""
                note("\(transactionID): \(step.bytes) bytes\(total)\(percent)")
            }
        }
    }

    /// A line on standard error, its control characters escaped.
    static func note(_ line: String) {
        FileHandle.standardError.write(Data((printable(line) + "\n").utf8))
    }

    /// `text` with every control character (C0, DEL, C1) and the bidirectional overrides shown as
    /// `\u{…}`: text from the network never moves the cursor, recolours or rewrites a terminal.
    static func printable(_ text: String) -> String {
        escaping(text, c0: true) { "\\u{" + String($0, radix: 16) + "}" }
    }

    /// JSON text with DEL, C1 and the bidirectional overrides as `\uXXXX` escapes (JSONEncoder
    /// escapes C0 only); they can stand only inside strings, where the escape means the same.
    static func printableJSON(_ json: String) -> String {
        escaping(json, c0: false) { value in
            let hex = String(value, radix: 16)
            return "\\u" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
        }
    }

    private static func escaping(_ text: String, c0: Bool, as escape: (UInt32) -> String) -> String {
        var result = ""
        for scalar in text.unicodeScalars {
            switch scalar.value {
            case 0..<0x20 where c0: result += escape(scalar.value)
            case 0x7F..<0xA0, 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x2069: result += escape(scalar.value)
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result
    }

    /// 0 delivered; 2 retry later; 3 refresh the receipt; 1 finish with no content, or the app's decision.
    static func status(_ outcome: DeliveryOutcome) -> Int32 {
        switch outcome.transactionAction {
        case .finish: if case .delivered = outcome { 0 } else { 1 }
        case .keepUnfinishedAndRetry: 2
        case .refreshReceiptAndRetryOnce: 3
        case .appDecides: 1
        }
    }

    static func print(_ outcome: DeliveryOutcome, productID: String?, transactionID: String?, json: Bool, downloaded: Bool? = nil) {
        var fields = OutcomeReport(outcome: outcome.code, action: outcome.transactionAction.rawValue)
        fields.productId = productID
        fields.transactionId = transactionID
        fields.downloaded = downloaded
        var line = "\(outcome.code)"
        if let transactionID { line += " \(transactionID)" }
        switch outcome {
        case .delivered(let file):
            fields.file = file.path
            fields.safeToFinish = true
            line += ": \(file.path), checked and acknowledged: safe to finish" + (downloaded == false ? " (already on disk)" : "")
        case .retryLater(let after, let reason):
            fields.retryAfter = after.components.seconds
            fields.message = reason.message
            fields.status = reason.status
            line += ": keep unfinished, retry in \(after.components.seconds) s: \(reason.message)"
        case .revoked(let reason), .refreshReceipt(let reason), .refused(let reason):
            fields.message = reason.message
            fields.status = reason.status
            line += ": \(outcome.transactionAction.rawValue.replacingOccurrences(of: "_", with: " ")): \(reason.message)"
        }
        if json {
            Swift.print(printableJSON(OperatorJSON.string(fields)))
        } else {
            Swift.print(printable(line))
        }
    }
}

/// `client … --json`: one delivery's outcome. Names are the JSON keys.
struct OutcomeReport: Encodable {
    var outcome: String
    var action: String
    var productId: String?
    var transactionId: String?
    var downloaded: Bool?
    var file: String?
    var safeToFinish: Bool?
    var retryAfter: Int64?
    var message: String?
    var status: Int?
}
