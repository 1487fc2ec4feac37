import Foundation
import Hummingbird
import StockroomCore

/// `/console/fulfilments`: filtered by state, product and creation date, newest first, a page at a time.
extension ConsolePages {
    /// Rows per page.
    static let pageSize = 25

    func list(_ request: Request, session: ConsoleSession) async throws -> ConsoleResponse {
        let parameters = request.uri.queryParameters
        let stateText = parameters.get("state") ?? ""
        let product = parameters.get("product") ?? ""
        let fromText = parameters.get("from") ?? ""
        let toText = parameters.get("to") ?? ""
        var state: FulfilmentState?
        if !stateText.isEmpty {
            guard let parsed = FulfilmentState(rawValue: stateText) else {
                throw ConsoleError.badRequest("There is no state called \"\(stateText)\".")
            }
            state = parsed
        }
        guard product.utf8.count <= 200 else { throw ConsoleError.badRequest("A product ID is at most 200 bytes.") }
        let from = try Self.day(fromText, name: "from")
        // `to` names the last day shown: rows created before the next day's start.
        let to = try Self.day(toText, name: "to").map { toText.utf8.count == 10 ? $0.addingTimeInterval(86_400) : $0 }
        var page = 1
        if let text = parameters.get("page"), !text.isEmpty {
            guard let value = Int(text), (1...FulfilmentPageQuery.maximumPage).contains(value) else {
                throw ConsoleError.badRequest("page must be a whole number from 1 to \(FulfilmentPageQuery.maximumPage).")
            }
            page = value
        }
        let query = FulfilmentPageQuery(
            state: state, productID: product.isEmpty ? nil : product, from: from, to: to, page: page, pageSize: Self.pageSize)
        let result = try await ledger.fulfilmentPage(query)

        let filters: [(String, String?)] = [("state", stateText), ("product", product), ("from", fromText), ("to", toText)]
        var body = "<h1>Fulfilments</h1>\n<form method=\"get\" action=\"/console/fulfilments\" class=\"filters\" id=\"filters\">\n"
        body += "<label>State <select name=\"state\"><option value=\"\">any</option>"
        for option in FulfilmentState.allCases {
            body += "<option\(option == state ? " selected" : "")>\(option.rawValue)</option>"
        }
        body += "</select></label>\n"
        body += "<label>Product <input name=\"product\" value=\"\(HTML.escape(product))\" size=\"32\" maxlength=\"200\"></label>\n"
        body += "<label>Created from <input type=\"date\" name=\"from\" value=\"\(HTML.escape(fromText))\"></label>\n"
        body += "<label>to <input type=\"date\" name=\"to\" value=\"\(HTML.escape(toText))\"></label>\n"
        body += "<button type=\"submit\">Filter</button> <a href=\"/console/fulfilments\">Clear</a>\n</form>\n"
        let pages = max(1, (result.total + Self.pageSize - 1) / Self.pageSize)
        body += "<p class=\"muted\" id=\"count\">\(result.total) matching · page \(page) of \(pages)</p>\n"
        body += "<table id=\"fulfilments\"><tr><th>Transaction</th><th>Product</th><th>State</th><th class=\"num\">Attempts</th>"
        body += "<th class=\"num\">Bytes sent</th><th>Created</th><th>Updated</th></tr>\n"
        for row in result.rows {
            body +=
                """
                <tr data-transaction=\"\(HTML.escape(row.transactionID))\"><td><a \
                href=\"/console/fulfilments/\(HTML.escape(row.transactionID))\">
                """
            body += "\(HTML.escape(row.transactionID))</a></td><td>\(HTML.escape(row.productID))</td>"
            body +=
                """
                <td><span class=\"state state-\(row.state.rawValue)\">\(row.state.rawValue)</span></td><td \
                class=\"num\">\(row.attempts)</td>
                """
            body +=
                "<td class=\"num\">\(HTML.bytes(row.bytesDelivered))</td>"
            body +=
                "<td>\(HTML.time(row.createdAt))</td><td>\(HTML.time(row.updatedAt))</td></tr>\n"
        }
        if result.rows.isEmpty { body += "<tr><td colspan=\"7\" class=\"muted\">No fulfilments match.</td></tr>\n" }
        body += "</table>\n<p class=\"paging\">"
        if page > 1 {
            body += "<a rel=\"prev\" href=\"/console/fulfilments\(HTML.query(filters + [("page", String(page - 1))]))\">← newer</a> "
        }
        if page < pages, page < FulfilmentPageQuery.maximumPage {
            body += "<a rel=\"next\" href=\"/console/fulfilments\(HTML.query(filters + [("page", String(page + 1))]))\">older →</a>"
        }
        body += "</p>\n"
        return .page(title: "Fulfilments", body: body, session: session)
    }

    /// A `YYYY-MM-DD` day (UTC midnight) or a full ISO 8601 time; nil when empty.
    static func day(_ text: String, name: String) throws -> Date? {
        guard !text.isEmpty else { return nil }
        let full = text.utf8.count == 10 ? text + "T00:00:00Z" : text
        guard text.utf8.count <= 40, let date = try? Date(full, strategy: .iso8601) else {
            throw ConsoleError.badRequest("\(name) must be a day (YYYY-MM-DD) or an ISO 8601 time.")
        }
        return date
    }
}
