import Foundation
import StockroomCore

/// Checks the values `NginxSite` writes into nginx's configuration: each must be one token
/// nginx reads literally, so none can close a directive (`;`), open a block, start a comment or
/// name a variable (`$`).
enum NginxSiteSetting {
    /// `ADDR:PORT`, `[v6]:PORT`, `*:PORT` or `PORT`.
    static func listen(_ text: String) throws(NginxSiteError) -> String {
        let error = NginxSiteError.value(flag: "--listen", text)
        guard (1...80).contains(text.utf8.count) else { throw error }
        let port: Substring
        if let colon = text.lastIndex(of: ":") {
            let host = text[..<colon]
            guard !host.isEmpty, host.utf8.allSatisfy(isHostByte) else { throw error }
            if host.contains(":") && !(host.hasPrefix("[") && host.hasSuffix("]")) { throw error }
            port = text[text.index(after: colon)...]
        } else {
            port = text[...]
        }
        guard (1...5).contains(port.utf8.count), port.utf8.allSatisfy(isDigit), let number = Int(port), (1...65535).contains(number) else {
            throw error
        }
        return text
    }

    /// `http(s)://host[:port][/]` → the scheme and `host:port` of nginx's `upstream`.
    static func upstream(_ url: String) throws(NginxSiteError) -> (scheme: String, authority: String) {
        let refusal = NginxSiteError.value(flag: "--stockroom", url)
        guard url.utf8.count <= 200 else { throw refusal }
        let scheme = url.hasPrefix("https://") ? "https" : "http"
        guard url.hasPrefix(scheme + "://") else { throw refusal }
        var rest = url.dropFirst(scheme.count + 3)
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        guard !rest.isEmpty, !rest.contains("/"), rest.utf8.allSatisfy(isHostByte) else { throw refusal }
        let hasPort = rest.hasPrefix("[") ? rest.contains("]:") : rest.contains(":")
        let authority = hasPort ? String(rest) : "\(rest):\(scheme == "https" ? 443 : 80)"
        do {
            _ = try listen(authority)  // the same shape: a host and a valid port
        } catch {
            throw refusal
        }
        return (scheme, authority)
    }

    /// An absolute path without spaces, quotes or nginx syntax; a trailing `/` is dropped.
    static func absolutePath(_ path: String, flag: String) throws(NginxSiteError) -> String {
        var trimmed = path
        while trimmed.count > 1 && trimmed.hasSuffix("/") { trimmed.removeLast() }
        guard trimmed.hasPrefix("/"), (1...1024).contains(trimmed.utf8.count), trimmed.utf8.allSatisfy(isPathByte) else {
            throw .value(flag: flag, path)
        }
        return trimmed
    }

    private static func isDigit(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
    }

    private static func isHostByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
            UInt8(ascii: "."), UInt8(ascii: "-"), UInt8(ascii: ":"), UInt8(ascii: "["), UInt8(ascii: "]"), UInt8(ascii: "*"):
            true
        default: false
        }
    }

    private static func isPathByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
            UInt8(ascii: "/"), UInt8(ascii: "."), UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "+"), UInt8(ascii: ","),
            UInt8(ascii: "@"), UInt8(ascii: "="), UInt8(ascii: "~"), UInt8(ascii: ":"):
            true
        default: false
        }
    }
}

/// A value `stockroom deploy nginx` cannot write into nginx's configuration.
public enum NginxSiteError: Error, Equatable, CustomStringConvertible {
    case value(flag: String, String)

    public var description: String {
        switch self {
        case .value(let flag, let text):
            switch flag {
            case "--listen": "--listen must be ADDR:PORT, [IPv6]:PORT or PORT, not \"\(text)\""
            case "--stockroom": "--stockroom must be http(s)://host:port with no path, not \"\(URLText.redacted(text))\""
            case "--offload-prefix": OffloadSettingError.prefix(text).description
            default: "\(flag) must be an absolute path of letters, digits and / . - _ + , @ = ~ : only, not \"\(text)\""
            }
        }
    }
}
