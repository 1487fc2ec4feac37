import Foundation

/// An app receipt's RFC 3339 dates (`2026-11-22T05:43:23Z`). The form receipts use is read
/// directly (Foundation's parser costs a tenth of reading a receipt); anything else goes to
/// Foundation's ISO 8601 parser, which decides.
enum ReceiptDate {
    static func parse(_ text: String) -> Date? {
        var text = text
        if let date = text.withUTF8(utc) { return date }
        return try? Date(text, strategy: .iso8601)
    }

    /// `YYYY-MM-DDTHH:MM:SSZ` naming a real time from 1970 on; nil for anything else (a day
    /// past its month's end, a leap second, an offset), which the caller leaves to Foundation.
    static func utc(_ bytes: UnsafeBufferPointer<UInt8>) -> Date? {
        guard bytes.count == 20, bytes[4] == UInt8(ascii: "-"), bytes[7] == UInt8(ascii: "-"), bytes[10] == UInt8(ascii: "T"),
            bytes[13] == UInt8(ascii: ":"), bytes[16] == UInt8(ascii: ":"), bytes[19] == UInt8(ascii: "Z")
        else { return nil }
        func number(_ start: Int, _ digits: Int) -> Int? {
            var value = 0
            for index in start..<start + digits {
                let digit = Int(bytes[index]) - Int(UInt8(ascii: "0"))
                guard (0...9).contains(digit) else { return nil }
                value = value * 10 + digit
            }
            return value
        }
        guard let year = number(0, 4), let month = number(5, 2), let day = number(8, 2), let hour = number(11, 2),
            let minute = number(14, 2), let second = number(17, 2), year >= 1970, (1...12).contains(month), hour < 24, minute < 60,
            second < 60, day >= 1, day <= days(inMonth: month, of: year)
        else { return nil }
        let seconds = daysSince1970(year: year, month: month, day: day) * 86_400 + hour * 3600 + minute * 60 + second
        return Date(timeIntervalSince1970: TimeInterval(seconds))
    }

    private static func days(inMonth month: Int, of year: Int) -> Int {
        switch month {
        case 2: year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// Days from 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
    private static func daysSince1970(year: Int, month: Int, day: Int) -> Int {
        let year = month <= 2 ? year - 1 : year
        let era = year / 400
        let yearOfEra = year - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }
}
