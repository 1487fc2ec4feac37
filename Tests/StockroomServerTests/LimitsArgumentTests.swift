import Testing
@testable import StockroomServer

/// Durations and rates as operators write them, and everything else refused without a trap.
@Suite struct LimitsArgumentTests {
    @Test(arguments: [("0s", 0), ("90s", 90), ("5m", 300), ("24h", 86_400), ("7d", 604_800), ("3650d", 315_360_000), ("000012s", 12)])
    func durationsParse(text: String, seconds: Int64) throws {
        #expect(try DurationArgument.parse(text) == .seconds(seconds))
    }

    @Test(arguments: ["", "5", "m", "5x", "-5m", "+5m", "5 m", " 5m", "1.5h", "5mm", "١٢s", "5M", "0x10s", "9999999999999s"])
    func garbageIsNotADuration(text: String) {
        #expect(throws: DurationArgumentError(text: text, kind: .malformed)) { try DurationArgument.parse(text) }
    }

    @Test(arguments: ["3651d", "87601h", "999999999999d", "999999999999h"])
    func durationsPastTenYearsAreRefusedNotOverflowed(text: String) {
        #expect(throws: DurationArgumentError(text: text, kind: .tooLong)) { try DurationArgument.parse(text) }
    }

    @Test func aRefusalSaysHowToWriteIt() {
        #expect(
            DurationArgumentError(text: "soon").description
                == #""soon" is not a duration: write a whole number and s, m, h or d, such as 0s, 5m, 24h"#)
        #expect(DurationArgumentError(text: "9999d", kind: .tooLong).description == #""9999d" is longer than 3650d"#)
    }

    @Test func durationsFormatInTheirLargestWholeUnit() {
        #expect(DurationArgument.format(.seconds(3600)) == "1h")
        #expect(DurationArgument.format(.seconds(86_400)) == "24h")
        #expect(DurationArgument.format(.seconds(7 * 86_400)) == "7d")
        #expect(DurationArgument.format(.seconds(300)) == "5m")
        #expect(DurationArgument.format(.seconds(90)) == "90s")
        #expect(DurationArgument.format(.zero) == "0s")
    }

    @Test func ratesParse() throws {
        #expect(try UpstreamRate.parse("30/m") == UpstreamRate(requests: 30, per: .seconds(60)))
        #expect(try UpstreamRate.parse("100/h") == UpstreamRate(requests: 100, per: .seconds(3600)))
        #expect(try UpstreamRate.parse("10/30s") == UpstreamRate(requests: 10, per: .seconds(30)))
        #expect(try UpstreamRate.parse("off") == nil)
        #expect(UpstreamRate.default.description == "30/m")
        #expect(try UpstreamRate.parse("10/30s")?.description == "10/30s")
    }

    @Test(arguments: ["", "30", "30/", "/m", "0/m", "-1/m", "30/0s", "30/x", "30/m/s", "99999999/m", "30/3651d", "thirty/m"])
    func garbageIsNotARate(text: String) {
        #expect(throws: DurationArgumentError(text: text, kind: .rate)) { try UpstreamRate.parse(text) }
    }
}
