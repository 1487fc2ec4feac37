import Foundation

/// A `303` or `307` from Stockroom that sends a download's bytes to an object store, checked.
struct ContentRedirect: Sendable {
    /// The presigned URL: a credential for this one object, fetched at once and never written to
    /// the journal nor shown in an event.
    let url: URL
    /// The token, the resumable path on the server (`Content-Location`) and the transaction.
    let grant: BodyRules.Grant
    /// Stockroom's word for the bytes the store sends: its ETag, SHA-256 and size. The store's own
    /// ETag is another (an MD5), so this one is never sent to the store.
    let etag: String?
    let digest: String
    let size: Int64

    /// The URL as an event shows it: without its query, which holds the signature.
    var shownURL: String {
        var components = URLComponents(url: url, resolvingAgainstBaseURL: false)
        components?.query = nil
        return components?.string ?? "object store"
    }
}
