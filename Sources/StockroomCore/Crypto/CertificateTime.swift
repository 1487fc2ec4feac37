import Foundation

/// A moment as OpenSSL takes it (`time_t` seconds), within the years certificates can express.
///
/// Dates reach OpenSSL from outside (a JWS `signedDate`, a receipt's creation date), so the
/// conversion refuses a NaN, an infinity or a year past 9999 instead of trapping in `time_t(_:)`.
public enum CertificateTime {
    /// 0001-01-01T00:00:00Z: the earliest GeneralizedTime.
    public static let earliest: Int64 = -62_135_596_800
    /// 9999-12-31T23:59:59Z: the latest GeneralizedTime (RFC 5280 §4.1.2.5).
    public static let latest: Int64 = 253_402_300_799

    /// Whole seconds since 1970 for `date`, or nil when OpenSSL cannot represent it.
    public static func seconds(_ date: Date) -> time_t? {
        let interval = date.timeIntervalSince1970.rounded(.down)
        guard interval.isFinite, interval >= Double(earliest), interval <= Double(latest),
            let seconds = Int64(exactly: interval)
        else { return nil }
        return time_t(exactly: seconds)
    }
}
