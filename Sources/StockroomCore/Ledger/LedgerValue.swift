import Foundation

/// A value bound to a statement, or read from a column.
public enum LedgerValue: Sendable, Equatable {
    case null
    case text(String)
    case integer(Int64)
    case bool(Bool)
    case time(Date)

    /// What a column holds, as a record asks for it: SQLite keeps times as text and booleans as
    /// integers, so an engine reads a column as the record's field needs it.
    public enum Kind: Sendable {
        case text, integer, bool, time
    }
}

/// What is bound to a statement and read back from a column.
public protocol LedgerBindable: Sendable {
    /// The kind of value a column holding this type is read as.
    static var ledgerKind: LedgerValue.Kind { get }
    var ledgerValue: LedgerValue { get }
    /// The value a column held; nil when it is not one of these (a NULL, unless `Optional`).
    init?(ledgerValue: LedgerValue)
}

/// One row an engine read, its columns by name.
public protocol LedgerCells {
    /// The value of `column` read as `kind` (`.null` for NULL); throws when there is no such
    /// column or it holds another kind of value.
    func value(_ column: String, as kind: LedgerValue.Kind) throws -> LedgerValue
}

extension LedgerCells {
    /// The value of `column` as the record's field holds it; a NULL in a field that cannot be
    /// nil, or a value the field cannot hold (a state this build does not know), throws.
    public subscript<Value: LedgerBindable>(_ column: String) -> Value {
        get throws {
            guard let value = Value(ledgerValue: try value(column, as: Value.ledgerKind)) else { throw LedgerRowError(column: column) }
            return value
        }
    }
}

/// A column a record needs that the row lacks, or whose value the record cannot hold.
public struct LedgerRowError: Error, Equatable, CustomStringConvertible {
    public var column: String
    public var missing: Bool

    public var description: String {
        missing ? "the ledger's row has no column \(column)" : "the ledger's column \(column) holds a value this build cannot read"
    }

    public init(column: String, missing: Bool = false) {
        self.column = column
        self.missing = missing
    }
}

extension String: LedgerBindable {
    public static var ledgerKind: LedgerValue.Kind { .text }
    public var ledgerValue: LedgerValue { .text(self) }
    public init?(ledgerValue: LedgerValue) {
        guard case .text(let text) = ledgerValue else { return nil }
        self = text
    }
}

extension Int64: LedgerBindable {
    public static var ledgerKind: LedgerValue.Kind { .integer }
    public var ledgerValue: LedgerValue { .integer(self) }
    public init?(ledgerValue: LedgerValue) {
        guard case .integer(let integer) = ledgerValue else { return nil }
        self = integer
    }
}

extension Int: LedgerBindable {
    public static var ledgerKind: LedgerValue.Kind { .integer }
    public var ledgerValue: LedgerValue { .integer(Int64(self)) }
    public init?(ledgerValue: LedgerValue) {
        guard case .integer(let integer) = ledgerValue, let value = Int(exactly: integer) else { return nil }
        self = value
    }
}

extension Bool: LedgerBindable {
    public static var ledgerKind: LedgerValue.Kind { .bool }
    public var ledgerValue: LedgerValue { .bool(self) }
    public init?(ledgerValue: LedgerValue) {
        guard case .bool(let bool) = ledgerValue else { return nil }
        self = bool
    }
}

extension Date: LedgerBindable {
    public static var ledgerKind: LedgerValue.Kind { .time }
    public var ledgerValue: LedgerValue { .time(self) }
    public init?(ledgerValue: LedgerValue) {
        guard case .time(let date) = ledgerValue else { return nil }
        self = date
    }
}

extension Optional: LedgerBindable where Wrapped: LedgerBindable {
    public static var ledgerKind: LedgerValue.Kind { Wrapped.ledgerKind }
    public var ledgerValue: LedgerValue { self?.ledgerValue ?? .null }
    public init?(ledgerValue: LedgerValue) {
        if ledgerValue == .null {
            self = .none
        } else if let value = Wrapped(ledgerValue: ledgerValue) {
            self = .some(value)
        } else {
            return nil
        }
    }
}

extension LedgerBindable where Self: RawRepresentable, RawValue == String {
    public static var ledgerKind: LedgerValue.Kind { .text }
    public var ledgerValue: LedgerValue { .text(rawValue) }
    public init?(ledgerValue: LedgerValue) {
        guard case .text(let text) = ledgerValue else { return nil }
        self.init(rawValue: text)
    }
}

extension FulfilmentState: LedgerBindable {}
extension Fulfilment.ProofKind: LedgerBindable {}
extension DownloadAttempt.Outcome: LedgerBindable {}
extension WebhookDelivery.Status: LedgerBindable {}
extension PendingProof.Status: LedgerBindable {}
extension ServerCall.Kind: LedgerBindable {}
extension ServerCall.Status: LedgerBindable {}
extension StoreEnvironment: LedgerBindable {}
