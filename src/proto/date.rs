//! The `Date` header value (RFC 9110 §5.6.7 IMF-fixdate), formatted from a time the
//! caller reads (the server driver caches it per thread, `http::server::round`).

/// Length of an IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT".
pub(crate) const DATE_LEN: usize = 29;

/// 9999-12-31T23:59:59Z, the last second with a 4-digit year.
const MAX_SECS: u64 = 253_402_300_799;

/// Formats `unix_secs` (seconds since 1970-01-01T00:00:00Z; clamped to year 9999) as an
/// IMF-fixdate.
pub(crate) fn format_http_date(unix_secs: u64) -> [u8; DATE_LEN] {
    const WEEKDAYS: [&[u8; 3]; 7] = [b"Sun", b"Mon", b"Tue", b"Wed", b"Thu", b"Fri", b"Sat"];
    const MONTHS: [&[u8; 3]; 12] = [
        b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov",
        b"Dec",
    ];

    let secs = unix_secs.min(MAX_SECS);
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (hour, min, sec) = (rem / 3600, rem / 60 % 60, rem % 60);
    let (year, month, day) = civil_from_days(days);
    // 1970-01-01 was a Thursday.
    let weekday = ((days + 4) % 7) as usize;

    let mut out = *b"Thu, 01 Jan 1970 00:00:00 GMT";
    out[0..3].copy_from_slice(WEEKDAYS[weekday]);
    put2(&mut out[5..7], day);
    out[8..11].copy_from_slice(MONTHS[(month - 1) as usize]);
    put2(&mut out[12..14], year / 100);
    put2(&mut out[14..16], year % 100);
    put2(&mut out[17..19], hour);
    put2(&mut out[20..22], min);
    put2(&mut out[23..25], sec);
    out
}

fn put2(dst: &mut [u8], n: u64) {
    dst[0] = b'0' + (n / 10) as u8;
    dst[1] = b'0' + (n % 10) as u8;
}

/// Days since 1970-01-01 → (year, month 1-12, day 1-31), proleptic Gregorian calendar
/// (Howard Hinnant's `civil_from_days`, for non-negative day counts).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468; // days since 0000-03-01
    let era = z / 146_097;
    let doe = z - era * 146_097; // [0, 146096]
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // [0, 399]
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // [0, 365]
    let mp = (5 * doy + 2) / 153; // [0, 11], March-based
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fmt(secs: u64) -> String {
        String::from_utf8(format_http_date(secs).to_vec()).unwrap()
    }

    #[test]
    fn known_dates() {
        assert_eq!(fmt(784_111_777), "Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(fmt(0), "Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(fmt(951_782_400), "Tue, 29 Feb 2000 00:00:00 GMT");
        assert_eq!(fmt(951_868_799), "Tue, 29 Feb 2000 23:59:59 GMT");
        assert_eq!(fmt(951_868_800), "Wed, 01 Mar 2000 00:00:00 GMT");
        assert_eq!(fmt(1_234_567_890), "Fri, 13 Feb 2009 23:31:30 GMT");
        assert_eq!(fmt(1_709_164_800), "Thu, 29 Feb 2024 00:00:00 GMT");
        assert_eq!(fmt(2_147_483_647), "Tue, 19 Jan 2038 03:14:07 GMT");
        assert_eq!(fmt(4_107_542_400), "Mon, 01 Mar 2100 00:00:00 GMT"); // 2100: not leap
        assert_eq!(fmt(4_107_542_399), "Sun, 28 Feb 2100 23:59:59 GMT");
        assert_eq!(fmt(946_684_799), "Fri, 31 Dec 1999 23:59:59 GMT");
        assert_eq!(fmt(MAX_SECS), "Fri, 31 Dec 9999 23:59:59 GMT");
        assert_eq!(fmt(u64::MAX), "Fri, 31 Dec 9999 23:59:59 GMT");
    }

    /// Cross-checks the fast path against a naive day-by-day walk.
    #[test]
    fn matches_naive_calendar() {
        let leap = |y: u64| (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
        let (mut y, mut m, mut d) = (1970u64, 1u64, 1u64);
        for days in 0..(200 * 366) {
            assert_eq!(civil_from_days(days), (y, m, d), "day {days}");
            let month_len = match m {
                2 if leap(y) => 29,
                2 => 28,
                4 | 6 | 9 | 11 => 30,
                _ => 31,
            };
            d += 1;
            if d > month_len {
                d = 1;
                m += 1;
                if m > 12 {
                    m = 1;
                    y += 1;
                }
            }
        }
    }
}
