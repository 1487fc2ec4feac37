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
struct BodyRules: Sendable {
    let journal: Journal
    let progress: ProgressBroadcast
    let origin: ServerOrigin
    /// The product's size in the app's catalogue, when known.
    let catalogueSize: Int64?

    /// What a grant names, each when present: `X-Download-Token`, `Location` and the
    /// transaction delivered (`X-Transaction-Id`); a malformed one, or a `Location` off the
    /// server's origin, is refused.
    struct Grant {
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

    func grant(_ response: HTTPURLResponse) throws(AnswerRefusal) -> Grant {
        let token = response.value(forHTTPHeaderField: "X-Download-Token")
        if let token, !Self.isPlainText(token, allowingSpaces: false) { throw .malformedHeader("X-Download-Token") }
        let location = response.value(forHTTPHeaderField: "Location")
        if let location, origin.url(location) == nil { throw .foreignLocation }
        let transactionID = response.value(forHTTPHeaderField: "X-Transaction-Id")
        if let transactionID, !NetworkName.isTransactionID(transactionID) { throw .invalidName }
        return Grant(token: token, location: location, transactionID: transactionID)
    }

    /// Opens the partial file for a body, after writing to the journal what the head says (the
    /// new token, ETag, size and digest), so that a relaunch resumes against the right
    /// representation. `keeping` bytes of the file on record are kept (a 206).
    func file(_ box: EntryBox, keeping: Int64, adopt response: HTTPURLResponse) -> BodyDisposition {
        var entry = box.entry
        let transactionID = entry.transactionID
        do {
            guard let length = ResponseHeaders.contentLength(response) else { throw AnswerRefusal.noLength }
            let total: Int64
            if keeping > 0 {
                guard let expected = entry.expectedSize, length == expected - keeping else { throw AnswerRefusal.rangeMismatch }
                total = expected
            } else {
                total = length
                if let size = catalogueSize, total > size { throw AnswerRefusal.longerThanCatalogue(length: total, size: size) }
                guard let digest = ResponseHeaders.sha256(response), Data(base64Encoded: digest)?.count == 32 else { throw AnswerRefusal.noDigest }
                let etag = response.value(forHTTPHeaderField: "ETag")
                if let etag, !Self.isPlainText(etag, allowingSpaces: true) { throw AnswerRefusal.malformedHeader("ETag") }
                try grant(response).adopt(into: &entry)
                entry.etag = etag
                entry.digest = digest
                entry.expectedSize = total
            }
            // Cut the file first: a relaunch between the two writes then finds less, never a mix.
            let file = try BodyFile(path: entry.partialPath, keeping: keeping, limit: total) { bytes in
                progress.send(DeliveryProgress(transactionID: transactionID, bytes: bytes, total: total))
            }
            if keeping == 0 {
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

    /// 1 to 4096 visible ASCII characters (and spaces, where a header's grammar has them): what
    /// the client sends back in a later request's header.
    static func isPlainText(_ text: String, allowingSpaces: Bool) -> Bool {
        (1...4096).contains(text.utf8.count) && text.utf8.allSatisfy { (0x21...0x7E).contains($0) || (allowingSpaces && $0 == 0x20) }
    }
}
