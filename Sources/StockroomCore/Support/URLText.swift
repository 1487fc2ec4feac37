/// URLs as messages show them: what an operator typed may carry a credential in its user
/// information (`http://KEY:SECRET@host/`), and an error or a log line must never repeat it.
public enum URLText {
    /// `text` with the user information of every `scheme://user:password@host` in it replaced by
    /// `***`; the rest (scheme, host, port, path) is kept, so the message still says which URL.
    public static func redacted(_ text: String) -> String {
        var result = ""
        var rest = Substring(text)
        while let separator = rest.range(of: "://") {
            result += rest[..<separator.upperBound]
            rest = rest[separator.upperBound...]
            // The authority ends at the first /, ? or #; its user information at its last @.
            let authorityEnd = rest.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" || $0 == " " || $0 == "\"" } ?? rest.endIndex
            if let at = rest[..<authorityEnd].lastIndex(of: "@") {
                result += "***"
                rest = rest[at...]
            }
        }
        return result + rest
    }
}
