import Foundation
#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
@testable import StockroomKit

/// What StockroomKit reads from a server's answers, each a stranger's: the head's lines (status
/// line, fields, interim and final heads), the status, `Retry-After`,
/// `Repr-Digest`, `Content-Range`, `Content-Length`, `Location`, the download token, and the
/// restore, refusal and catalogue JSON. The input's lines are `Name: value` header fields until
/// an empty line, then a JSON body; its first byte picks the status.
///
/// Invariants: a wait is 1 s to a day; a range is ordered and inside its total; a location that
/// passes is on the server's origin; a name that passes is one file name, never `.`, `..` or a
/// path; nothing traps.
enum ClientAnswerHarness {
    static let origin = ServerOrigin(URL(string: "https://content.example.com:8443/base/")!)!
    static let now = Date(timeIntervalSince1970: 1_790_000_000)

    static func run(_ input: [UInt8]) {
        let status = 100 + Int(input.first ?? 0) % 500
        let text = String(decoding: input.dropFirst(), as: UTF8.self)
        let parts = text.components(separatedBy: "\n\n")
        var fields: [String: String] = [:]
        for line in (parts.first ?? "").split(separator: "\n") {
            guard let colon = line.firstIndex(of: ":") else { continue }
            fields[String(line[..<colon])] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        let body = Data(parts.dropFirst().joined(separator: "\n\n").utf8)

        // The same text as libcurl's header lines: a status line counts only where a head begins.
        var head = ResponseHead()
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) { _ = head.read(String(line)) }
        if head.isComplete, !(200...599).contains(head.status) { fatalError("a complete head with status \(head.status)") }
        if head.fields.count > ResponseHead.maximumFields || head.mergedFields.count > head.fields.count {
            fatalError("head fields past their bound")
        }

        let wait = ServerAnswer.retryAfter(fields["Retry-After"], now: now)
        if let wait, wait < .seconds(1) || wait > Delivery.longestWait {
            fatalError("Retry-After \(fields["Retry-After"] ?? "") is \(wait)")
        }
        for value in fields.values {
            let clamped = ServerAnswer.retryAfter(value, now: now)
            if let clamped, clamped < .seconds(1) || clamped > Delivery.longestWait { fatalError("Retry-After \(value) is \(clamped)") }
            checkLocation(value)
            checkName(value)
        }

        guard let response = HTTPURLResponse(url: origin.base, statusCode: status, httpVersion: "HTTP/1.1", headerFields: fields) else {
            return
        }
        if let range = ResponseHeaders.contentRange(response), !(0 <= range.start && range.start <= range.end && range.end < range.total) {
            fatalError("Content-Range \(fields["Content-Range"] ?? "") read as \(range)")
        }
        if let length = ResponseHeaders.contentLength(response), length < 0 { fatalError("Content-Length \(length)") }
        _ = ResponseHeaders.sha256(response)
        if let granted = try? rules.grant(response) {
            if let location = granted.location, origin.url(location) == nil { fatalError("grant kept the location \(location)") }
            if let token = granted.token, !BodyRules.isPlainText(token, allowingSpaces: false) {
                fatalError("grant kept the token \(token)")
            }
            if let id = granted.transactionID, !NetworkName.isTransactionID(id) { fatalError("grant kept the transaction \(id)") }
        }

        let refusal = ServerAnswer.error(in: body)
        let outcome = ServerAnswer.outcome(
            status: status, code: refusal?.code, message: refusal?.message, retryAfter: wait, failures: Int(input.last ?? 0),
            proofIsReceipt: status % 2 == 0,
            receiptRefreshed: status % 3 == 0)
        if case .retryLater(let after, _) = outcome, after < .seconds(1) || after > Delivery.longestWait {
            fatalError("retry after \(after)")
        }
        if (300...399).contains(status), outcome.transactionAction == .finish { fatalError("a redirect finished the transaction") }
        if let restore = ServerJSON.decode(RestoresAnswer.self, from: body) {
            for product in restore.products {
                checkName(product.productId)
                checkLocation(product.location)
            }
        }
        if let catalog = ServerJSON.decode(Catalog.self, from: body) {
            for product in catalog.products { checkName(product.productID) }
        }
    }

    /// A passing location resolves on the origin.
    private static func checkLocation(_ text: String) {
        guard let url = origin.url(text) else { return }
        guard origin.isSameOrigin(url), url.host == "content.example.com", url.port == 8443 else {
            fatalError("location \(text) left the origin: \(url)")
        }
    }

    /// A passing name is one plain file name.
    private static func checkName(_ text: String) {
        if NetworkName.isProductID(text) {
            guard !text.contains("/"), text != ".", text != "..", !text.hasPrefix("."), !text.contains("\0") else {
                fatalError("product ID \(text) passed")
            }
        }
        if NetworkName.isTransactionID(text), !text.utf8.allSatisfy({ (0x30...0x39).contains($0) }) {
            fatalError("transaction ID \(text) passed")
        }
    }

    /// The rules a grant's head meets; their journal (a folder of this process's) is never
    /// written, since only `grant` is called.
    private static let rules: BodyRules = {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
            "stockroom-fuzz-client-\(ProcessInfo.processInfo.processIdentifier)")
        guard let journal = try? Journal(folder: folder) else { fatalError("no journal folder at \(folder.path)") }
        return BodyRules(journal: journal, progress: ProgressBroadcast(), origin: origin, catalogueSize: 1 << 20)
    }()
}
