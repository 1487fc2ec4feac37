import Foundation

/// Server-rendered SVG charts: plain shapes with presentation attributes (no script, no style
/// attribute the policy would block), a `<title>` per mark for a hover label, and the figures
/// repeated in an accessible label.
enum ConsoleChart {
    /// One series of a bar chart: a value per slot.
    struct Series {
        let name: String
        let color: String
        let values: [Double]
    }

    /// Vertical bars per slot, the series stacked; `labels` name the slots (every `labelEvery`th shown).
    static func bars(
        id: String, title: String, labels: [String], series: [Series], labelEvery: Int = 6, format: (Double) -> String,
        width: Int = 560, height: Int = 200
    ) -> String {
        let top = 22.0, bottom = 22.0, left = 8.0, right = 8.0
        let plotHeight = Double(height) - top - bottom
        let slotWidth = (Double(width) - left - right) / Double(max(labels.count, 1))
        let totals = labels.indices.map { slot in series.reduce(0.0) { $0 + max(0, $1.values[safe: slot] ?? 0) } }
        let peak = max(totals.max() ?? 0, Double.leastNonzeroMagnitude)
        var svg = "<svg id=\"\(HTML.escape(id))\" class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 \(width) \(height)\" "
        svg +=
            """
            width=\"\(width)\" height=\"\(height)\" role=\"img\" \
            aria-label=\"\(HTML.escape(title))\">\n<title>\(HTML.escape(title))</title>\n
            """
        svg += "<text x=\"\(left)\" y=\"14\">peak \(HTML.escape(totals.max() ?? 0 > 0 ? format(peak) : "none"))</text>\n"
        var legendX = Double(width) - right
        for entry in series.reversed() {
            legendX -= Double(entry.name.count) * 6.5 + 22
            svg += "<rect x=\(quote(legendX)) y=\"5\" width=\"10\" height=\"10\" fill=\"\(entry.color)\"/>"
            svg += "<text x=\(quote(legendX + 14)) y=\"14\">\(HTML.escape(entry.name))</text>\n"
        }
        svg +=
            """
            <line x1=\(quote(left)) y1=\(quote(top + plotHeight)) x2=\(quote(Double(width) - right)) y2=\(quote(top + plotHeight)) \
            stroke=\"#9aa3b0\"/>\n
            """
        for (slot, label) in labels.enumerated() {
            let x = left + Double(slot) * slotWidth
            var base = top + plotHeight
            for entry in series {
                let value = max(0, entry.values[safe: slot] ?? 0)
                guard value > 0 else { continue }
                let barHeight = max(1, value / peak * plotHeight)
                base -= barHeight
                svg +=
                    """
                    <rect class=\"bar\" data-series=\"\(HTML.escape(entry.name))\" data-value=\"\(HTML.escape(format(value)))\" \
                    x=\(quote(x + 1)) y=\(quote(base))
                    """
                svg += " width=\(quote(max(1, slotWidth - 2))) height=\(quote(barHeight)) fill=\"\(entry.color)\">"
                svg += "<title>\(HTML.escape(label)): \(HTML.escape(format(value))) \(HTML.escape(entry.name))</title></rect>\n"
            }
            if slot % max(labelEvery, 1) == 0 {
                svg += "<text x=\(quote(x + 1)) y=\(quote(Double(height) - 6))>\(HTML.escape(label))</text>\n"
            }
        }
        return svg + "</svg>\n"
    }

    /// Horizontal bars, one per item, longest first as given, with the value's text at the end.
    static func horizontalBars(
        id: String, title: String, items: [(label: String, value: Double, text: String)], color: String, width: Int = 560
    ) -> String {
        let rowHeight = 22.0, labelWidth = 250.0, textWidth = 110.0
        let height = Int(max(1, Double(items.count)) * rowHeight + 8)
        let peak = max(items.map(\.value).max() ?? 0, Double.leastNonzeroMagnitude)
        var svg = "<svg id=\"\(HTML.escape(id))\" class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 \(width) \(height)\" "
        svg +=
            """
            width=\"\(width)\" height=\"\(height)\" role=\"img\" \
            aria-label=\"\(HTML.escape(title))\">\n<title>\(HTML.escape(title))</title>\n
            """
        if items.isEmpty { svg += "<text x=\"4\" y=\"18\">nothing yet</text>\n" }
        for (row, item) in items.enumerated() {
            let y = 4 + Double(row) * rowHeight
            let barWidth = max(item.value > 0 ? 1 : 0, item.value / peak * (Double(width) - labelWidth - textWidth))
            svg +=
                "<text x=\"4\" y=\(quote(y + 14))>\(HTML.escape(item.label.count > 38 ? item.label.prefix(37) + "…" : item.label))</text>"
            svg +=
                """
                <rect class=\"bar\" data-series=\"\(HTML.escape(item.label))\" data-value=\"\(HTML.escape(item.text))\" \
                x=\(quote(labelWidth)) y=\(quote(y + 2))
                """
            svg +=
                """
                 width=\(quote(barWidth)) height=\(quote(rowHeight - 6)) fill=\"\(color)\"><title>\(HTML.escape(item.label)): \
                \(HTML.escape(item.text))</title></rect>
                """
            svg += "<text x=\(quote(labelWidth + barWidth + 6)) y=\(quote(y + 14))>\(HTML.escape(item.text))</text>\n"
        }
        return svg + "</svg>\n"
    }

    /// A coordinate as a quoted attribute value, to one decimal.
    private static func quote(_ value: Double) -> String {
        "\"" + String(format: "%.1f", value.isFinite ? value : 0) + "\""
    }
}

private extension Array {
    /// The element at `index`, or nil outside the array.
    subscript(safe index: Int) -> Element? { indices.contains(index) ? self[index] : nil }
}
