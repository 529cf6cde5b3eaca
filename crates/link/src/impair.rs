//! The impairments a link direction can add beyond rate, delay and loss, as typed parameters
//! parsed from netem-like text: duplication, reordering, corruption, a packets-per-second
//! ceiling, slots, drop filters, a slower path for some packets and a narrow MTU.
//!
//! Each type parses its option's text (`10% 50ms`, `25% 50%`, `10ms 20ms packets 8`) and prints
//! back the same value, so lab.json shows what the parser accepts. Where netem has the same word
//! the meaning is netem's (tc-netem(8)), except where a comment says why not. Jitter lives in
//! [`crate::jitter`], filters in [`crate::filter`]. How a link applies them is in `Link`.

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

use rand::Rng;
use rand_chacha::ChaCha8Rng;
use wire::units::{format_duration_exact, parse_size, parse_time};
use wire::Duration;

use crate::filter::Filter;
use crate::jitter::Jitter;

/// A value that cannot be read, quoted back with what would have been accepted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    pub value: String,
    pub expected: &'static str,
}

impl ParseError {
    pub fn new(value: &str, expected: &'static str) -> ParseError {
        ParseError {
            value: value.to_string(),
            expected,
        }
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cannot read '{}' (try {})", self.value, self.expected)
    }
}

impl std::error::Error for ParseError {}

/// `12.5%` → 0.125; a number without `%`, or outside 0..100, is refused.
pub fn parse_pct(w: &str) -> Result<f64, ParseError> {
    match w.strip_suffix('%').and_then(|n| n.parse::<f64>().ok()) {
        Some(v) if (0.0..=100.0).contains(&v) => Ok(v / 100.0),
        _ => Err(ParseError::new(w, "a percentage such as 10% or 0.5%")),
    }
}

/// 0.125 → `12.5%`, to four decimals of a percent.
pub fn fmt_pct(p: f64) -> String {
    format!("{}%", (p * 1e6).round() / 1e4)
}

/// A probability given to four decimals of a percent, as [`fmt_pct`] prints it, so that a
/// printed value parses back to itself.
pub(crate) fn round_pct(p: f64) -> f64 {
    (p * 1e6).round() / 1e6
}

/// `--duplicate PCT [TIME]`: a copy of a chosen packet, delivered `late_by` after the original.
#[derive(Clone, Debug, PartialEq)]
pub struct Duplicate {
    pub probability: f64,
    /// Zero: the copy right behind the original (netem's duplicate). More: a late duplicate,
    /// which never holds back the packets behind it.
    pub late_by: Duration,
}

const DUPLICATE_EXPECTED: &str = "a percentage and optionally how much later the copy comes, \
     e.g. '10%' or '5% 200ms'";

impl Duplicate {
    pub fn parse(s: &str) -> Result<Duplicate, ParseError> {
        let err = || ParseError::new(s, DUPLICATE_EXPECTED);
        match s.split_whitespace().collect::<Vec<_>>().as_slice() {
            [p] => Ok(Duplicate {
                probability: round_pct(parse_pct(p).map_err(|_| err())?),
                late_by: Duration::ZERO,
            }),
            [p, t] => Ok(Duplicate {
                probability: round_pct(parse_pct(p).map_err(|_| err())?),
                late_by: parse_time(t).map_err(|_| err())?,
            }),
            _ => Err(err()),
        }
    }
}

impl fmt::Display for Duplicate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&fmt_pct(self.probability))?;
        if !self.late_by.is_zero() {
            write!(f, " {}", format_duration_exact(self.late_by))?;
        }
        Ok(())
    }
}

/// `--reorder PCT [CORR]`: netem's reordering. A chosen packet skips the link's delay (and
/// jitter) and so overtakes the packets in flight; the others are delayed as usual. As in netem,
/// it needs a delay to have any effect.
#[derive(Clone, Debug, PartialEq)]
pub struct Reorder {
    pub probability: f64,
    /// ρ in [0, 1], netem's correlation of successive choices.
    pub correlation: f64,
}

const REORDER_EXPECTED: &str = "a percentage and optionally a correlation, e.g. '25%' or '25% 50%'";

impl Reorder {
    pub fn parse(s: &str) -> Result<Reorder, ParseError> {
        let err = || ParseError::new(s, REORDER_EXPECTED);
        let words: Vec<&str> = s.split_whitespace().collect();
        let (p, c) = match words.as_slice() {
            [p] => (*p, None),
            [p, c] => (*p, Some(*c)),
            _ => return Err(err()),
        };
        Ok(Reorder {
            probability: round_pct(parse_pct(p).map_err(|_| err())?),
            correlation: match c {
                Some(c) => round_pct(parse_pct(c).map_err(|_| err())?),
                None => 0.0,
            },
        })
    }
}

impl fmt::Display for Reorder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&fmt_pct(self.probability))?;
        if self.correlation > 0.0 {
            write!(f, " {}", fmt_pct(self.correlation))?;
        }
        Ok(())
    }
}

/// Reads a probability for `--corrupt PCT`: one random bit of a chosen packet is flipped.
pub fn parse_corrupt(s: &str) -> Result<f64, ParseError> {
    parse_pct(s.trim())
        .map(round_pct)
        .map_err(|_| ParseError::new(s, "a percentage, e.g. '0.1%'"))
}

/// `--pps N`: at most N packets per second through the transmitter, whatever their size.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct PacketRate {
    pub packets_per_sec: u32,
}

impl PacketRate {
    pub fn parse(s: &str) -> Result<PacketRate, ParseError> {
        match s.trim().parse::<u32>() {
            Ok(n) if n > 0 => Ok(PacketRate { packets_per_sec: n }),
            _ => Err(ParseError::new(
                s,
                "a whole number of packets per second above 0, e.g. 1000",
            )),
        }
    }

    /// How long the packet at `phase` (0..N, cycling) holds the forwarding engine:
    /// ⌈(phase+1)·10⁹/N⌉ − ⌈phase·10⁹/N⌉ ns. Every N packets take exactly one second together,
    /// and no second ever carries more than N, whatever N divides.
    pub fn hold(self, phase: u32) -> Duration {
        let n = u64::from(self.packets_per_sec);
        let k = u64::from(phase) % n;
        let edge = |k: u64| (k * 1_000_000_000).div_ceil(n);
        Duration::from_nanos(edge(k + 1) - edge(k))
    }

    /// The phase after `phase`.
    pub fn next_phase(self, phase: u32) -> u32 {
        (phase + 1) % self.packets_per_sec
    }
}

impl fmt::Display for PacketRate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.packets_per_sec)
    }
}

/// `--slot MIN [MAX] [packets N] [bytes B]`: netem's slots. Packets that have crossed the link
/// wait for the next slot; a slot opens a random time in [MIN, MAX] after it is asked for (after
/// the first packet that finds no open slot, or after the previous slot closes) and lets out at
/// most N packets and B bytes, all at the moment it opens: Wi-Fi and DOCSIS aggregation.
#[derive(Clone, Debug, PartialEq)]
pub struct Slot {
    pub min: Duration,
    pub max: Duration,
    pub max_packets: Option<u32>,
    pub max_bytes: Option<u64>,
}

const SLOT_EXPECTED: &str =
    "MIN [MAX] [packets N] [bytes B] with MIN <= MAX, e.g. '10ms 20ms packets 32 bytes 64kb'";

impl Slot {
    pub fn parse(s: &str) -> Result<Slot, ParseError> {
        let err = || ParseError::new(s, SLOT_EXPECTED);
        let words: Vec<&str> = s.split_whitespace().collect();
        let min = parse_time(words.first().ok_or_else(err)?).map_err(|_| err())?;
        let mut rest = &words[1..];
        let mut max = min;
        if let Some(w) = rest.first() {
            if let Ok(t) = parse_time(w) {
                max = t;
                rest = &rest[1..];
            }
        }
        if max < min {
            return Err(err());
        }
        let mut slot = Slot {
            min,
            max,
            max_packets: None,
            max_bytes: None,
        };
        while let [key, value, more @ ..] = rest {
            match *key {
                "packets" if slot.max_packets.is_none() => {
                    slot.max_packets = Some(value.parse().ok().filter(|&n| n > 0).ok_or_else(err)?)
                }
                "bytes" if slot.max_bytes.is_none() => {
                    slot.max_bytes =
                        Some(parse_size(value).ok().filter(|&n| n > 0).ok_or_else(err)?)
                }
                _ => return Err(err()),
            }
            rest = more;
        }
        if !rest.is_empty() {
            return Err(err());
        }
        Ok(slot)
    }

    /// How long until the next slot opens: uniform in [min, max].
    pub fn draw(&self, rng: &mut ChaCha8Rng) -> Duration {
        if self.max <= self.min {
            return self.min;
        }
        let span = (self.max - self.min).as_nanos() as u64;
        self.min + Duration::from_nanos(rng.gen_range(0..=span))
    }
}

impl fmt::Display for Slot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {}",
            format_duration_exact(self.min),
            format_duration_exact(self.max)
        )?;
        if let Some(n) = self.max_packets {
            write!(f, " packets {n}")?;
        }
        if let Some(b) = self.max_bytes {
            write!(f, " bytes {b}")?;
        }
        Ok(())
    }
}

/// A link narrower than the paths around it. A packet larger than `mtu_bytes` is not carried;
/// the router in front of the link answers with ICMP "fragmentation needed" (IPv4 with DF set,
/// RFC 1191 §4) or ICMPv6 "Packet Too Big" (RFC 8201 §4, RFC 4443 §3.2), from the router's own
/// address, back towards the sender.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NarrowLink {
    pub mtu_bytes: u32,
    /// The router's addresses, the source of its ICMP errors.
    pub router_v4: Ipv4Addr,
    pub router_v6: Ipv6Addr,
}

/// Everything a link direction adds beyond capacity, delay and loss. The default adds nothing.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Impairments {
    pub jitter: Option<Jitter>,
    pub duplicate: Option<Duplicate>,
    pub reorder: Option<Reorder>,
    /// Probability that a packet has one bit flipped on the wire.
    pub corrupt: f64,
    pub pps: Option<PacketRate>,
    pub slot: Option<Slot>,
    /// A packet matching any of these is dropped on entry (cause `filter`).
    pub drop: Vec<Filter>,
    pub slow: Option<Slow>,
    pub narrow: Option<NarrowLink>,
}

/// `--slow 'FILTER TIME'`: packets matching the filter arrive `extra` later than the rest,
/// without holding the rest back: a slower path for part of the traffic, as IPv6 carried
/// through a tunnel while IPv4 goes direct.
#[derive(Clone, Debug, PartialEq)]
pub struct Slow {
    pub filter: Filter,
    pub extra: Duration,
}

const SLOW_EXPECTED: &str = "a filter and the extra one-way delay, e.g. 'ipv6 150ms'";

impl Slow {
    pub fn parse(s: &str) -> Result<Slow, ParseError> {
        let err = || ParseError::new(s, SLOW_EXPECTED);
        let (filter, time) = s.trim().rsplit_once(char::is_whitespace).ok_or_else(err)?;
        Ok(Slow {
            filter: Filter::parse(filter).map_err(|_| err())?,
            extra: parse_time(time).map_err(|_| err())?,
        })
    }
}

impl fmt::Display for Slow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.filter, format_duration_exact(self.extra))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_option_parses_and_prints_back() {
        let d = Duplicate::parse("5% 200ms").unwrap();
        assert_eq!(d.late_by, Duration::from_millis(200));
        assert_eq!(d.to_string(), "5% 200ms");
        assert_eq!(Duplicate::parse(&d.to_string()).unwrap(), d);
        assert_eq!(Duplicate::parse("10%").unwrap().to_string(), "10%");
        let r = Reorder::parse("25% 50%").unwrap();
        assert_eq!(Reorder::parse(&r.to_string()).unwrap(), r);
        assert_eq!(PacketRate::parse("1000").unwrap().to_string(), "1000");
        let s = Slot::parse("10ms 20ms packets 32 bytes 64kb").unwrap();
        assert_eq!(s.max_bytes, Some(65_536));
        assert_eq!(s.to_string(), "10ms 20ms packets 32 bytes 65536");
        assert_eq!(Slot::parse(&s.to_string()).unwrap(), s);
        assert_eq!(Slot::parse("5ms").unwrap().max, Duration::from_millis(5));
        assert!((parse_corrupt("0.1%").unwrap() - 0.001).abs() < 1e-12);
        let w = Slow::parse("ipv6 150ms").unwrap();
        assert_eq!(w.extra, Duration::from_millis(150));
        assert_eq!(Slow::parse(&w.to_string()).unwrap(), w);
        assert!(Slow::parse("ipv6").is_err() && Slow::parse("150ms").is_err());
        assert!(Slow::parse("ipv7 150ms").is_err());
    }

    #[test]
    fn bad_values_are_quoted_back() {
        for (got, bad) in [
            (Duplicate::parse("10").map(|_| ()), "10"),
            (Duplicate::parse("10% soon").map(|_| ()), "10% soon"),
            (Reorder::parse("25% 50% 1%").map(|_| ()), "25% 50% 1%"),
            (PacketRate::parse("0").map(|_| ()), "0"),
            (PacketRate::parse("1k").map(|_| ()), "1k"),
            (Slot::parse("20ms 10ms").map(|_| ()), "20ms 10ms"),
            (Slot::parse("10ms packets").map(|_| ()), "10ms packets"),
            (Slot::parse("10ms packets 0").map(|_| ()), "10ms packets 0"),
            (parse_corrupt("200%").map(|_| ()), "200%"),
        ] {
            let e = got.unwrap_err().to_string();
            assert!(e.starts_with(&format!("cannot read '{bad}' (try ")), "{e}");
        }
    }

    #[test]
    fn a_packet_rate_never_fits_more_than_n_packets_in_a_second() {
        for n in [1u32, 3, 7, 1000, 999_999] {
            let r = PacketRate { packets_per_sec: n };
            let (mut t, mut phase) = (0u128, 0u32);
            let mut starts = Vec::new();
            for _ in 0..2 * n {
                starts.push(t);
                t += r.hold(phase).as_nanos();
                phase = r.next_phase(phase);
            }
            // Back to back, packet k starts at ⌈k·10⁹/N⌉: N of them in [0, 1 s), N in [1 s, 2 s).
            assert_eq!(
                starts.iter().filter(|s| **s < 1_000_000_000).count(),
                n as usize
            );
            assert_eq!(t, 2_000_000_000, "{n}");
        }
    }

    #[test]
    fn a_slot_draw_stays_in_its_window() {
        use rand::SeedableRng;
        let s = Slot::parse("10ms 20ms").unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let draws: Vec<_> = (0..1000).map(|_| s.draw(&mut rng)).collect();
        assert!(draws.iter().all(|d| (s.min..=s.max).contains(d)));
        assert!(draws.iter().any(|d| *d > Duration::from_millis(18)));
        assert!(draws.iter().any(|d| *d < Duration::from_millis(12)));
    }

    use proptest::prelude::*;

    /// Text shaped like the options (numbers with units and percentages among the keywords), so
    /// that most of it parses; the rest must be an error, never a panic.
    fn option_text() -> impl Strategy<Value = String> {
        let word = prop_oneof![
            "[0-9]{1,4}(\\.[0-9]{1,6})?(ms|us|s|ns)",
            "[0-9]{1,3}(\\.[0-9]{1,7})?%",
            "[0-9]{1,6}(kb|mb)?",
            Just("normal".to_string()),
            Just("pareto".to_string()),
            Just("paretonormal".to_string()),
            Just("reorder".to_string()),
            Just("packets".to_string()),
            Just("bytes".to_string()),
        ];
        proptest::collection::vec(word, 1..6).prop_map(|w| w.join(" "))
    }

    proptest! {
        #[test]
        fn every_option_prints_what_it_parses(s in option_text()) {
            if let Ok(v) = crate::Jitter::parse(&s) {
                prop_assert_eq!(crate::Jitter::parse(&v.to_string()).unwrap(), v);
            }
            if let Ok(v) = Duplicate::parse(&s) {
                prop_assert_eq!(Duplicate::parse(&v.to_string()).unwrap(), v);
            }
            if let Ok(v) = Reorder::parse(&s) {
                prop_assert_eq!(Reorder::parse(&v.to_string()).unwrap(), v);
            }
            if let Ok(v) = Slot::parse(&s) {
                prop_assert_eq!(Slot::parse(&v.to_string()).unwrap(), v);
            }
            if let Ok(v) = PacketRate::parse(&s) {
                prop_assert_eq!(PacketRate::parse(&v.to_string()).unwrap(), v);
            }
        }

        #[test]
        fn slow_prints_what_it_parses(
            f in "(tcp|udp|ipv4|ipv6|icmp|not ipv4)( port [0-9]{1,5})?",
            t in option_text(),
        ) {
            if let Ok(v) = Slow::parse(&format!("{f} {t}")) {
                prop_assert_eq!(Slow::parse(&v.to_string()).unwrap(), v);
            }
        }
    }
}
