import Testing
@testable import StockroomCore

/// The nesting check run before Foundation parses outside JSON.
@Suite struct JSONNestingTests {
    @Test func depthCountsBracketsOutsideStringsOnly() {
        #expect(JSONNesting.isShallow(Array(#"{"a": [1, {"b": [2]}]}"#.utf8), limit: 4))
        #expect(!JSONNesting.isShallow(Array(#"{"a": [1, {"b": [[2]]}]}"#.utf8), limit: 4))
        #expect(JSONNesting.isShallow(Array(#"{"a": "[[[[[[{{{{{"}"#.utf8), limit: 1), "brackets in a string do not nest")
        #expect(JSONNesting.isShallow(Array(#"{"a": "\"[[[[\\"}"#.utf8), limit: 1), "nor after an escaped quote")
        #expect(!JSONNesting.isShallow(Array(#"{"a": "\\", "b": [[1]]}"#.utf8), limit: 2), "an escaped backslash ends its escape")
        #expect(JSONNesting.isShallow(Array("]]]]".utf8)), "shallow garbage is left to the parser")
    }

    @Test func whatFoundationTrapsOnIsRefused() {
        #expect(!JSONNesting.isShallow(Array(String(repeating: "[", count: 513).utf8)))
        #expect(!JSONNesting.isShallow(Array(String(repeating: "[", count: JSONNesting.limit + 1).utf8)))
        #expect(
            JSONNesting.isShallow(
                Array((String(repeating: "[", count: JSONNesting.limit) + String(repeating: "]", count: JSONNesting.limit)).utf8)))
    }
}
