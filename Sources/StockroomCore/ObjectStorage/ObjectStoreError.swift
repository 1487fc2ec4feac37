/// Why an object-store call gave no usable answer. Never carries a secret or a presigned URL;
/// keys and buckets are named, so that an operator knows what to fix.
public enum ObjectStoreError: Error, Equatable, CustomStringConvertible {
    /// 404 for the object: the catalogue names a key the bucket does not hold.
    case missing(key: String)
    /// The bucket itself does not exist (404 `NoSuchBucket`).
    case noBucket(String)
    /// 412: the object is no longer the one hashed (its ETag moved).
    case changed(key: String)
    /// 412 (or 409) to a conditional create: an object is already at the key.
    case exists(key: String)
    /// 401 or 403: wrong credentials, a wrong region, or no permission on the bucket.
    case denied(status: Int, code: String?, key: String?)
    /// The store could not be reached, timed out, broke off, or answered 5xx or 429: try again.
    case unavailable(String)
    /// An answer that is not what S3 gives (a wrong length, range or status).
    case badAnswer(String)

    public var description: String {
        switch self {
        case .missing(let key): "the object \"\(key)\" does not exist in the bucket"
        case .noBucket(let bucket): "the bucket \"\(bucket)\" does not exist"
        case .changed(let key): "the object \"\(key)\" changed since it was hashed"
        case .exists(let key): "an object is already at \"\(key)\""
        case .denied(let status, let code, let key):
            """
            the store refused \(key.map { "\"\($0)\"" } ?? "the request") (\(status)\(code.map { " \($0)" } ?? "")): check the \
            credentials, the region and the bucket's permissions
            """
        case .unavailable(let detail): "the object store is unavailable: \(detail)"
        case .badAnswer(let detail): "the object store answered unexpectedly: \(detail)"
        }
    }

    /// Whether a retry may succeed.
    public var isTransient: Bool {
        if case .unavailable = self { return true }
        return false
    }
}
