import Foundation

/// A ledger row's columns are its `Codable` keys: each table's column names are declared once, in
/// its `CodingKeys`, and what binds a row to a statement (`LedgerRow.columns`), what reads a row
/// back (`LedgerRow.init(row:)`) and the export's JSON (`LedgerArchive`) all follow from them, as
/// GRDB's records derive theirs. A test compares every table's keys with the schema.
///
/// Each field goes through its own `Codable` conformance as one value, with no dynamic cast: a
/// `String` is a text column (an enum's raw value too), an `Int64` or `Int` an integer, a `Bool` a
/// boolean, and a `Double` a time (`Date` codes itself as seconds since 2001). A NULL is a nil.
extension LedgerRow {
    /// The table's column names, in the order of its `CodingKeys`.
    public static var columnNames: [String] { CodingKeys.allCases.map(\.stringValue) }

    /// The row's columns and values, in the order `encode(to:)` writes them; a nil is a NULL.
    public var columns: [(name: String, value: LedgerValue)] {
        let encoder = ColumnEncoder()
        // A row's fields are all texts, integers, booleans and times: encoding fails only by a
        // programming error (a field of another kind).
        do { try encode(to: encoder) } catch { preconditionFailure("\(Self.self) has a field the ledger cannot hold: \(error)") }
        return encoder.columns.values
    }

    public init(row: some LedgerCells) throws {
        try self.init(from: CellDecoder(cells: row))
    }
}

/// A field of a kind no column holds (a nested value, a float that is not a time).
private struct NotAColumn: Error {}

/// A NULL met where a field's own decoding asked for a value: nil for an optional field.
private struct NullColumn: Error {}

/// Collects what a row's `encode(to:)` writes, as columns.
private final class ColumnEncoder: Encoder {
    final class Columns {
        var values: [(name: String, value: LedgerValue)] = []
        init() { values.reserveCapacity(24) }
    }

    let columns = Columns()
    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        KeyedEncodingContainer(Container(columns: columns))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer { preconditionFailure("a ledger row is keyed by its columns") }
    func singleValueContainer() -> any SingleValueEncodingContainer { preconditionFailure("a ledger row is keyed by its columns") }

    struct Container<Key: CodingKey>: KeyedEncodingContainerProtocol {
        let columns: Columns
        var codingPath: [any CodingKey] { [] }

        mutating func encodeNil(forKey key: Key) throws { columns.values.append((key.stringValue, .null)) }
        mutating func encode(_ value: String, forKey key: Key) throws { columns.values.append((key.stringValue, .text(value))) }
        mutating func encode(_ value: Int64, forKey key: Key) throws { columns.values.append((key.stringValue, .integer(value))) }
        mutating func encode(_ value: Int, forKey key: Key) throws { columns.values.append((key.stringValue, .integer(Int64(value)))) }
        mutating func encode(_ value: Bool, forKey key: Key) throws { columns.values.append((key.stringValue, .bool(value))) }

        mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
            if T.self == Date.self { return columns.values.append((key.stringValue, .time(unsafeBitCast(value, to: Date.self)))) }
            let single = ValueEncoder()
            try value.encode(to: single)
            guard let encoded = single.value else { throw NotAColumn() }
            columns.values.append((key.stringValue, encoded))
        }

        // A nil field is a NULL column, not a missing one: an update writes every column.
        mutating func encodeIfPresent<T: Encodable>(_ value: T?, forKey key: Key) throws {
            guard let value else { return try encodeNil(forKey: key) }
            try encode(value, forKey: key)
        }
        mutating func encodeIfPresent(_ value: String?, forKey key: Key) throws { put(key, value.map(LedgerValue.text)) }
        mutating func encodeIfPresent(_ value: Int64?, forKey key: Key) throws { put(key, value.map(LedgerValue.integer)) }
        mutating func encodeIfPresent(_ value: Int?, forKey key: Key) throws { put(key, value.map { .integer(Int64($0)) }) }
        mutating func encodeIfPresent(_ value: Bool?, forKey key: Key) throws { put(key, value.map(LedgerValue.bool)) }

        private func put(_ key: Key, _ value: LedgerValue?) { columns.values.append((key.stringValue, value ?? .null)) }

        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key)
            -> KeyedEncodingContainer<NestedKey>
        { preconditionFailure("a ledger column holds one value") }
        mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
            preconditionFailure("a ledger column holds one value")
        }
        mutating func superEncoder() -> any Encoder { preconditionFailure("a ledger row has no superclass") }
        mutating func superEncoder(forKey key: Key) -> any Encoder { preconditionFailure("a ledger row has no superclass") }
    }
}

/// One field's value as it codes itself (an enum as its raw value, a date as seconds since 2001).
private final class ValueEncoder: Encoder, SingleValueEncodingContainer {
    var value: LedgerValue?
    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        preconditionFailure("a ledger column holds one value")
    }
    func unkeyedContainer() -> any UnkeyedEncodingContainer { preconditionFailure("a ledger column holds one value") }
    func singleValueContainer() -> any SingleValueEncodingContainer { self }

    func encodeNil() throws { value = .null }
    func encode(_ value: String) throws { self.value = .text(value) }
    func encode(_ value: Int64) throws { self.value = .integer(value) }
    func encode(_ value: Int) throws { self.value = .integer(Int64(value)) }
    func encode(_ value: Bool) throws { self.value = .bool(value) }
    func encode(_ value: Double) throws { self.value = .time(Date(timeIntervalSinceReferenceDate: value)) }
    func encode(_ value: Float) throws { throw NotAColumn() }
    func encode(_ value: Int8) throws { throw NotAColumn() }
    func encode(_ value: Int16) throws { throw NotAColumn() }
    func encode(_ value: Int32) throws { throw NotAColumn() }
    func encode(_ value: UInt) throws { throw NotAColumn() }
    func encode(_ value: UInt8) throws { throw NotAColumn() }
    func encode(_ value: UInt16) throws { throw NotAColumn() }
    func encode(_ value: UInt32) throws { throw NotAColumn() }
    func encode(_ value: UInt64) throws { throw NotAColumn() }
    func encode<T: Encodable>(_ value: T) throws { try value.encode(to: self) }
}

/// Reads a row's `init(from:)` fields from the cells an engine read.
private struct CellDecoder<Cells: LedgerCells>: Decoder {
    let cells: Cells
    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        KeyedDecodingContainer(Container(cells: cells))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer { throw NotAColumn() }
    func singleValueContainer() throws -> any SingleValueDecodingContainer { throw NotAColumn() }

    struct Container<Key: CodingKey>: KeyedDecodingContainerProtocol {
        let cells: Cells
        var codingPath: [any CodingKey] { [] }
        var allKeys: [Key] { [] }

        func contains(_ key: Key) -> Bool { true }

        func decodeNil(forKey key: Key) throws -> Bool { try cells.value(key.stringValue, as: .text) == .null }

        func decode(_ type: String.Type, forKey key: Key) throws -> String { try cells[key.stringValue] }
        func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try cells[key.stringValue] }
        func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try cells[key.stringValue] }
        func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try cells[key.stringValue] }
        func decodeIfPresent(_ type: String.Type, forKey key: Key) throws -> String? { try cells[key.stringValue] }
        func decodeIfPresent(_ type: Int64.Type, forKey key: Key) throws -> Int64? { try cells[key.stringValue] }
        func decodeIfPresent(_ type: Int.Type, forKey key: Key) throws -> Int? { try cells[key.stringValue] }
        func decodeIfPresent(_ type: Bool.Type, forKey key: Key) throws -> Bool? { try cells[key.stringValue] }

        func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
            // A time, the commonest field after texts, read directly: no decoder for its one value.
            if T.self == Date.self { return unsafeBitCast(try cells[key.stringValue] as Date, to: T.self) }
            do {
                return try T(from: ValueDecoder(cells: cells, column: key.stringValue))
            } catch is NullColumn {
                throw LedgerRowError(column: key.stringValue)
            } catch is DecodingError {
                throw LedgerRowError(column: key.stringValue)
            }
        }

        func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
            if T.self == Date.self { return unsafeBitCast(try cells[key.stringValue] as Date?, to: T?.self) }
            do {
                return try T(from: ValueDecoder(cells: cells, column: key.stringValue))
            } catch is NullColumn {
                return nil
            } catch is DecodingError {
                throw LedgerRowError(column: key.stringValue)
            }
        }

        func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws
            -> KeyedDecodingContainer<NestedKey>
        { throw NotAColumn() }
        func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer { throw NotAColumn() }
        func superDecoder() throws -> any Decoder { throw NotAColumn() }
        func superDecoder(forKey key: Key) throws -> any Decoder { throw NotAColumn() }
    }
}

/// One column, for a field that decodes itself from one value (an enum from its raw value, a
/// date from seconds since 2001); a NULL throws `NullColumn`.
private struct ValueDecoder<Cells: LedgerCells>: Decoder, SingleValueDecodingContainer {
    let cells: Cells
    let column: String
    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> { throw NotAColumn() }
    func unkeyedContainer() throws -> any UnkeyedDecodingContainer { throw NotAColumn() }
    func singleValueContainer() throws -> any SingleValueDecodingContainer { self }

    private func read(_ kind: LedgerValue.Kind) throws -> LedgerValue {
        let value = try cells.value(column, as: kind)
        if value == .null { throw NullColumn() }
        return value
    }

    func decodeNil() -> Bool { (try? cells.value(column, as: .text)) == .null }
    func decode(_ type: String.Type) throws -> String {
        guard case .text(let text) = try read(.text) else { throw LedgerRowError(column: column) }
        return text
    }
    func decode(_ type: Int64.Type) throws -> Int64 {
        guard case .integer(let integer) = try read(.integer) else { throw LedgerRowError(column: column) }
        return integer
    }
    func decode(_ type: Int.Type) throws -> Int {
        guard case .integer(let integer) = try read(.integer), let value = Int(exactly: integer) else {
            throw LedgerRowError(column: column)
        }
        return value
    }
    func decode(_ type: Bool.Type) throws -> Bool {
        guard case .bool(let bool) = try read(.bool) else { throw LedgerRowError(column: column) }
        return bool
    }
    func decode(_ type: Double.Type) throws -> Double {
        guard case .time(let date) = try read(.time) else { throw LedgerRowError(column: column) }
        return date.timeIntervalSinceReferenceDate
    }
    func decode(_ type: Float.Type) throws -> Float { throw NotAColumn() }
    func decode(_ type: Int8.Type) throws -> Int8 { throw NotAColumn() }
    func decode(_ type: Int16.Type) throws -> Int16 { throw NotAColumn() }
    func decode(_ type: Int32.Type) throws -> Int32 { throw NotAColumn() }
    func decode(_ type: UInt.Type) throws -> UInt { throw NotAColumn() }
    func decode(_ type: UInt8.Type) throws -> UInt8 { throw NotAColumn() }
    func decode(_ type: UInt16.Type) throws -> UInt16 { throw NotAColumn() }
    func decode(_ type: UInt32.Type) throws -> UInt32 { throw NotAColumn() }
    func decode(_ type: UInt64.Type) throws -> UInt64 { throw NotAColumn() }
    func decode<T: Decodable>(_ type: T.Type) throws -> T { try T(from: self) }
}
