/// How content kept in a bucket reaches the app (`--content-delivery`).
public enum ContentDelivery: String, Sendable, CaseIterable {
    /// Stockroom reads the object and streams it, ranges and all: the bucket stays private to the
    /// server, and every app version can download.
    case stream
    /// Stockroom answers with a presigned URL for the object (303 to the claim, 307 to a resume)
    /// and the store sends the bytes; delivery is recorded when the app acknowledges. Needs
    /// StockroomKit (or `stockroom client`) that follows it, or `curl -L`.
    case redirect
}
