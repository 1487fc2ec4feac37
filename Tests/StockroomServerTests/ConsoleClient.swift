import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting

/// A browser's side of the console for the router-level tests: signs in, keeps the session
/// cookie, reads the CSRF token from a page, posts forms.
struct ConsoleClient: Sendable {
    let client: any TestClientProtocol
    /// `stockroom_console=…`, as the browser sends it back.
    var cookie: String?

    init(_ client: any TestClientProtocol, cookie: String? = nil) {
        self.client = client
        self.cookie = cookie
    }

    /// Posts the sign-in form; keeps the session cookie when one is set.
    mutating func signIn(token: String) async throws -> TestResponse {
        let response = try await post("/console/login", form: ["token": token])
        if let set = response.headers[.setCookie], let pair = set.split(separator: ";").first { cookie = String(pair) }
        return response
    }

    func get(_ uri: String, headers: HTTPFields = [:]) async throws -> TestResponse {
        var headers = headers
        if let cookie { headers[.cookie] = cookie }
        return try await client.execute(uri: uri, method: .get, headers: headers)
    }

    /// Posts `form` url-encoded (fields in the order given).
    func post(_ uri: String, form: KeyValuePairs<String, String>, headers: HTTPFields = [:]) async throws -> TestResponse {
        try await post(uri, body: Self.encode(form), headers: headers)
    }

    func post(_ uri: String, body: String, contentType: String = "application/x-www-form-urlencoded", headers: HTTPFields = [:])
        async throws -> TestResponse
    {
        var headers = headers
        headers[.contentType] = contentType
        if let cookie { headers[.cookie] = cookie }
        return try await client.execute(uri: uri, method: .post, headers: headers, body: ByteBuffer(string: body))
    }

    /// The CSRF token in the hidden field of the page at `uri`.
    func csrfToken(on uri: String = "/console") async throws -> String {
        let page = String(buffer: try await get(uri).body)
        guard let range = page.range(of: #"name="csrf" value="([0-9a-f]+)""#, options: .regularExpression) else {
            throw Missing(what: "csrf field on \(uri)")
        }
        return String(page[range].dropFirst(#"name="csrf" value=""#.count).dropLast())
    }

    static func encode(_ form: KeyValuePairs<String, String>) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return form.map { "\($0.key)=\($0.value.addingPercentEncoding(withAllowedCharacters: allowed) ?? "")" }.joined(separator: "&")
    }

    struct Missing: Error, CustomStringConvertible {
        let what: String
        var description: String { "missing: \(what)" }
    }
}
