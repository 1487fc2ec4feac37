import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// What the console reads from a request's transport: its cookies, and whether it came over TLS.
enum ConsoleTransport {
    /// The value of cookie `name`, from a `Cookie` header of reasonable size.
    static func cookie(_ name: String, in request: Request) -> String? {
        for header in request.headers[values: .cookie] where header.utf8.count <= 8192 {
            for pair in header.split(separator: ";") {
                let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                if parts.count == 2, parts[0].trimmingCharacters(in: .whitespaces) == name {
                    return parts[1].trimmingCharacters(in: .whitespaces)
                }
            }
        }
        return nil
    }

    /// Whether the browser reached us over HTTPS: Stockroom speaks plain HTTP itself, so only a
    /// trusted proxy (`--trusted-proxy`, the nginx of `deploy/`, as for `X-Forwarded-For`) can say
    /// so, with `X-Forwarded-Proto: https`. A direct client's header is ignored.
    static func isSecure(_ request: Request, fromTrustedProxy: Bool) -> Bool {
        guard fromTrustedProxy else { return false }
        return request.headers[.xForwardedProto]?.lowercased() == "https"
    }
}

extension HTTPField.Name {
    static let xForwardedProto = Self("X-Forwarded-Proto")!
}
