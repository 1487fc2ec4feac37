import Foundation

/// JSON from the server, or read back from a copy of it, decoded only when it nests no deeper
/// than `JSONNesting.limit`: Foundation traps on input nested past 512, so one hostile or broken
/// answer would otherwise stop the app.
enum ServerJSON {
    static func decode<Value: Decodable>(_ type: Value.Type, from data: Data) -> Value? {
        guard JSONNesting.isShallow(data) else { return nil }
        return try? JSONDecoder().decode(type, from: data)
    }
}
