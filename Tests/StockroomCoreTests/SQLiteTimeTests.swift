import Foundation
import GRDB
import Testing
@testable import StockroomSQLite

/// The ledger writes times as GRDB's own `DateFormatter` does, so rows written by either compare
/// and sort as text the same way: the same text, to the character, over the dates a ledger holds.
@Suite struct SQLiteTimeTests {
    @Test func writesTimesAsGRDBDoes() {
        var generator = SystemRandomNumberGenerator()
        var dates = [0, 0.0005, 0.9999, 59.999, 86_399.9995, 951_782_400.5, 1_800_000_000.001, 1_795_588_443.054, 4_102_444_799.9999]
            .map(Date.init(timeIntervalSince1970:))
        for _ in 0..<20_000 {
            // Whole milliseconds (as times read back from the ledger are) and arbitrary fractions.
            let milliseconds = Double(Int64.random(in: 0..<7_258_118_400_000, using: &generator))
            dates.append(Date(timeIntervalSince1970: milliseconds / 1000))
            dates.append(Date(timeIntervalSince1970: Double.random(in: 0..<7_258_118_400, using: &generator)))
        }
        for date in dates {
            #expect(SQLiteTime.databaseValue(date) == date.databaseValue, "\(date.timeIntervalSince1970)")
        }
    }

    @Test func leavesTimesOutsideItsRangeToGRDB() {
        for seconds in [-1.5, -86_400 * 365.25 * 100, 253_402_300_800.0, 300_000_000_000.0] {
            let date = Date(timeIntervalSince1970: seconds)
            #expect(SQLiteTime.databaseValue(date) == date.databaseValue)
        }
    }
}
