//! tc-style queue specs: `fifo limit 1000`, `bfifo limit 150kb`, `codel target 5ms ecn` …
//!
//! Parsing is two-stage, as ripgrep does it: words into a [`Spec`] with every parameter
//! resolved (Linux's default where the spec is silent), then [`Spec::build`] into a running
//! discipline. [`Spec`]'s `Display` prints the fully resolved form, which is what lab.json
//! records, so a run says exactly what queue it had.

use std::fmt;

use wire::Duration;

use crate::codel::{self, Codel};
use crate::codel_law::CodelParams;
use crate::dualpi2::{self, DualPi2, StepThresh};
use crate::fifo::{Fifo, Limit};
use crate::fq_codel::{self, FqCodel};
use crate::pie::{self, Pie};
use crate::Qdisc;

/// Linux's default txqueuelen, the default pfifo limit.
pub const DEFAULT_TXQUEUELEN: usize = 1000;
/// Default bfifo limit: txqueuelen × MTU (1500, a TUN device has no link header).
pub const DEFAULT_BFIFO_BYTES: usize = DEFAULT_TXQUEUELEN * 1500;

/// The disciplines this build knows, for error messages.
pub const KINDS: &str = "fifo, bfifo, codel, fq_codel, pie, dualpi2";

/// The longest time a spec accepts, so that no arithmetic on it can overflow.
const MAX_TIME: Duration = Duration::from_secs(3600);

/// A fully resolved queue spec.
#[derive(Clone, Debug, PartialEq)]
pub enum Spec {
    Fifo { limit_packets: usize },
    Bfifo { limit_bytes: usize },
    Codel(codel::Params),
    FqCodel(fq_codel::Params),
    Pie(pie::Params),
    DualPi2(dualpi2::Params),
}

/// A spec that cannot be read; the message names the word and what would be accepted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpecError(pub String);

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SpecError {}

/// The words of a spec after its kind, consumed keyword by keyword.
pub(crate) struct Words<'a> {
    kind: &'a str,
    words: std::slice::Iter<'a, &'a str>,
}

impl<'a> Words<'a> {
    pub(crate) fn next(&mut self) -> Option<&'a str> {
        self.words.next().copied()
    }

    /// The value after `keyword`, or an error naming the keyword.
    pub(crate) fn value(&mut self, keyword: &str, example: &str) -> Result<&'a str, SpecError> {
        self.next().ok_or_else(|| {
            SpecError(format!(
                "{}: '{keyword}' needs a value (e.g. '{keyword} {example}')",
                self.kind
            ))
        })
    }

    pub(crate) fn unknown(&self, word: &str, accepted: &str) -> SpecError {
        SpecError(format!(
            "{}: unknown keyword '{word}' (accepted: {accepted})",
            self.kind
        ))
    }

    pub(crate) fn bad(&self, keyword: &str, value: &str, expected: &str) -> SpecError {
        SpecError(format!(
            "{}: cannot read {keyword} '{value}' (try {expected})",
            self.kind
        ))
    }

    /// A packet count: a positive integer that fits Linux's 32-bit netlink attribute (and so
    /// keeps every figure derived from it, such as dualpi2's memory limit, printable as a
    /// value this parser accepts).
    pub(crate) fn count(&mut self, keyword: &str, example: &str) -> Result<usize, SpecError> {
        let v = self.value(keyword, example)?;
        match v.parse::<u32>() {
            Ok(n) if n > 0 => Ok(n as usize),
            _ => Err(self.bad(keyword, v, &format!("{example}; 1..=4294967295"))),
        }
    }

    /// A size in bytes, tc units.
    pub(crate) fn size(&mut self, keyword: &str, example: &str) -> Result<usize, SpecError> {
        let v = self.value(keyword, example)?;
        match wire::units::parse_size(v) {
            Ok(n) if n > 0 => Ok(n as usize),
            _ => Err(self.bad(keyword, v, example)),
        }
    }

    /// A time with a unit, at most an hour; zero only if `zero_ok`.
    pub(crate) fn time(
        &mut self,
        keyword: &str,
        example: &str,
        zero_ok: bool,
    ) -> Result<Duration, SpecError> {
        let v = self.value(keyword, example)?;
        match wire::units::parse_time(v) {
            Ok(d) if d <= MAX_TIME && (zero_ok || !d.is_zero()) => Ok(d),
            _ => Err(self.bad(keyword, v, example)),
        }
    }

    /// An integer in `range`.
    pub(crate) fn int(
        &mut self,
        keyword: &str,
        example: &str,
        range: std::ops::RangeInclusive<u64>,
    ) -> Result<u64, SpecError> {
        let v = self.value(keyword, example)?;
        match v.parse::<u64>() {
            Ok(n) if range.contains(&n) => Ok(n),
            _ => Err(self.bad(
                keyword,
                v,
                &format!("{example}; {}..={}", range.start(), range.end()),
            )),
        }
    }

    /// A gain in Hz, kept in 1/256 Hz as Linux's dualpi2 takes it.
    pub(crate) fn hz_256(&mut self, keyword: &str, example: &str) -> Result<u32, SpecError> {
        let v = self.value(keyword, example)?;
        let n = v
            .parse::<f64>()
            .ok()
            .filter(|x| x.is_finite())
            .map(|x| (x * 256.0).round());
        match n {
            Some(n) if (1.0..=f64::from(MAX_HZ_256)).contains(&n) => Ok(n as u32),
            _ => Err(self.bad(keyword, v, example)),
        }
    }
}

/// dualpi2's largest gain, in 1/256 Hz (Linux keeps scaled gains in 32 bits).
const MAX_HZ_256: u32 = (1 << 23) - 1;

/// A keyword shared by codel and fq_codel; `Ok(false)` when `word` is not one.
fn codel_word(word: &str, w: &mut Words<'_>, p: &mut CodelParams) -> Result<bool, SpecError> {
    match word {
        "target" => p.target = w.time("target", "5ms", false)?,
        "interval" => p.interval = w.time("interval", "100ms", false)?,
        "ce_threshold" => p.ce_threshold = Some(w.time("ce_threshold", "1ms", true)?),
        "ecn" => p.ecn = true,
        "noecn" => p.ecn = false,
        _ => return Ok(false),
    }
    Ok(true)
}

const CODEL_WORDS: &str =
    "limit PACKETS, target TIME, interval TIME, ecn, noecn, ce_threshold TIME";
const FQ_CODEL_WORDS: &str = "limit PACKETS, flows N, quantum BYTES, target TIME, interval TIME, \
     memory_limit BYTES, drop_batch N, ecn, noecn, ce_threshold TIME";
const PIE_WORDS: &str = "limit PACKETS, target TIME, tupdate TIME, alpha 0..32, beta 0..32, \
     ecn, noecn, bytemode, nobytemode, dq_rate_estimator, no_dq_rate_estimator";
const DUALPI2_WORDS: &str =
    "limit PACKETS, memlimit BYTES, max_rtt TIME, typical_rtt TIME, target TIME, tupdate TIME, \
     alpha HZ, beta HZ, step_thresh TIME|PACKETSp, min_qlen_step PACKETS, coupling_factor K, \
     drop_on_overload, overflow, drop_enqueue, drop_dequeue, classic_protection PERCENT, \
     l4s_ect, any_ect";

fn parse_codel(w: &mut Words<'_>) -> Result<Spec, SpecError> {
    let mut p = codel::Params::default();
    while let Some(word) = w.next() {
        match word {
            "limit" => p.limit_packets = w.count("limit", "1000")?,
            _ if codel_word(word, w, &mut p.codel)? => {}
            _ => return Err(w.unknown(word, CODEL_WORDS)),
        }
    }
    Ok(Spec::Codel(p))
}

fn parse_fq_codel(w: &mut Words<'_>) -> Result<Spec, SpecError> {
    let mut p = fq_codel::Params::default();
    while let Some(word) = w.next() {
        match word {
            "limit" => p.limit_packets = w.count("limit", "10240")?,
            // Linux accepts up to 65536 buckets.
            "flows" => p.flows = w.int("flows", "1024", 1..=65536)? as u32,
            "quantum" => {
                // Linux clamps the quantum to 256 bytes .. 1 MiB; we refuse instead.
                let v = w.value("quantum", "1514")?;
                match wire::units::parse_size(v) {
                    Ok(n) if (256..=1 << 20).contains(&n) => p.quantum_bytes = n as u32,
                    _ => return Err(w.bad("quantum", v, "1514; 256..=1048576 bytes")),
                }
            }
            "memory_limit" => p.memory_limit_bytes = w.size("memory_limit", "32mb")?,
            "drop_batch" => p.drop_batch = w.int("drop_batch", "64", 1..=65536)? as u32,
            _ if codel_word(word, w, &mut p.codel)? => {}
            _ => return Err(w.unknown(word, FQ_CODEL_WORDS)),
        }
    }
    Ok(Spec::FqCodel(p))
}

fn parse_pie(w: &mut Words<'_>) -> Result<Spec, SpecError> {
    let mut p = pie::Params::default();
    while let Some(word) = w.next() {
        match word {
            "limit" => p.limit_packets = w.count("limit", "1000")?,
            "target" => p.target = w.time("target", "15ms", false)?,
            "tupdate" => p.tupdate = w.time("tupdate", "15ms", false)?,
            // tc's integers in 1/16, at most 32 (Linux's range).
            "alpha" => p.alpha_16 = w.int("alpha", "2", 0..=32)? as u32,
            "beta" => p.beta_16 = w.int("beta", "20", 0..=32)? as u32,
            "ecn" => p.ecn = true,
            "noecn" => p.ecn = false,
            "bytemode" => p.bytemode = true,
            "nobytemode" => p.bytemode = false,
            "dq_rate_estimator" => p.dq_rate_estimator = true,
            "no_dq_rate_estimator" => p.dq_rate_estimator = false,
            _ => return Err(w.unknown(word, PIE_WORDS)),
        }
    }
    Ok(Spec::Pie(p))
}

fn parse_dualpi2(w: &mut Words<'_>) -> Result<Spec, SpecError> {
    let mut p = dualpi2::Params::default();
    let mut memlimit = None;
    let (mut max_rtt, mut typical_rtt) = (None, None);
    while let Some(word) = w.next() {
        match word {
            "max_rtt" => max_rtt = Some(w.time("max_rtt", "100ms", false)?),
            "typical_rtt" => typical_rtt = Some(w.time("typical_rtt", "15ms", false)?),
            "limit" => p.limit_packets = w.count("limit", "10000")?,
            "memlimit" => memlimit = Some(w.size("memlimit", "30mb")?),
            "target" => p.target = w.time("target", "15ms", false)?,
            "tupdate" => p.tupdate = w.time("tupdate", "16ms", false)?,
            "alpha" => p.alpha_256 = w.hz_256("alpha", "0.16")?,
            "beta" => p.beta_256 = w.hz_256("beta", "3.2")?,
            "step_thresh" => {
                let v = w.value("step_thresh", "1ms")?;
                let packets = v.strip_suffix("packets").or_else(|| v.strip_suffix('p'));
                p.step_thresh = match packets.map(str::parse::<u32>) {
                    Some(Ok(n)) => StepThresh::Packets(n),
                    Some(Err(_)) => return Err(w.bad("step_thresh", v, "1ms or 10p")),
                    None => match wire::units::parse_time(v) {
                        Ok(d) if d <= MAX_TIME => StepThresh::Time(d),
                        _ => return Err(w.bad("step_thresh", v, "1ms or 10p")),
                    },
                };
            }
            "min_qlen_step" => {
                p.min_qlen_step = w.int("min_qlen_step", "0", 0..=u64::from(u32::MAX))? as u32
            }
            "coupling_factor" => p.coupling_factor = w.int("coupling_factor", "2", 1..=255)? as u8,
            "drop_on_overload" => p.drop_overload = true,
            "overflow" => p.drop_overload = false,
            "drop_enqueue" => p.drop_early = true,
            "drop_dequeue" => p.drop_early = false,
            "classic_protection" | "c_protection" => {
                p.c_protection_percent = w.int(word, "10", 0..=100)? as u8
            }
            "l4s_ect" => p.any_ect = false,
            "any_ect" => p.any_ect = true,
            _ => return Err(w.unknown(word, DUALPI2_WORDS)),
        }
    }
    if max_rtt.is_some() || typical_rtt.is_some() {
        derive_from_rtts(w, &mut p, max_rtt, typical_rtt)?;
    }
    // Linux sizes the memory limit from the packet limit unless told otherwise.
    p.memory_limit_bytes = memlimit
        .unwrap_or_else(|| dualpi2::Params::default_memory_limit(p.limit_packets, p.mtu_bytes));
    Ok(Spec::DualPi2(p))
}

/// tc's dualpi2 ratio of the maximum to the typical RTT when only one is given.
const RTT_TYP_TO_MAX: u32 = 6;

/// tc-dualpi2(8)'s `max_rtt` and `typical_rtt`: the PI2 parameters derived as tc derives them
/// (after RFC 9332 Appendix A.1), replacing any target, tupdate, alpha and beta given:
///
///   typical = max / 6 or max = typical × 6 when only one is given (typical ≤ max otherwise)
///   target  = typical
///   tupdate = min(typical, max / 3)
///   alpha   = 0.1 × tupdate / max²   (Hz)
///   beta    = 0.3 / max              (Hz)
///
/// The gains are kept in 1/256 Hz, truncated as tc truncates them.
fn derive_from_rtts(
    w: &Words<'_>,
    p: &mut dualpi2::Params,
    max_rtt: Option<Duration>,
    typical_rtt: Option<Duration>,
) -> Result<(), SpecError> {
    let (max, typical) = match (max_rtt, typical_rtt) {
        (Some(m), None) => (m, (m / RTT_TYP_TO_MAX).max(Duration::from_micros(1))),
        (None, Some(t)) => (t * RTT_TYP_TO_MAX, t),
        (Some(m), Some(t)) if t <= m => (m, t),
        (Some(m), Some(t)) => {
            return Err(SpecError(format!(
                "dualpi2: typical_rtt {} is above max_rtt {} (typical_rtt must be at most max_rtt)",
                fmt_time(t),
                fmt_time(m)
            )))
        }
        (None, None) => return Ok(()),
    };
    let tupdate = typical.min(max / 3).max(Duration::from_micros(1));
    // In integer nanoseconds, so that the truncation is exact: alpha·256 = 25.6·10⁹·tupdate /
    // max², beta·256 = 76.8·10⁹ / max.
    let max_ns = max.as_nanos().max(1);
    let alpha_256 = 25_600_000_000u128 * tupdate.as_nanos() / (max_ns * max_ns);
    let beta_256 = 76_800_000_000u128 / max_ns;
    if alpha_256 == 0 || beta_256 == 0 || beta_256 > u128::from(MAX_HZ_256) {
        return Err(w.bad(
            "max_rtt",
            &fmt_time(max),
            "a time that keeps alpha and beta in range, e.g. 10ms..10s",
        ));
    }
    p.target = typical;
    p.tupdate = tupdate;
    p.alpha_256 = alpha_256.min(u128::from(MAX_HZ_256)) as u32;
    p.beta_256 = beta_256 as u32;
    Ok(())
}

/// A time as the largest unit that shows it exactly, so that it parses back to itself.
fn fmt_time(d: Duration) -> String {
    wire::units::format_duration_exact(d)
}

fn fmt_codel(f: &mut fmt::Formatter<'_>, p: &CodelParams) -> fmt::Result {
    write!(
        f,
        " target {} interval {} {}",
        fmt_time(p.target),
        fmt_time(p.interval),
        if p.ecn { "ecn" } else { "noecn" }
    )?;
    if let Some(t) = p.ce_threshold {
        write!(f, " ce_threshold {}", fmt_time(t))?;
    }
    Ok(())
}

/// Parses a tc-style spec.
pub fn parse(s: &str) -> Result<Spec, SpecError> {
    let all: Vec<&str> = s.split_whitespace().collect();
    let Some((&kind, rest)) = all.split_first() else {
        return Err(SpecError(format!("empty queue spec (try one of: {KINDS})")));
    };
    let mut w = Words {
        kind,
        words: rest.iter(),
    };
    match kind {
        "fifo" | "pfifo" => {
            let mut limit_packets = DEFAULT_TXQUEUELEN;
            while let Some(word) = w.next() {
                match word {
                    "limit" => limit_packets = w.count("limit", "1000")?,
                    _ => return Err(w.unknown(word, "limit PACKETS")),
                }
            }
            Ok(Spec::Fifo { limit_packets })
        }
        "bfifo" => {
            let mut limit_bytes = DEFAULT_BFIFO_BYTES;
            while let Some(word) = w.next() {
                match word {
                    "limit" => limit_bytes = w.size("limit", "150kb")?,
                    _ => return Err(w.unknown(word, "limit BYTES")),
                }
            }
            Ok(Spec::Bfifo { limit_bytes })
        }
        "codel" => parse_codel(&mut w),
        "fq_codel" => parse_fq_codel(&mut w),
        "pie" => parse_pie(&mut w),
        "dualpi2" => parse_dualpi2(&mut w),
        other => Err(SpecError(format!(
            "unknown queue discipline '{other}' (try one of: {KINDS})"
        ))),
    }
}

impl Spec {
    /// Builds the running discipline. `seed` feeds any random choice it makes.
    pub fn build(&self, seed: u64) -> Box<dyn Qdisc> {
        match self {
            Spec::Fifo { limit_packets } => Box::new(Fifo::new(Limit::Packets(*limit_packets))),
            Spec::Bfifo { limit_bytes } => Box::new(Fifo::new(Limit::Bytes(*limit_bytes))),
            Spec::Codel(p) => Box::new(Codel::new(p.clone())),
            Spec::FqCodel(p) => Box::new(FqCodel::new(p.clone(), seed)),
            Spec::Pie(p) => Box::new(Pie::new(p.clone(), seed)),
            Spec::DualPi2(p) => Box::new(DualPi2::new(p.clone(), seed)),
        }
    }

    /// Sets the link MTU the AQMs measure against (their "nothing to drop below one or two
    /// MTUs" floors; default 1500, Linux's `psched_mtu` of the device). Not a tc keyword:
    /// the lab knows the link's MTU. dualpi2's memory limit is not changed.
    pub fn set_mtu(&mut self, mtu_bytes: usize) {
        match self {
            Spec::Fifo { .. } | Spec::Bfifo { .. } => {}
            Spec::Codel(p) => p.codel.mtu_bytes = mtu_bytes,
            Spec::FqCodel(p) => p.codel.mtu_bytes = mtu_bytes,
            Spec::Pie(p) => p.mtu_bytes = mtu_bytes,
            Spec::DualPi2(p) => p.mtu_bytes = mtu_bytes,
        }
    }

    /// The tc name of the discipline.
    pub fn kind(&self) -> &'static str {
        match self {
            Spec::Fifo { .. } => "fifo",
            Spec::Bfifo { .. } => "bfifo",
            Spec::Codel(_) => "codel",
            Spec::FqCodel(_) => "fq_codel",
            Spec::Pie(_) => "pie",
            Spec::DualPi2(_) => "dualpi2",
        }
    }
}

impl Default for Spec {
    fn default() -> Spec {
        Spec::Fifo {
            limit_packets: DEFAULT_TXQUEUELEN,
        }
    }
}

impl fmt::Display for Spec {
    /// The fully resolved spec, parseable again by [`parse`].
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Spec::Fifo { limit_packets } => write!(f, "fifo limit {limit_packets}"),
            Spec::Bfifo { limit_bytes } => write!(f, "bfifo limit {limit_bytes}"),
            Spec::Codel(p) => {
                write!(f, "codel limit {}", p.limit_packets)?;
                fmt_codel(f, &p.codel)
            }
            Spec::FqCodel(p) => {
                write!(
                    f,
                    "fq_codel limit {} flows {} quantum {} memory_limit {} drop_batch {}",
                    p.limit_packets, p.flows, p.quantum_bytes, p.memory_limit_bytes, p.drop_batch
                )?;
                fmt_codel(f, &p.codel)
            }
            Spec::Pie(p) => write!(
                f,
                "pie limit {} target {} tupdate {} alpha {} beta {} {} {} {}",
                p.limit_packets,
                fmt_time(p.target),
                fmt_time(p.tupdate),
                p.alpha_16,
                p.beta_16,
                if p.ecn { "ecn" } else { "noecn" },
                if p.bytemode { "bytemode" } else { "nobytemode" },
                if p.dq_rate_estimator {
                    "dq_rate_estimator"
                } else {
                    "no_dq_rate_estimator"
                },
            ),
            Spec::DualPi2(p) => {
                // Gains print as the exact n/256 they are, so they parse back to n.
                write!(
                    f,
                    "dualpi2 limit {} memlimit {} target {} tupdate {} alpha {} beta {} step_thresh ",
                    p.limit_packets,
                    p.memory_limit_bytes,
                    fmt_time(p.target),
                    fmt_time(p.tupdate),
                    f64::from(p.alpha_256) / 256.0,
                    f64::from(p.beta_256) / 256.0,
                )?;
                match p.step_thresh {
                    StepThresh::Time(t) => f.write_str(&fmt_time(t))?,
                    StepThresh::Packets(n) => write!(f, "{n}p")?,
                }
                write!(
                    f,
                    " min_qlen_step {} coupling_factor {} {} {} classic_protection {} {}",
                    p.min_qlen_step,
                    p.coupling_factor,
                    if p.drop_overload {
                        "drop_on_overload"
                    } else {
                        "overflow"
                    },
                    if p.drop_early {
                        "drop_enqueue"
                    } else {
                        "drop_dequeue"
                    },
                    p.c_protection_percent,
                    if p.any_ect { "any_ect" } else { "l4s_ect" },
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifo_specs_take_linux_defaults() {
        assert_eq!(
            parse("fifo").unwrap(),
            Spec::Fifo {
                limit_packets: 1000
            }
        );
        assert_eq!(
            parse("fifo limit 50").unwrap(),
            Spec::Fifo { limit_packets: 50 }
        );
        assert_eq!(
            parse("pfifo limit 50").unwrap(),
            Spec::Fifo { limit_packets: 50 }
        );
        assert_eq!(
            parse("bfifo limit 150kb").unwrap(),
            Spec::Bfifo {
                limit_bytes: 153_600
            }
        );
        assert_eq!(
            parse("bfifo").unwrap(),
            Spec::Bfifo {
                limit_bytes: 1_500_000
            }
        );
    }

    #[test]
    fn resolved_specs_print_and_parse_back() {
        for s in ["fifo limit 7", "bfifo limit 3000"] {
            assert_eq!(parse(s).unwrap().to_string(), s);
        }
    }

    #[test]
    fn bad_specs_name_the_culprit_and_what_is_accepted() {
        let e = |s: &str| parse(s).unwrap_err().to_string();
        assert_eq!(
            e(""),
            "empty queue spec (try one of: fifo, bfifo, codel, fq_codel, pie, dualpi2)"
        );
        assert_eq!(
            e("redq"),
            "unknown queue discipline 'redq' (try one of: fifo, bfifo, codel, fq_codel, pie, dualpi2)"
        );
        assert_eq!(
            e("fifo lmit 5"),
            "fifo: unknown keyword 'lmit' (accepted: limit PACKETS)"
        );
        assert_eq!(
            e("fifo limit"),
            "fifo: 'limit' needs a value (e.g. 'limit 1000')"
        );
        assert_eq!(
            e("fifo limit 0"),
            "fifo: cannot read limit '0' (try 1000; 1..=4294967295)"
        );
        assert_eq!(
            e("bfifo limit lots"),
            "bfifo: cannot read limit 'lots' (try 150kb)"
        );
    }

    #[test]
    fn built_discipline_has_the_spec_kind() {
        for kind in ["fifo", "bfifo", "codel", "fq_codel", "pie", "dualpi2"] {
            let spec = parse(kind).unwrap();
            assert_eq!(spec.kind(), kind);
            assert_eq!(spec.build(1).kind(), kind);
        }
        assert_eq!(Spec::default().build(1).kind(), "fifo");
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn aqm_specs_left_empty_take_linux_defaults() {
        let Spec::Codel(c) = parse("codel").unwrap() else {
            panic!()
        };
        assert_eq!(c.limit_packets, 1000);
        assert_eq!((c.codel.target, c.codel.interval), (ms(5), ms(100)));
        assert!(!c.codel.ecn);
        assert_eq!(c.codel.ce_threshold, None);

        let Spec::FqCodel(q) = parse("fq_codel").unwrap() else {
            panic!()
        };
        assert_eq!(
            (q.limit_packets, q.flows, q.quantum_bytes, q.drop_batch),
            (10240, 1024, 1514, 64)
        );
        assert_eq!(q.memory_limit_bytes, 32 * 1024 * 1024);
        assert_eq!((q.codel.target, q.codel.interval), (ms(5), ms(100)));
        assert!(q.codel.ecn);

        let Spec::Pie(p) = parse("pie").unwrap() else {
            panic!()
        };
        assert_eq!(
            (p.limit_packets, p.target, p.tupdate),
            (1000, ms(15), ms(15))
        );
        assert_eq!((p.alpha_16, p.beta_16), (2, 20));
        assert!(!p.ecn && !p.bytemode && !p.dq_rate_estimator);

        let Spec::DualPi2(d) = parse("dualpi2").unwrap() else {
            panic!()
        };
        assert_eq!(
            (d.limit_packets, d.memory_limit_bytes),
            (10_000, 30_000_000)
        );
        assert_eq!((d.target, d.tupdate), (ms(15), ms(16)));
        assert_eq!((d.alpha_256, d.beta_256), (41, 819));
        assert_eq!(d.step_thresh, StepThresh::Time(ms(1)));
        assert_eq!((d.coupling_factor, d.c_protection_percent), (2, 10));
        assert!(d.drop_overload && !d.drop_early && !d.any_ect);
    }

    #[test]
    fn the_documented_examples_parse_to_what_they_say() {
        let Spec::Codel(c) = parse("codel target 5ms interval 100ms ecn").unwrap() else {
            panic!()
        };
        assert!(c.codel.ecn);
        let Spec::FqCodel(q) =
            parse("fq_codel limit 10240 flows 1024 quantum 1514 target 5ms interval 100ms noecn")
                .unwrap()
        else {
            panic!()
        };
        assert!(!q.codel.ecn);
        let Spec::Pie(p) = parse("pie target 15ms tupdate 15ms ecn").unwrap() else {
            panic!()
        };
        assert!(p.ecn);
        let Spec::DualPi2(d) =
            parse("dualpi2 target 20ms coupling_factor 3 step_thresh 2ms any_ect").unwrap()
        else {
            panic!()
        };
        assert_eq!((d.target, d.coupling_factor), (ms(20), 3));
        assert_eq!(d.step_thresh, StepThresh::Time(ms(2)));
        assert!(d.any_ect);
        let Spec::DualPi2(d) =
            parse("dualpi2 limit 100 step_thresh 10p alpha 0.32 beta 6.4 overflow").unwrap()
        else {
            panic!()
        };
        assert_eq!(d.step_thresh, StepThresh::Packets(10));
        assert_eq!((d.alpha_256, d.beta_256), (82, 1638));
        assert_eq!(d.memory_limit_bytes, 100 * 2 * 1500);
        assert!(!d.drop_overload);
    }

    #[test]
    fn aqm_specs_print_resolved_and_parse_back() {
        assert_eq!(
            parse("codel ce_threshold 1500us").unwrap().to_string(),
            "codel limit 1000 target 5ms interval 100ms noecn ce_threshold 1500us"
        );
        assert_eq!(
            parse("fq_codel").unwrap().to_string(),
            "fq_codel limit 10240 flows 1024 quantum 1514 memory_limit 33554432 drop_batch 64 \
             target 5ms interval 100ms ecn"
        );
        assert_eq!(
            parse("pie ecn").unwrap().to_string(),
            "pie limit 1000 target 15ms tupdate 15ms alpha 2 beta 20 ecn nobytemode \
             no_dq_rate_estimator"
        );
        assert_eq!(
            parse("dualpi2").unwrap().to_string(),
            "dualpi2 limit 10000 memlimit 30000000 target 15ms tupdate 16ms alpha 0.16015625 \
             beta 3.19921875 step_thresh 1ms min_qlen_step 0 coupling_factor 2 \
             drop_on_overload drop_dequeue classic_protection 10 l4s_ect"
        );
        for s in [
            "codel target 5ms interval 100ms ecn",
            "codel target 1234567ns ce_threshold 0ms",
            "fq_codel limit 10240 flows 1024 quantum 1514 target 5ms interval 100ms noecn",
            "pie target 15ms tupdate 15ms ecn bytemode dq_rate_estimator alpha 0 beta 32",
            "dualpi2 target 15ms coupling_factor 2 step_thresh 1ms",
            "dualpi2 step_thresh 7p any_ect drop_enqueue classic_protection 0 alpha 1000",
        ] {
            let spec = parse(s).unwrap();
            assert_eq!(parse(&spec.to_string()).unwrap(), spec, "{s}");
        }
    }

    #[test]
    fn bad_aqm_specs_are_refused_with_the_culprit() {
        let e = |s: &str| parse(s).unwrap_err().to_string();
        assert_eq!(
            e("codel target 5"),
            "codel: cannot read target '5' (try 5ms)"
        );
        assert_eq!(
            e("codel target 0ms"),
            "codel: cannot read target '0ms' (try 5ms)"
        );
        assert!(e("codel flows 5").starts_with("codel: unknown keyword 'flows' (accepted: limit"));
        assert_eq!(
            e("fq_codel flows 0"),
            "fq_codel: cannot read flows '0' (try 1024; 1..=65536)"
        );
        assert_eq!(
            e("fq_codel quantum 100"),
            "fq_codel: cannot read quantum '100' (try 1514; 256..=1048576 bytes)"
        );
        assert_eq!(
            e("pie alpha 33"),
            "pie: cannot read alpha '33' (try 2; 0..=32)"
        );
        assert_eq!(
            e("pie interval 5ms").split(" (").next(),
            Some("pie: unknown keyword 'interval'")
        );
        assert_eq!(
            e("dualpi2 coupling_factor 0"),
            "dualpi2: cannot read coupling_factor '0' (try 2; 1..=255)"
        );
        assert_eq!(
            e("dualpi2 step_thresh xp"),
            "dualpi2: cannot read step_thresh 'xp' (try 1ms or 10p)"
        );
        assert_eq!(
            e("dualpi2 alpha -1"),
            "dualpi2: cannot read alpha '-1' (try 0.16)"
        );
        assert_eq!(
            e("dualpi2 classic_protection 101"),
            "dualpi2: cannot read classic_protection '101' (try 10; 0..=100)"
        );
        assert_eq!(
            e("dualpi2 target 2h"),
            "dualpi2: cannot read target '2h' (try 15ms)"
        );
        assert_eq!(
            e("dualpi2 tupdate"),
            "dualpi2: 'tupdate' needs a value (e.g. 'tupdate 16ms')"
        );
    }

    #[test]
    fn set_mtu_reaches_the_aqm_floors() {
        let mut spec = parse("codel").unwrap();
        spec.set_mtu(9000);
        let Spec::Codel(c) = &spec else { panic!() };
        assert_eq!(c.codel.mtu_bytes, 9000);
    }

    /// Words a spec may contain, good and bad, to build inputs close to the grammar.
    const POOL: &[&str] = &[
        "fifo",
        "bfifo",
        "codel",
        "fq_codel",
        "pie",
        "dualpi2",
        "limit",
        "target",
        "interval",
        "ecn",
        "noecn",
        "ce_threshold",
        "flows",
        "quantum",
        "memory_limit",
        "drop_batch",
        "tupdate",
        "alpha",
        "beta",
        "bytemode",
        "nobytemode",
        "dq_rate_estimator",
        "no_dq_rate_estimator",
        "memlimit",
        "step_thresh",
        "min_qlen_step",
        "coupling_factor",
        "drop_on_overload",
        "overflow",
        "drop_enqueue",
        "drop_dequeue",
        "classic_protection",
        "l4s_ect",
        "any_ect",
        "0",
        "1",
        "2",
        "32",
        "100",
        "1514",
        "65537",
        "1ms",
        "5ms",
        "1.5ms",
        "3601s",
        "0ns",
        "7p",
        "10packets",
        "0.16",
        "1e9",
        "nan",
        "-1",
        "150kb",
        "32mb",
        "",
        "ms",
        "99999999999999999999",
    ];

    proptest::proptest! {
        #[test]
        fn any_spec_text_parses_or_errs_and_prints_back(
            words in proptest::collection::vec(proptest::sample::select(POOL), 0..10),
            noise in ".{0,40}",
        ) {
            for text in [words.join(" "), noise] {
                if let Ok(spec) = parse(&text) {
                    let printed = spec.to_string();
                    proptest::prop_assert_eq!(parse(&printed), Ok(spec), "{}", printed);
                }
            }
        }
    }

    fn dualpi2_of(spec: &str) -> dualpi2::Params {
        match parse(spec).unwrap() {
            Spec::DualPi2(p) => p,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn dualpi2_derives_its_controller_from_the_rtts_as_tc_does() {
        // max 100 ms alone: typical 100/6 ms; tupdate min(typical, 33.3 ms);
        // alpha 0.1 × 16.67 ms / (100 ms)² = 0.1667 Hz → 42/256; beta 0.3 / 100 ms = 3 Hz → 768/256.
        let p = dualpi2_of("dualpi2 max_rtt 100ms");
        assert_eq!(p.target, Duration::from_nanos(16_666_666));
        assert_eq!(p.tupdate, Duration::from_nanos(16_666_666));
        assert_eq!((p.alpha_256, p.beta_256), (42, 768));
        // typical 15 ms alone: max 90 ms; alpha 0.1 × 15 ms / (90 ms)² = 0.1852 Hz → 47;
        // beta 3.333 Hz → 853. Given target and gains are replaced, whatever their order.
        let p = dualpi2_of("dualpi2 typical_rtt 15ms target 1ms alpha 9");
        assert_eq!(
            (p.target, p.tupdate),
            (Duration::from_millis(15), Duration::from_millis(15))
        );
        assert_eq!((p.alpha_256, p.beta_256), (47, 853));
        // Both: a short typical RTT sets tupdate below max/3.
        let p = dualpi2_of("dualpi2 max_rtt 300ms typical_rtt 20ms");
        assert_eq!(
            (p.target, p.tupdate),
            (Duration::from_millis(20), Duration::from_millis(20))
        );
        // What is printed is what was derived, and it parses back to itself.
        let spec = parse("dualpi2 max_rtt 100ms").unwrap();
        assert_eq!(parse(&spec.to_string()).unwrap(), spec);
        let e = parse("dualpi2 typical_rtt 50ms max_rtt 20ms").unwrap_err();
        assert!(
            e.to_string()
                .contains("typical_rtt 50ms is above max_rtt 20ms"),
            "{e}"
        );
        assert!(
            parse("dualpi2 max_rtt 1h").is_err(),
            "alpha would round to 0"
        );
    }

    #[test]
    fn the_printer_prints_only_what_the_parser_accepts_even_at_the_largest_limit() {
        let spec = parse("dualpi2 limit 4294967295").unwrap();
        assert_eq!(parse(&spec.to_string()).unwrap(), spec);
        let e = parse("dualpi2 limit 4294967296").unwrap_err().to_string();
        assert!(
            e.contains("'4294967296'") && e.contains("1..=4294967295"),
            "{e}"
        );
        assert!(parse("fifo limit 99999999999").is_err());
    }
}
