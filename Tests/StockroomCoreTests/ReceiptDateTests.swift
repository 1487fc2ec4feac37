import Foundation
import Testing
@testable import StockroomCore

/// An app receipt's dates read directly give the very time Foundation's ISO 8601 parser gives,
/// and whatever the direct reading refuses is Foundation's to decide.
@Suite struct ReceiptDateTests {
    static func direct(_ text: String) -> Date? {
        var text = text
        return text.withUTF8(ReceiptDate.utc)
    }

    @Test func readsReceiptDatesAsFoundationDoes() throws {
        var generator = SystemRandomNumberGenerator()
        var seconds: [Int64] = [
            0, 59, 86_399, 86_400, 951_782_400, 951_868_799, 1_709_164_800, 2_147_483_648, 4_102_444_799, 253_402_300_799,
        ]
        for _ in 0..<20_000 { seconds.append(Int64.random(in: 0..<253_402_300_800, using: &generator)) }
        for second in seconds {
            let date = Date(timeIntervalSince1970: TimeInterval(second))
            let text = date.ISO8601Format()
            let read = try #require(Self.direct(text), "\(text)")
            #expect(read == date, "\(text)")
            #expect(read == (try Date(text, strategy: .iso8601)), "\(text)")
        }
    }

    @Test func leavesAnyOtherFormToFoundation() {
        let others = [
            "2023-02-29T00:00:00Z", "2026-04-31T00:00:00Z", "2026-11-22T24:00:00Z", "2026-11-22T23:59:60Z", "2026-11-22T05:43:23+01:00",
            "2026-11-22t05:43:23z", "1969-12-31T23:59:59Z", "2026-11-22T05:43:23.5Z", "2026-13-01T00:00:00Z", "2026-00-10T00:00:00Z",
            "2026-11-00T00:00:00Z", "2026-11-2205:43:23Z", "+026-11-22T05:43:23Z", "2026-1a-22T05:43:23Z", "", "2026-11-22",
        ]
        for text in others {
            #expect(Self.direct(text) == nil, "\(text)")
            #expect(ReceiptDate.parse(text) == (try? Date(text, strategy: .iso8601)), "\(text)")
        }
        #expect(Self.direct("2024-02-29T12:00:00Z") == Date(timeIntervalSince1970: 1_709_208_000), "a leap day")
    }
}
