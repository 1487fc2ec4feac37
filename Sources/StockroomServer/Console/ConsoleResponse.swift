import Foundation
import HTTPTypes
import Hummingbird
import StockroomCore

/// A console response: an HTML page in the console's layout, or a redirect, always with the
/// console's security headers (no scripts, no framing, no caching, no referrer).
struct ConsoleResponse: Sendable {
    var status: HTTPResponse.Status
    var headers: HTTPFields
    var body: String

    /// The page `body` in the layout: navigation and a sign-out form when signed in.
    static func page(title: String, body: String, session: ConsoleSession?, status: HTTPResponse.Status = .ok) -> ConsoleResponse {
        var html = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        html += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        html += "<title>\(HTML.escape(title)) · Stockroom console</title>\n<style>\(ConsoleStyle.css)</style>\n</head>\n<body>\n"
        html += "<header><a class=\"brand\" href=\"/console\">Stockroom</a>"
        if let session {
            html += "<nav><a href=\"/console\">Dashboard</a> <a href=\"/console/fulfilments\">Fulfilments</a>"
            html += " <a href=\"/console/webhooks\">Webhooks</a></nav>"
            html +=
                """
                <form method=\"post\" action=\"/console/logout\" class=\"inline\">\(csrfField(session))<button type=\"submit\">Sign \
                out</button></form>
                """
        }
        html += "</header>\n<main>\n\(body)</main>\n</body>\n</html>\n"
        return ConsoleResponse(status: status, headers: securityHeaders(contentType: "text/html; charset=utf-8"), body: html)
    }

    /// 303 See Other to `location` (a console path), with `cookies` set.
    static func redirect(to location: String, cookies: [String] = []) -> ConsoleResponse {
        var headers = securityHeaders(contentType: "text/html; charset=utf-8")
        headers[.location] = location
        for cookie in cookies { headers.append(HTTPField(name: .setCookie, value: cookie)) }
        return ConsoleResponse(
            status: .seeOther, headers: headers, body: "<!DOCTYPE html>\n<a href=\"\(HTML.escape(location))\">Continue</a>\n")
    }

    /// The hidden field that carries the session's CSRF token in every form.
    static func csrfField(_ session: ConsoleSession) -> String {
        "<input type=\"hidden\" name=\"csrf\" value=\"\(HTML.escape(session.csrfToken))\">"
    }

    /// What every console response carries.
    static func securityHeaders(contentType: String) -> HTTPFields {
        [
            .contentType: contentType,
            .contentSecurityPolicy: ConsoleStyle.contentSecurityPolicy,
            .xFrameOptions: "DENY",
            .cacheControl: "no-store",
            .referrerPolicy: "no-referrer",
            .xContentTypeOptions: "nosniff",
        ]
    }

    var response: Response {
        Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: body)))
    }
}

/// The console's one stylesheet, inline, allowed by its hash: the policy allows no script at all.
enum ConsoleStyle {
    static let css = """
        body{font:15px/1.45 system-ui,sans-serif;margin:0;color:#1d2330;background:#f5f6f8}
        header{display:flex;gap:1.5em;align-items:center;background:#1d2330;color:#fff;padding:.6em 1.5em}
        header a{color:#fff;text-decoration:none}.brand{font-weight:700}nav a{margin-right:1em}
        header form{margin-left:auto}main{padding:1.2em 1.5em;max-width:1200px}
        h1{font-size:1.4em;margin:.2em 0 .6em}h2{font-size:1.1em;margin:1.2em 0 .4em}
        .grid{display:grid;grid-template-columns:repeat(auto-fit,minmax(460px,1fr));gap:1em}
        .card{background:#fff;border:1px solid #dde1e7;border-radius:6px;padding:.8em 1em}
        table{border-collapse:collapse;width:100%;background:#fff}th,td{text-align:left;padding:.3em .6em;border-bottom:1px solid #e4e7ec}
        th{font-weight:600;background:#eef0f3}td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
        .error{color:#a61b1b;font-weight:600}.flash{background:#e7f4ea;border:1px solid #9fd1ab;padding:.5em .8em;border-radius:4px}
        .state{display:inline-block;padding:0 .5em;border-radius:3px;background:#e4e7ec;font-size:.9em}
        .state-revoked,.state-rejected{background:#f6dada}.state-acknowledged,.state-delivered{background:#dcefe0}
        form.inline{display:inline}form.filters{display:flex;flex-wrap:wrap;gap:.6em;align-items:end;margin-bottom:1em}
        label{display:flex;flex-direction:column;font-size:.85em}input,select,button{font:inherit;padding:.25em .4em}
        .actions{display:flex;flex-wrap:wrap;gap:1em;margin:1em 0}.actions form{background:#fff;border:1px solid #dde1e7;padding:.6em;\
        border-radius:6px}
        .muted{color:#5c6573}code{font-size:.9em;word-break:break-all}svg text{font-size:11px;fill:#3a4250}
        svg.chart{display:block;width:100%;height:auto;margin:.3em 0}
        """
    /// No scripts, no plugins, no framing; styles only from the inline sheet above.
    static let contentSecurityPolicy =
        "default-src 'none'; style-src 'sha256-\(Data(SHA256.hash(Array(css.utf8))).base64EncodedString())'; img-src 'self'; "
        + "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
}

extension HTTPField.Name {
    static let xFrameOptions = Self("X-Frame-Options")!
    static let referrerPolicy = Self("Referrer-Policy")!
}
