/// What one content response sent.
public struct DeliveryReport: Sendable, Equatable {
    /// The bytes that were to be sent; nil for an empty file.
    public var range: ClosedRange<Int64>?
    public var bytesSent: Int64
    /// Whether the whole planned body was written.
    public var complete: Bool

    public init(range: ClosedRange<Int64>?, bytesSent: Int64, complete: Bool) {
        self.range = range
        self.bytesSent = bytesSent
        self.complete = complete
    }
}
