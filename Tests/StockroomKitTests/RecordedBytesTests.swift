import Foundation
import Testing
@testable import StockroomKit

/// The server's word on which bytes it recorded as sent, read as a stranger's: what is missing
/// is fetched again, and an answer that cannot be right makes the app fall back to the last byte.
@Suite struct RecordedBytesTests {
    static func missing(_ text: String?, size: Int64 = 100) -> [ClosedRange<Int64>]? {
        RecordedBytes(sentBytes: text).missing(size: size)
    }

    @Test func theGapsAreWhatTheServerDidNotRecord() {
        #expect(Self.missing("0-99") == [])
        #expect(Self.missing("") == [0...99])
        #expect(Self.missing("0-49") == [50...99])
        #expect(Self.missing("10-19,30-99") == [0...9, 20...29])
        #expect(Self.missing("99-99") == [0...98])
    }

    @Test func anAnswerThatCannotBeRightIsNotUsed() {
        for bad in ["0-100", "5-3", "0-9,5-20", "20-30,0-9", "-1-5", "a-b", "0-9,", "1e3-2", String(repeating: "1-1,", count: 70)] {
            #expect(Self.missing(bad) == nil, "\(bad)")
        }
        #expect(Self.missing(nil) == nil, "a server that does not say")
        #expect(Self.missing("0-9", size: 0) == nil)
    }
}
