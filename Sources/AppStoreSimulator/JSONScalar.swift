/// One JSON value of a flat request body, typed strictly: `true` is no number and `1` no boolean.
enum JSONScalar: Decodable, Equatable {
    case boolean(Bool)
    /// A whole number that fits in 64 bits.
    case integer(Int64)
    case string(String)
    /// A fraction, an out-of-range number, null, an array or an object.
    case other

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if let value = try? container.decode(Bool.self) {
            self = .boolean(value)
        } else if let value = try? container.decode(Int64.self) {
            self = .integer(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else {
            self = .other
        }
    }
}
