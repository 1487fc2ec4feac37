import Foundation

/// How Stockroom reads JSON that comes from Apple, or claims to: signed payloads, JWS headers and
/// the answers of verifyReceipt and the App Store Server API. A document is refused before it
/// meets a decoder when it nests deeper than `JSONNesting.limit` (Foundation's parser traps past
/// 512) or when an object repeats a key: JSONDecoder keeps the first of two values where
/// Foundation's untyped parser kept the last, so two readers of one document could disagree.
/// Numbers out of range, a boolean for a number and a missing field are refused by the types.
enum UpstreamJSON {
    /// `type` decoded from `bytes`, or nil when they are not such a document.
    static func decode<T: Decodable>(_ type: T.Type, from bytes: some Collection<UInt8>) -> T? {
        guard JSONNesting.isShallow(bytes), !hasDuplicateKey(bytes) else { return nil }
        return try? JSONDecoder().decode(type, from: Data(bytes))
    }

    /// Whether an object in `bytes` names one key twice, comparing keys as decoded (so `"a"` and
    /// `"\u0061"` are the same key). Malformed input that repeats no key passes, for the decoder
    /// to refuse; a key whose escapes cannot be read counts as a repeat.
    static func hasDuplicateKey(_ bytes: some Collection<UInt8>) -> Bool {
        // One set of keys per open object; arrays push nil. A string is a key when it follows
        // `{` or `,` inside an object.
        var scopes: [Set<Key>?] = []
        var expectingKey = false
        var index = bytes.startIndex
        while index != bytes.endIndex {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "{"):
                scopes.append([])
                expectingKey = true
            case UInt8(ascii: "["):
                scopes.append(nil)
                expectingKey = false
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                if !scopes.isEmpty { scopes.removeLast() }
                expectingKey = false
            case UInt8(ascii: ","):
                expectingKey = scopes.last.map { $0 != nil } ?? false
            case UInt8(ascii: "\""):
                // The string runs to the next quote that no backslash escapes.
                var end = bytes.index(after: index)
                var escaped = false
                var hasEscape = false
                while end != bytes.endIndex {
                    let current = bytes[end]
                    if escaped {
                        escaped = false
                    } else if current == UInt8(ascii: "\\") {
                        escaped = true
                        hasEscape = true
                    } else if current == UInt8(ascii: "\"") {
                        break
                    }
                    end = bytes.index(after: end)
                }
                if expectingKey {
                    var key = Array(bytes[bytes.index(after: index)..<end])
                    if hasEscape {
                        guard end != bytes.endIndex, let decoded = try? JSONDecoder().decode(String.self, from: Data(bytes[index...end]))
                        else {
                            return true
                        }
                        key = Array(decoded.utf8)
                    }
                    if scopes[scopes.count - 1]?.insert(Key(bytes: key)).inserted == false { return true }
                }
                expectingKey = false
                guard end != bytes.endIndex else { return false }
                index = end
            default:
                break
            }
            index = bytes.index(after: index)
        }
        return false
    }

    /// A key's bytes, hashed in one call: `[UInt8]` hashes a byte at a time, a tenth of this
    /// check on every signed payload.
    private struct Key: Hashable {
        let bytes: [UInt8]

        func hash(into hasher: inout Hasher) {
            bytes.withUnsafeBytes { hasher.combine(bytes: $0) }
        }
    }
}
