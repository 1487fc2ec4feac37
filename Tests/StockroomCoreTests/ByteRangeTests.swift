import HTTPTypes
import Testing
@testable import StockroomCore

@Suite struct ByteRangeTests {
    @Test func parsesTheThreeFormsOfRangeSpec() {
        #expect(ByteRangeHeader.parse("bytes=0-99") == [.bounded(first: 0, last: 99)])
        #expect(ByteRangeHeader.parse("bytes=100-") == [.from(first: 100)])
        #expect(ByteRangeHeader.parse("bytes=-500") == [.suffix(length: 500)])
        #expect(ByteRangeHeader.parse("Bytes = 0-1 , ,-2") == nil)  // no white space around "="
        #expect(ByteRangeHeader.parse("bytes=0-1, ,-2") == [.bounded(first: 0, last: 1), .suffix(length: 2)])
    }

    @Test func invalidRangeFieldsAreIgnored() {
        for field in ["bytes=5-1", "bytes=", "bytes=a-b", "items=0-1", "bytes=0-1-2", "bytes=--1", "0-1", "bytes=-"] {
            #expect(ByteRangeHeader.parse(field) == nil, "\(field)")
        }
    }

    @Test func hugeNumbersSaturateInsteadOfOverflowing() {
        #expect(ByteRangeHeader.parse("bytes=0-99999999999999999999999") == [.bounded(first: 0, last: .max)])
        #expect(ByteRangeSpec.bounded(first: 0, last: .max).resolve(size: 10) == 0...9)
        #expect(ByteRangeSpec.from(first: .max).resolve(size: 10) == nil)
    }

    @Test func resolvesAgainstTheFileSize() {
        #expect(ByteRangeSpec.bounded(first: 0, last: 999).resolve(size: 10) == 0...9)
        #expect(ByteRangeSpec.from(first: 10).resolve(size: 10) == nil)
        #expect(ByteRangeSpec.suffix(length: 3).resolve(size: 10) == 7...9)
        #expect(ByteRangeSpec.suffix(length: 30).resolve(size: 10) == 0...9)
        #expect(ByteRangeSpec.suffix(length: 0).resolve(size: 10) == nil)
        #expect(ByteRangeSpec.suffix(length: 1).resolve(size: 0) == nil)
    }

    @Test func planFollowsIfRangeOnlyForTheStrongETag() {
        let representation = ContentRepresentation(path: "a", size: 100, sha256: String(repeating: "ab", count: 32), contentType: "x")
        func plan(_ fields: HTTPFields) -> ContentPlan { ContentPlan(fields: fields, representation: representation) }
        #expect(plan([:]) == .whole)
        #expect(plan([.range: "bytes=10-19"]) == .partial(10...19))
        #expect(plan([.range: "bytes=10-19", .ifRange: representation.etag]) == .partial(10...19))
        #expect(plan([.range: "bytes=10-19", .ifRange: "W/" + representation.etag]) == .whole)
        #expect(plan([.range: "bytes=10-19", .ifRange: "\"other\""]) == .whole)
        #expect(plan([.range: "bytes=10-19", .ifRange: "Sun, 22 Nov 2026 05:00:00 GMT"]) == .whole)
        #expect(plan([.range: "bytes=100-"]) == .unsatisfiable)
        #expect(plan([.range: "bytes=0-1,5-6"]) == .whole)
        #expect(plan([.range: "bytes=200-300,400-"]) == .unsatisfiable)
    }
}
