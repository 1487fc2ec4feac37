/// What one content response sent.
public struct DeliveryReport: Sendable, Equatable {
    /// The bytes that were to be sent; nil for an empty file, or for an attempt that failed
    /// before a body began.
    public var range: ClosedRange<Int64>?
    /// Bytes of `range` written to the client, from its start.
    public var bytesSent: Int64
    /// How the body ended.
    public var ending: DeliveryEnding
    /// The content version (its ETag) the bytes are of; nil when the reporter does not know.
    public var version: String? = nil

    /// Whether the whole planned body was written.
    public var complete: Bool { ending == .complete }

    /// The bytes that went out: the whole range when complete, its first `bytesSent` otherwise.
    public var sent: ClosedRange<Int64>? {
        guard let range else { return nil }
        if complete { return range }
        guard bytesSent > 0 else { return nil }
        return range.lowerBound...min(range.upperBound, range.lowerBound + bytesSent - 1)
    }

    public init(range: ClosedRange<Int64>?, bytesSent: Int64, ending: DeliveryEnding, version: String? = nil) {
        self.range = range
        self.bytesSent = bytesSent
        self.ending = ending
        self.version = version
    }

    /// A report whose incomplete end was the client's.
    public init(range: ClosedRange<Int64>?, bytesSent: Int64, complete: Bool) {
        self.init(range: range, bytesSent: bytesSent, ending: complete ? .complete : .client)
    }
}

/// How a download attempt ended, as the ledger keeps the latest one: what a consumption answer
/// may say about who stopped a delivery.
public enum DeliveryEnding: String, Sendable, Codable, CaseIterable {
    /// The whole planned body went out.
    case complete
    /// The client went away, or read too slowly and was cut off.
    case client
    /// Stockroom's side failed: the content could not be read (the store down, or its bytes
    /// failing their check), or the server failed while sending.
    case server
}
