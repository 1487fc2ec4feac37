import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension Delivery {
    /// One request: a resume (`GET` with `Range` + `If-Range`) when a token is on record, else a new
    /// grant (`POST /v1/downloads`, or `POST /v1/restores` for a restored purchase).
    func fetch(_ entry: inout JournalEntry) async -> Step {
        guard let token = entry.token, let location = entry.location else { return await grant(&entry) }
        let partial = entry.partialPath
        var have = Self.size(partial)
        if entry.etag == nil || entry.digest == nil { have = 0 }  // nothing known to resume against
        if have > 0, let size = entry.expectedSize, have >= size {
            // A whole file from before a relaunch: check it.
            guard let hashed = try? SHA256Digest.ofFile(partial, length: have) else { return .interrupted(progressed: false) }
            return .complete(hashed.digest, length: hashed.bytes)
        }
        var request = URLRequest(url: url(location))
        request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
        if have > 0, let etag = entry.etag {
            request.setValue("bytes=\(have)-", forHTTPHeaderField: "Range")
            request.setValue(etag, forHTTPHeaderField: "If-Range")
        }
        let resumeFrom = have
        let box = EntryBox(entry)
        let journal = self.journal
        let progress = self.progressBroadcast
        let result = await transport.send(request) { response in
            switch response.statusCode {
            case 206 where resumeFrom > 0 && ResponseHeaders.contentRangeStart(response) == resumeFrom:
                return Self.bodyFile(box, keeping: resumeFrom, journal: journal, progress: progress, adopt: nil)
            case 200:
                // The whole representation: a first download, or If-Range found a new ETag.
                return Self.bodyFile(box, keeping: 0, journal: journal, progress: progress, adopt: response)
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
        case 416:
            // Nothing left to send from there: a whole file is checked, anything else starts over.
            try? FileManager.default.removeItem(atPath: partial)
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
            var request = URLRequest(url: url("/v1/downloads"))
            request.httpMethod = "POST"
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            request.httpBody = DownloadBody(entry: entry, proof: proof).json
            let partial = entry.partialPath
            let have = Self.size(partial)
            let box = EntryBox(entry)
            let journal = self.journal
            let progress = self.progressBroadcast
            let result = await transport.send(request) { response in
                guard response.statusCode == 200 else { return .memory(limit: 64 << 10) }
                let old = box.entry
                let sameRepresentation = have > 0 && old.etag != nil && old.etag == response.value(forHTTPHeaderField: "ETag")
                    && old.digest != nil && old.digest == ResponseHeaders.sha256(response)
                if sameRepresentation {
                    box.entry.token = response.value(forHTTPHeaderField: "X-Download-Token")
                    box.entry.location = response.value(forHTTPHeaderField: "Location")
                    try? journal.write(box.entry)
                    return .stop
                }
                return Self.bodyFile(box, keeping: 0, journal: journal, progress: progress, adopt: response)
            }
            entry = box.entry
            emitResponse(entry.transactionID, "POST", "/v1/downloads", rangeStart: nil, result)
            guard let status = result.response?.statusCode else { return .interrupted(progressed: false) }
            if status == 200 {
                if result.stopped { return .again }
                return await finishedBody(result, box: box, entry: entry)
            }
            return .settled(answer(result, entry))
        }
    }

    /// How a 200 or 206 body ended.
    private func finishedBody(_ result: TransferResult, box: EntryBox, entry: JournalEntry) async -> Step {
        guard let file = box.file else {
            return result.error == nil ? .again : .interrupted(progressed: false)
        }
        if result.complete {
            guard let digest = await file.digest() else { return .interrupted(progressed: false) }
            return .complete(digest, length: file.length)
        }
        emit(.interrupted(transactionID: entry.transactionID, bytes: file.length))
        return .interrupted(progressed: file.length > box.startedAt)
    }

    /// Opens the partial file for a body, after writing to the journal what the head says (the
    /// new token, ETag, size and digest), so that a relaunch resumes against the right representation.
    static func bodyFile(
        _ box: EntryBox, keeping: Int64, journal: Journal, progress: ProgressBroadcast, adopt response: HTTPURLResponse?
    ) -> BodyDisposition {
        var entry = box.entry
        let transactionID = entry.transactionID
        do {
            // Cut the file first: a relaunch between the two writes then finds less, never a mix.
            let total = response.flatMap { Int64($0.value(forHTTPHeaderField: "Content-Length") ?? "") } ?? entry.expectedSize
            let file = try BodyFile(path: entry.partialPath, keeping: keeping) { bytes in
                progress.send(DeliveryProgress(transactionID: transactionID, bytes: bytes, total: total))
            }
            if let response {
                if let token = response.value(forHTTPHeaderField: "X-Download-Token") { entry.token = token }
                if let location = response.value(forHTTPHeaderField: "Location") { entry.location = location }
                entry.etag = response.value(forHTTPHeaderField: "ETag")
                entry.digest = ResponseHeaders.sha256(response)
                entry.expectedSize = total
                do {
                    try journal.write(entry)
                } catch {
                    try? file.end()  // its hash thread ends too
                    throw error
                }
            }
            box.entry = entry
            box.file = file
            box.startedAt = keeping
            progress.send(DeliveryProgress(transactionID: transactionID, bytes: keeping, total: total))
            return .file(file)
        } catch {
            return .fail(error)
        }
    }

    private func save(_ entry: JournalEntry, then step: Step) -> Step {
        do { try save(entry) } catch { return .settled(storageFailure(error)) }
        return step
    }

    func emitResponse(_ transactionID: String, _ method: String, _ path: String, rangeStart: Int64?, _ result: TransferResult) {
        if let status = result.response?.statusCode {
            emit(.response(transactionID: transactionID, method: method, path: path, rangeStart: rangeStart, status: status))
        } else {
            emit(.transportFailure(transactionID: transactionID, path: path, message: result.error.map { "\($0)" } ?? "no answer"))
        }
    }

    static func size(_ path: String) -> Int64 {
        ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? NSNumber)?.int64Value ?? 0
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
    var receiptData: String?
    var signedTransaction: String?
    var appAccountToken: String?
    var consent: Bool?

    init(entry: JournalEntry, proof: Proof) {
        productId = entry.productID
        transactionId = entry.transactionID
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

    /// The first byte of `Content-Range: bytes a-b/n`.
    static func contentRangeStart(_ response: HTTPURLResponse) -> Int64? {
        guard let field = response.value(forHTTPHeaderField: "Content-Range"), field.hasPrefix("bytes ") else { return nil }
        return Int64(field.dropFirst(6).prefix { $0 != "-" })
    }
}
