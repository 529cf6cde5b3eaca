//! Rates, times and sizes written the way `tc` writes them, parsed with errors that quote the
//! value and say what would have been accepted.
//!
//! Conventions (from tc(8), "PARAMETERS"): rates are bits per second with `bit kbit mbit gbit
//! tbit` (SI, 1000) or bytes per second with `bps kbps mbps gbps`; IEC `kibit mibit gibit` are
//! powers of 1024. Sizes are bytes, with `k kb m mb g gb` as powers of 1024 and `kbit mbit gbit`
//! as bits, as in tc. Times take `s sec ms msec us usec ns nsec` and a fractional value.
//!
//! One deliberate difference from tc: a time with no unit is refused, because tc's reading
//! (microseconds) silently turns `--rtt 40` into 40 µs.

use std::fmt;

use crate::time::Duration;

/// A parse failure; the message quotes the value and gives examples of accepted ones.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnitError {
    pub value: String,
    pub expected: &'static str,
}

impl fmt::Display for UnitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cannot read '{}' (try {})", self.value, self.expected)
    }
}

impl std::error::Error for UnitError {}

/// A link capacity in bits per second.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Rate {
    pub bits_per_sec: u64,
}

impl Rate {
    pub const fn from_bits_per_sec(bits_per_sec: u64) -> Rate {
        Rate { bits_per_sec }
    }
    pub const fn from_mbit(mbit: u64) -> Rate {
        Rate {
            bits_per_sec: mbit * 1_000_000,
        }
    }

    /// Time to serialize `bytes` at this rate, exact to the nanosecond (rounded up so that a
    /// link never runs faster than configured). A zero rate never finishes.
    pub fn serialization_time(self, bytes: u64) -> Duration {
        if self.bits_per_sec == 0 {
            return Duration::MAX;
        }
        // ns = bytes * 8 * 1e9 / bits_per_sec. Any packet (up to 2.3 GB) fits the numerator in
        // 64 bits, and a 64-bit division costs a fraction of a 128-bit one on every packet of
        // every rated link; larger counts take 128 bits so that nothing can overflow.
        match bytes.checked_mul(8 * 1_000_000_000) {
            Some(num) => Duration::from_nanos(num.div_ceil(self.bits_per_sec)),
            None => {
                let ns =
                    (u128::from(bytes) * 8 * 1_000_000_000).div_ceil(u128::from(self.bits_per_sec));
                Duration::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX))
            }
        }
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.bits_per_sec;
        if b >= 1_000_000_000 && b.is_multiple_of(1_000_000) {
            write!(f, "{}gbit", fmt_frac(b, 1_000_000_000))
        } else if b >= 1_000_000 && b.is_multiple_of(1_000) {
            write!(f, "{}mbit", fmt_frac(b, 1_000_000))
        } else if b >= 1_000 {
            write!(f, "{}kbit", fmt_frac(b, 1_000))
        } else {
            write!(f, "{b}bit")
        }
    }
}

fn fmt_frac(v: u64, unit: u64) -> String {
    if v.is_multiple_of(unit) {
        (v / unit).to_string()
    } else {
        let s = format!("{:.3}", v as f64 / unit as f64);
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// Splits `"10.5mbit"` into `(10.5, "mbit")`; the unit is lower-cased.
fn split_number(s: &str) -> Option<(f64, String)> {
    let s = s.trim();
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    if end == 0 {
        return None;
    }
    let n: f64 = s[..end].parse().ok()?;
    if !n.is_finite() || n < 0.0 {
        return None;
    }
    Some((n, s[end..].trim().to_ascii_lowercase()))
}

const RATE_EXAMPLES: &str = "10mbit, 500kbit, 1gbit";

/// Parses a tc rate: `10mbit`, `500kbit`, `1gbit`, `1.5mbit`, `125kbps` (bytes per second).
pub fn parse_rate(s: &str) -> Result<Rate, UnitError> {
    let err = || UnitError {
        value: s.to_string(),
        expected: RATE_EXAMPLES,
    };
    let (n, unit) = split_number(s).ok_or_else(err)?;
    let mult: f64 = match unit.as_str() {
        "bit" => 1.0,
        "kbit" => 1e3,
        "mbit" => 1e6,
        "gbit" => 1e9,
        "tbit" => 1e12,
        "kibit" => 1024.0,
        "mibit" => 1024.0 * 1024.0,
        "gibit" => 1024.0 * 1024.0 * 1024.0,
        "bps" => 8.0,
        "kbps" => 8e3,
        "mbps" => 8e6,
        "gbps" => 8e9,
        _ => return Err(err()),
    };
    let bits = (n * mult).round();
    if !(1.0..=1e13).contains(&bits) {
        return Err(err());
    }
    Ok(Rate {
        bits_per_sec: bits as u64,
    })
}

const TIME_EXAMPLES: &str = "20ms, 500us, 1.5s";

/// Parses a time: `20ms`, `500us`, `1.5s`, `100ns`. A bare number is refused (see module docs).
pub fn parse_time(s: &str) -> Result<Duration, UnitError> {
    let err = || UnitError {
        value: s.to_string(),
        expected: TIME_EXAMPLES,
    };
    let (n, unit) = split_number(s).ok_or_else(err)?;
    let ns_per: f64 = match unit.as_str() {
        "s" | "sec" | "secs" => 1e9,
        "ms" | "msec" | "msecs" => 1e6,
        "us" | "usec" | "usecs" | "µs" => 1e3,
        "ns" | "nsec" | "nsecs" => 1.0,
        _ => return Err(err()),
    };
    let ns = (n * ns_per).round();
    if ns > 1e18 {
        return Err(err());
    }
    Ok(Duration::from_nanos(ns as u64))
}

const SIZE_EXAMPLES: &str = "1500, 150kb, 1mb, 64kbit";

/// Parses a tc size in bytes: `1500`, `1500b`, `150kb` (×1024), `1mb`, `64kbit` (bits).
pub fn parse_size(s: &str) -> Result<u64, UnitError> {
    let err = || UnitError {
        value: s.to_string(),
        expected: SIZE_EXAMPLES,
    };
    let (n, unit) = split_number(s).ok_or_else(err)?;
    let bytes_per: f64 = match unit.as_str() {
        "" | "b" => 1.0,
        "k" | "kb" => 1024.0,
        "m" | "mb" => 1024.0 * 1024.0,
        "g" | "gb" => 1024.0 * 1024.0 * 1024.0,
        "kbit" => 1024.0 / 8.0,
        "mbit" => 1024.0 * 1024.0 / 8.0,
        "gbit" => 1024.0 * 1024.0 * 1024.0 / 8.0,
        _ => return Err(err()),
    };
    let bytes = (n * bytes_per).round();
    if bytes > 1e15 {
        return Err(err());
    }
    Ok(bytes as u64)
}

/// Formats a duration the way people read latency: `40ms`, `1.5s`, `250us`.
pub fn format_duration(d: Duration) -> String {
    let ns = crate::time::duration_nanos(d);
    if ns >= 1_000_000_000 {
        format!("{}s", fmt_frac(ns, 1_000_000_000))
    } else if ns >= 1_000_000 {
        format!("{}ms", fmt_frac(ns, 1_000_000))
    } else if ns >= 1_000 {
        format!("{}us", fmt_frac(ns, 1_000))
    } else {
        format!("{ns}ns")
    }
}

/// Formats a duration in the largest unit that shows it exactly (`5ms`, `1500us`, `7ns`), so
/// that [`parse_time`] reads back the same value: for specs printed to be parsed again.
pub fn format_duration_exact(d: Duration) -> String {
    let ns = crate::time::duration_nanos(d);
    for (unit, per) in [("s", 1_000_000_000), ("ms", 1_000_000), ("us", 1_000)] {
        if ns.is_multiple_of(per) {
            return format!("{}{unit}", ns / per);
        }
    }
    format!("{ns}ns")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_follow_tc_units() {
        assert_eq!(parse_rate("10mbit").unwrap().bits_per_sec, 10_000_000);
        assert_eq!(parse_rate("500kbit").unwrap().bits_per_sec, 500_000);
        assert_eq!(parse_rate("1.5Mbit").unwrap().bits_per_sec, 1_500_000);
        assert_eq!(parse_rate("125kbps").unwrap().bits_per_sec, 1_000_000);
        assert_eq!(parse_rate("1gbit").unwrap().bits_per_sec, 1_000_000_000);
        assert_eq!(parse_rate("1kibit").unwrap().bits_per_sec, 1024);
    }

    #[test]
    fn bad_rates_are_quoted_back_with_examples() {
        let e = parse_rate("10mbits").unwrap_err();
        assert_eq!(
            e.to_string(),
            "cannot read '10mbits' (try 10mbit, 500kbit, 1gbit)"
        );
        assert!(parse_rate("").is_err());
        assert!(parse_rate("mbit").is_err());
        assert!(parse_rate("0mbit").is_err());
        assert!(parse_rate("-1mbit").is_err());
        assert!(parse_rate("10").is_err());
    }

    #[test]
    fn times_need_a_unit() {
        assert_eq!(parse_time("20ms").unwrap(), Duration::from_millis(20));
        assert_eq!(parse_time("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_time("250us").unwrap(), Duration::from_micros(250));
        assert_eq!(parse_time("0ms").unwrap(), Duration::ZERO);
        assert!(parse_time("40")
            .unwrap_err()
            .to_string()
            .contains("try 20ms"));
        assert!(parse_time("40 parsecs").is_err());
    }

    #[test]
    fn sizes_use_powers_of_1024_as_tc_does() {
        assert_eq!(parse_size("1500").unwrap(), 1500);
        assert_eq!(parse_size("150kb").unwrap(), 153_600);
        assert_eq!(parse_size("1mb").unwrap(), 1_048_576);
        assert_eq!(parse_size("64kbit").unwrap(), 8192);
        assert!(parse_size("12 apples").is_err());
    }

    #[test]
    fn serialization_time_is_exact_and_rounds_up() {
        let r = Rate::from_mbit(10);
        assert_eq!(r.serialization_time(1500), Duration::from_micros(1200));
        assert_eq!(
            Rate::from_bits_per_sec(1_000_000_000).serialization_time(1500),
            Duration::from_nanos(12_000)
        );
        // 1 byte at 3 bit/s = 8/3 s, rounded up to the next nanosecond.
        assert_eq!(
            Rate::from_bits_per_sec(3).serialization_time(1),
            Duration::from_nanos(2_666_666_667)
        );
        assert_eq!(
            Rate::from_bits_per_sec(0).serialization_time(1),
            Duration::MAX
        );
        // Past 64 bits of numerator: 2^62 bytes at 1 bit/s saturates instead of overflowing, and
        // at 2^62 bit/s takes exactly 8e9 ns.
        assert_eq!(
            Rate::from_bits_per_sec(1).serialization_time(1 << 62),
            Duration::from_nanos(u64::MAX)
        );
        assert_eq!(
            Rate::from_bits_per_sec(1 << 62).serialization_time(1 << 62),
            Duration::from_secs(8)
        );
    }

    #[test]
    fn the_64_bit_division_agrees_with_128_bits_at_every_packet_size() {
        let exact = |bits_per_sec: u64, bytes: u64| {
            let ns = (u128::from(bytes) * 8_000_000_000).div_ceil(u128::from(bits_per_sec));
            Duration::from_nanos(u64::try_from(ns).unwrap())
        };
        for bits_per_sec in [1, 3, 999_983, 10_000_000, 123_456_789, 40_000_000_000] {
            for bytes in [1, 40, 1499, 1500, 9000, 65_535, 1 << 20, 2_000_000_000] {
                let r = Rate::from_bits_per_sec(bits_per_sec);
                assert_eq!(r.serialization_time(bytes), exact(bits_per_sec, bytes));
            }
        }
    }

    #[test]
    fn rates_and_durations_print_compactly() {
        assert_eq!(Rate::from_mbit(10).to_string(), "10mbit");
        assert_eq!(Rate::from_bits_per_sec(1_500_000).to_string(), "1.5mbit");
        assert_eq!(format_duration(Duration::from_millis(40)), "40ms");
        assert_eq!(format_duration(Duration::from_micros(1500)), "1.5ms");
    }
}
