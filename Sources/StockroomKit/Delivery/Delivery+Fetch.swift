import Foundation
#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension Delivery {
    /// One request: a resume (`GET` with `Range` + `If-Range`) when a token is on record, else a new
    /// grant (`POST /v1/downloads`, or `POST /v1/restores` for a restored purchase). Stockroom's
    /// `307` to the resume, or `303` to the grant, sends the client on to an object store for the
    /// bytes (`follow`).
    func fetch(_ entry: inout JournalEntry) async -> Step {
        guard let token = entry.token, let location = entry.location, let target = origin.url(location) else {
            entry.token = nil  // a location from before this check, off the origin: never sent a token
            return await grant(&entry)
        }
        let partial = entry.partialPath
        var have = Self.size(partial)
        if entry.etag == nil || entry.digest == nil { have = 0 }  // nothing known to resume against
        if have > 0, let size = entry.expectedSize, have >= size {
            // A whole file from before a relaunch: check it.
            guard let hashed = try? SHA256Digest.ofFile(partial, length: have) else { return .interrupted(progressed: false) }
            return .complete(hashed.digest, length: hashed.bytes)
        }
        var request = URLRequest(url: target)
        request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
        if have > 0, let etag = entry.etag {
            request.setValue("bytes=\(have)-", forHTTPHeaderField: "Range")
            request.setValue(etag, forHTTPHeaderField: "If-Range")
        }
        let resumeFrom = have
        let box = EntryBox(entry)
        let body = bodyRules(entry.productID)
        let result = await transport.send(request) { response in
            switch response.statusCode {
            case 206
            where resumeFrom > 0
                && ResponseHeaders.contentRange(response).map({ $0.start == resumeFrom && $0.total == box.entry.expectedSize }) == true:
                return body.file(box, keeping: resumeFrom, adopt: response)
            case 200:
                // The whole representation: a first download, or If-Range found a new ETag.
                return body.file(box, keeping: 0, adopt: response)
            default:
                return .memory(limit: 64 << 10)
            }
        }
        entry = box.entry
        let status = result.response?.statusCode
        emitResponse(entry.transactionID, "GET", location, rangeStart: resumeFrom > 0 ? resumeFrom : nil, result)
        if let status, [401, 403, 404].contains(status), Self.tokenCodes.contains(ServerAnswer.error(in: result.body)?.code ?? "") {
            entry.token = nil  // expired or not valid here: a new grant with the proof on record
            return save(entry, then: .again)
        }
        switch status {
        case 200, 206:
            return await finishedBody(result, box: box, entry: entry)
        case let status? where ServerOrigin.leadsToContent(status: status, answering: .content):
            guard let response = result.response else { return .interrupted(progressed: false) }
            return await follow(response, &entry)
        case 416:
            // Nothing left to send from there: a whole file is checked, anything else starts over.
            LocalFile.remove(partial)
            entry.forgetRepresentation()
            return save(entry, then: .again)
        case nil:
            return .interrupted(progressed: false)
        default:
            return .settled(answer(result, entry))
        }
    }

    /// Codes that a new grant cures: the token is old, or the ledger does not know it.
    static let tokenCodes: Set<String> = ["token_expired", "token_missing", "token_invalid", "unknown_transaction"]

    /// `POST /v1/downloads` with the proof on record. Its answer carries the whole file: when the
    /// partial file already holds the start of that same representation, the body is dropped
    /// after the head and the next step resumes with the new token.
    func grant(_ entry: inout JournalEntry) async -> Step {
        switch entry.renewal {
        case .restore(let signedTransaction):
            return await regrantByRestore(&entry, signedTransaction: signedTransaction)
        case .download(let proof):
            var request = URLRequest(url: endpoint("/v1/downloads"))
            request.httpMethod = "POST"
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            request.httpBody = DownloadBody(entry: entry, proof: proof).json
            let partial = entry.partialPath
            let have = Self.size(partial)
            let box = EntryBox(entry)
            let body = bodyRules(entry.productID)
            let result = await transport.send(request) { response in
                guard response.statusCode == 200 else { return .memory(limit: 64 << 10) }
                let old = box.entry
                let sameRepresentation =
                    have > 0 && old.etag != nil && old.etag == response.value(forHTTPHeaderField: "ETag")
                    && old.digest != nil && old.digest == ResponseHeaders.sha256(response)
                if sameRepresentation {
                    do {
                        try body.grant(response).adopt(into: &box.entry)
                    } catch {
                        return .fail(error)
                    }
                    try? body.journal.write(box.entry)
                    return .stop
                }
                return body.file(box, keeping: 0, adopt: response)
            }
            entry = box.entry
            emitResponse(entry.transactionID, "POST", "/v1/downloads", rangeStart: nil, result)
            guard let response = result.response else { return .interrupted(progressed: false) }
            if response.statusCode == 200 {
                if result.stopped { return .again }
                return await finishedBody(result, box: box, entry: entry)
            }
            if ServerOrigin.leadsToContent(status: response.statusCode, answering: .claim) { return await follow(response, &entry) }
            return .settled(answer(result, entry))
        }
    }

    /// How a 200 or 206 body ended.
    func finishedBody(_ result: TransferResult, box: EntryBox, entry: JournalEntry) async -> Step {
        if let refused = result.error as? AnswerRefusal { return .settled(self.refused(refused, entry)) }
        guard let file = box.file else {
            return result.error == nil ? .again : .interrupted(progressed: false)
        }
        if result.complete {
            guard let digest = await file.digest() else { return .interrupted(progressed: false) }
            return .complete(digest, length: file.length)
        }
        emit(.interrupted(transactionID: entry.transactionID, bytes: file.length))
        // A body ended for its pace (stalled, or trickled under the minimum rate) is no progress:
        // a server that trickles a few bytes per try must not be tried for ever.
        let paced = (result.error as? URLError)?.code == .timedOut
        return .interrupted(progressed: !paced && file.length > box.startedAt)
    }

    /// The rules a download of `productID` is held to (`BodyRules`).
    func bodyRules(_ productID: String) -> BodyRules {
        BodyRules(journal: journal, progress: progressBroadcast, origin: origin, catalogueSize: catalogueProduct(productID)?.size)
    }

    /// The outcome of an answer the client refused to act on: kept unfinished, tried again later.
    func refused(_ refusal: AnswerRefusal, _ entry: JournalEntry) -> DeliveryOutcome {
        emit(.answerRefused(transactionID: entry.transactionID, reason: refusal.description))
        return .retryLater(
            after: Backoff.delay(afterFailures: entry.failures + 1),
            OutcomeReason(code: "bad_answer", message: "The server's answer was refused: \(refusal)."))
    }

    func save(_ entry: JournalEntry, then step: Step) -> Step {
        do { try save(entry) } catch { return .settled(storageFailure(error)) }
        return step
    }

    func emitResponse(_ transactionID: String, _ method: String, _ path: String, rangeStart: Int64?, _ result: TransferResult) {
        if let status = result.response?.statusCode {
            emit(.response(transactionID: transactionID, method: method, path: path, rangeStart: rangeStart, status: status))
        } else {
            emit(.transportFailure(transactionID: transactionID, path: path, message: result.error.map(Self.describe) ?? "no answer"))
        }
    }

    /// A transport error as an event says it, without any URL's query: a presigned URL's query
    /// is a credential, and URLSession's errors carry the whole failing URL (the app logs events).
    static func describe(_ error: any Error) -> String {
        let text = (error as? URLError).map { "URLError \($0.code.rawValue): \($0.localizedDescription)" } ?? "\(error)"
        return withoutQueries(text)
    }

    /// `text` with the query of every URL in it cut, from its `?` to where the URL ends.
    static func withoutQueries(_ text: String) -> String {
        var out = ""
        var inURL = false
        var cutting = false
        var token = ""
        for character in text {
            let ends = character.isWhitespace || "\"'<>,;{}()[]".contains(character)
            if ends {
                out += token
                token = ""
                inURL = false
                cutting = false
                out.append(character)
                continue
            }
            if cutting { continue }
            token.append(character)
            if token.hasSuffix("://") { inURL = true }
            if inURL, character == "?" || character == "#" {
                token.removeLast()
                token += "?…"
                cutting = true
            }
        }
        return out + token
    }

    /// The size of the regular file at `path`; 0 when none (a link there counts as none).
    static func size(_ path: String) -> Int64 {
        LocalFile.regularFileSize(path) ?? 0
    }
}

/// The journal entry as the head of a response updates it on the session's queue, read back by
/// the delivery once the transfer ended.
final class EntryBox: @unchecked Sendable {
    private let lock = NSLock()
    private var _entry: JournalEntry
    private var _file: BodyFile?
    private var _startedAt: Int64 = 0

    init(_ entry: JournalEntry) { _entry = entry }

    var entry: JournalEntry {
        get { lock.withLock { _entry } }
        set { lock.withLock { _entry = newValue } }
    }
    var file: BodyFile? {
        get { lock.withLock { _file } }
        set { lock.withLock { _file = newValue } }
    }
    var startedAt: Int64 {
        get { lock.withLock { _startedAt } }
        set { lock.withLock { _startedAt = newValue } }
    }
}

/// The JSON body of `POST /v1/downloads`.
struct DownloadBody: Encodable {
    var productId: String
    var transactionId: String
    /// Lets the server find a restore that the receipt lists under another transaction ID.
    var originalTransactionId: String?
    var receiptData: String?
    var signedTransaction: String?
    var appAccountToken: String?
    var consent: Bool?

    init(entry: JournalEntry, proof: Proof) {
        productId = entry.productID
        transactionId = entry.transactionID
        originalTransactionId = entry.originalTransactionID.flatMap {
            NetworkName.isTransactionID($0) && $0 != entry.transactionID ? $0 : nil
        }
        receiptData = proof.requestFields["receiptData"]
        signedTransaction = proof.requestFields["signedTransaction"]
        appAccountToken = entry.appAccountToken?.uuidString.lowercased()
        consent = entry.consent
    }

    var json: Data { (try? JSONEncoder().encode(self)) ?? Data() }
}

/// The response headers Stockroom's downloads carry.
enum ResponseHeaders {
    /// The base64 SHA-256 of `Repr-Digest: sha-256=:…:` (RFC 9530).
    static func sha256(_ response: HTTPURLResponse) -> String? {
        guard let field = response.value(forHTTPHeaderField: "Repr-Digest") else { return nil }
        for member in field.split(separator: ",") {
            let parts = member.trimmingCharacters(in: .whitespaces).split(separator: "=", maxSplits: 1)
            guard parts.count == 2, parts[0].lowercased() == "sha-256" else { continue }
            let value = parts[1].trimmingCharacters(in: CharacterSet(charactersIn: ": "))
            return value.isEmpty ? nil : value
        }
        return nil
    }

    /// `Content-Range: bytes a-b/n`, when it is well formed: `a <= b < n`.
    static func contentRange(_ response: HTTPURLResponse) -> (start: Int64, end: Int64, total: Int64)? {
        guard let field = response.value(forHTTPHeaderField: "Content-Range"), field.hasPrefix("bytes ") else { return nil }
        let parts = field.dropFirst(6).split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2 else { return nil }
        let range = parts[0].split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
        guard range.count == 2, let start = number(range[0]), let end = number(range[1]), let total = number(parts[1]), start <= end,
            end < total
        else {
            return nil
        }
        return (start, end, total)
    }

    /// `Content-Length`, when it is plain digits that fit.
    static func contentLength(_ response: HTTPURLResponse) -> Int64? {
        response.value(forHTTPHeaderField: "Content-Length").flatMap { number($0) }
    }

    /// Plain digits that fit an `Int64`, spaces around them aside.
    static func number(_ text: some StringProtocol) -> Int64? {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        guard !trimmed.isEmpty, trimmed.utf8.count <= 19, trimmed.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) })
        else { return nil }
        return Int64(trimmed)
    }
}
