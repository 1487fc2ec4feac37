/// One of Apple's string enumerations (`notificationType`, `environment`, …), read so that a value
/// Apple adds later is kept as `unrecognized(raw)` instead of refusing the whole payload, as
/// app-store-server-library-swift keeps a raw value beside each of its enumerations.
///
/// A conforming enum lists the values it knows and has one `unrecognized(String)` case; decoding,
/// encoding and `init(rawValue:)` come from here. Compare with cases, never with Apple's strings.
public protocol AppleEnumeration: RawRepresentable<String>, Codable, Hashable, Sendable, CustomStringConvertible {
    /// Every value Stockroom knows by name.
    static var recognized: [Self] { get }
    /// A value Apple sent that Stockroom does not know by name, kept as sent.
    static func unrecognized(_ raw: String) -> Self
}

extension AppleEnumeration {
    /// The known case for `raw`, else `unrecognized(raw)`.
    public init(_ raw: String) {
        self = Self.recognized.first { $0.rawValue == raw } ?? .unrecognized(raw)
    }

    /// Never nil: a value Stockroom does not know is `unrecognized`.
    public init?(rawValue: String) {
        self.init(rawValue)
    }

    /// A string, whatever its value; anything else (a number, null) is a decoding error.
    public init(from decoder: any Decoder) throws {
        self.init(try decoder.singleValueContainer().decode(String.self))
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }

    public var description: String { rawValue }
}
