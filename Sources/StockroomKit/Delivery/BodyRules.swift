import Foundation
#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Why the client refused to act on an answer: the server broke a rule it is held to.
enum AnswerRefusal: Error, Sendable, Equatable, CustomStringConvertible {
    /// A body with no `Content-Length` (or one that is not a plain number): it could go on for ever.
    case noLength
    /// A body longer than the catalogue says the product is.
    case longerThanCatalogue(length: Int64, size: Int64)
    /// A resumed body whose length or range does not continue the representation on record.
    case rangeMismatch
    /// A download with no SHA-256 `Repr-Digest` to check it against.
    case noDigest
    /// A `Location` that is not a path on the server's origin.
    case foreignLocation
    /// A redirect to content whose `Location` is not a URL the client may fetch content from: not
    /// an absolute `http(s)` URL with a host, with user info, or `http` from an `https` server.
    case foreignRedirect
    /// A whole body of another length than the representation Stockroom described.
    case lengthMismatch(length: Int64, size: Int64)
    /// An `X-Download-Token` or `ETag` that is empty, too long or not plain visible text.
    case malformedHeader(String)
    /// A name in the answer that is not a product or transaction ID (`NetworkName`), or a product
    /// outside the app's catalogue.
    case invalidName

    var description: String {
        switch self {
        case .noLength: "the body has no Content-Length"
        case .longerThanCatalogue(let length, let size): "the body is \(length) bytes, the catalogue says \(size)"
        case .rangeMismatch: "the resumed body does not continue the file on record"
        case .noDigest: "the download has no SHA-256 Repr-Digest"
        case .foreignLocation: "the Location is not a path on the server"
        case .foreignRedirect: "the redirect's Location is not an http(s) URL the client may fetch content from"
        case .lengthMismatch(let length, let size): "the body is \(length) bytes, the server said \(size)"
        case .malformedHeader(let name): "the \(name) header is malformed"
        case .invalidName: "a product or transaction ID is not one the App Store gives"
        }
    }
}

/// The rules a download's head must meet before a byte of its body is written, and the partial
/// file the body then goes to.
///
/// Decided on the transport's thread from the head alone: a body with no length, longer than the
/// catalogue's size, with no digest or with a `Location` off the server's origin is never written.
/// A body from an object store is held to what Stockroom's redirect said of it (`ContentRedirect`):
/// its digest and size come from there, its length and range from the store's own head.
struct BodyRules: Sendable {
    let journal: Journal
    let progress: ProgressBroadcast
    let origin: ServerOrigin
    /// The product's size in the app's catalogue, when known.
    let catalogueSize: Int64?

    /// What a grant names, each when present: `X-Download-Token`, the resumable path (`Location`,
    /// or a redirect's `Content-Location`) and the transaction delivered (`X-Transaction-Id`); a
    /// malformed one, or a path off the server's origin, is refused.
    struct Grant: Sendable {
        var token: String?
        var location: String?
        var transactionID: String?

        /// Writes what the grant names into `entry`, keeping what it does not name.
        func adopt(into entry: inout JournalEntry) {
            entry.token = token ?? entry.token
            entry.location = location ?? entry.location
            if let transactionID { entry.serverTransactionID = transactionID == entry.transactionID ? nil : transactionID }
        }
    }

    /// The grant of a 200, whose `Location` is the resumable path.
    func grant(_ response: HTTPURLResponse) throws(AnswerRefusal) -> Grant {
        try grant(response, resumableAt: "Location")
    }

    private func grant(_ response: HTTPURLResponse, resumableAt field: String) throws(AnswerRefusal) -> Grant {
        let token = response.value(forHTTPHeaderField: "X-Download-Token")
        if let token, !Self.isPlainText(token, allowingSpaces: false) { throw .malformedHeader("X-Download-Token") }
        let location = response.value(forHTTPHeaderField: field)
        if let location, origin.url(location) == nil { throw .foreignLocation }
        let transactionID = response.value(forHTTPHeaderField: "X-Transaction-Id")
        if let transactionID, !NetworkName.isTransactionID(transactionID) { throw .invalidName }
        return Grant(token: token, location: location, transactionID: transactionID)
    }

    /// What a `303` to the claim or a `307` to the content says: the store's URL (`Location`, by
    /// `ServerOrigin.storeURL`), the grant (its resumable path is `Content-Location`), and the
    /// bytes' ETag, SHA-256 `Repr-Digest` and size (`X-Content-Size`, within the catalogue's).
    func redirect(_ response: HTTPURLResponse) throws(AnswerRefusal) -> ContentRedirect {
        guard let url = response.value(forHTTPHeaderField: "Location").flatMap(origin.storeURL) else { throw .foreignRedirect }
        guard let size = response.value(forHTTPHeaderField: "X-Content-Size").flatMap({ ResponseHeaders.number($0) }) else {
            throw .malformedHeader("X-Content-Size")
        }
        if let catalogueSize, size > catalogueSize { throw .longerThanCatalogue(length: size, size: catalogueSize) }
        guard let digest = ResponseHeaders.sha256(response), Data(base64Encoded: digest)?.count == 32 else { throw .noDigest }
        let etag = response.value(forHTTPHeaderField: "ETag")
        if let etag, !Self.isPlainText(etag, allowingSpaces: true) { throw .malformedHeader("ETag") }
        return ContentRedirect(
            url: url, grant: try grant(response, resumableAt: "Content-Location"), etag: etag, digest: digest, size: size)
    }

    /// Opens the partial file for a body from Stockroom, after writing to the journal what the
    /// head says (the new token, ETag, size and digest), so that a relaunch resumes against the
    /// right representation. `keeping` bytes of the file on record are kept (a 206).
    func file(_ box: EntryBox, keeping: Int64, adopt response: HTTPURLResponse) -> BodyDisposition {
        var entry = box.entry
        do {
            guard let length = ResponseHeaders.contentLength(response) else { throw AnswerRefusal.noLength }
            if keeping > 0 {
                guard let expected = entry.expectedSize, length == expected - keeping else { throw AnswerRefusal.rangeMismatch }
                return try open(box, entry: entry, keeping: keeping, total: expected)
            }
            if let size = catalogueSize, length > size { throw AnswerRefusal.longerThanCatalogue(length: length, size: size) }
            guard let digest = ResponseHeaders.sha256(response), Data(base64Encoded: digest)?.count == 32 else {
                throw AnswerRefusal.noDigest
            }
            let etag = response.value(forHTTPHeaderField: "ETag")
            if let etag, !Self.isPlainText(etag, allowingSpaces: true) { throw AnswerRefusal.malformedHeader("ETag") }
            try grant(response).adopt(into: &entry)
            entry.etag = etag
            entry.digest = digest
            entry.expectedSize = length
            return try open(box, entry: entry, keeping: 0, total: length, writingJournal: true)
        } catch {
            return .fail(error)
        }
    }

    /// Opens the partial file for a body from an object store, whose representation the journal
    /// already holds (from the redirect): its `Content-Length` must be exactly what is left of it
    /// after the `keeping` bytes on disk, and never more than the catalogue's size.
    func storeFile(_ box: EntryBox, keeping: Int64, response: HTTPURLResponse) -> BodyDisposition {
        let entry = box.entry
        do {
            guard let length = ResponseHeaders.contentLength(response) else { throw AnswerRefusal.noLength }
            if let size = catalogueSize, length > size { throw AnswerRefusal.longerThanCatalogue(length: length, size: size) }
            guard let total = entry.expectedSize else { throw AnswerRefusal.rangeMismatch }
            guard length == total - keeping else {
                throw keeping > 0 ? AnswerRefusal.rangeMismatch : AnswerRefusal.lengthMismatch(length: length, size: total)
            }
            return try open(box, entry: entry, keeping: keeping, total: total)
        } catch {
            return .fail(error)
        }
    }

    private func open(_ box: EntryBox, entry: JournalEntry, keeping: Int64, total: Int64, writingJournal: Bool = false) throws
        -> BodyDisposition
    {
        let transactionID = entry.transactionID
        // Cut the file first: a relaunch between the two writes then finds less, never a mix.
        let file = try BodyFile(path: entry.partialPath, keeping: keeping, limit: total) { bytes in
            progress.send(DeliveryProgress(transactionID: transactionID, bytes: bytes, total: total))
        }
        if writingJournal {
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
    }

    /// 1 to 4096 visible ASCII characters (and spaces, where a header's grammar has them): what
    /// the client sends back in a later request's header.
    static func isPlainText(_ text: String, allowingSpaces: Bool) -> Bool {
        (1...4096).contains(text.utf8.count) && text.utf8.allSatisfy { (0x21...0x7E).contains($0) || (allowingSpaces && $0 == 0x20) }
    }
}
