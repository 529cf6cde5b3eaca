//! How fast a link drains its queue: unlimited, a constant rate, or a Mahimahi trace.
//!
//! A Mahimahi packet-delivery trace (Netravali et al., "Mahimahi: Accurate Record-and-Replay for
//! HTTP", USENIX ATC 2015, and mahimahi's `mm-link` man page) is a text file with one
//! non-decreasing integer per line: a millisecond at which one MTU-sized (1500-byte) delivery
//! opportunity occurs. Several lines with the same number are several opportunities in that
//! millisecond. The trace loops: after its last line it starts again, shifted by the last
//! timestamp. Bytes of an opportunity that the packet in service does not need go to the next
//! packet; an opportunity with nothing queued is lost.

use std::fmt;
use std::sync::Arc;

use wire::{Duration, Instant, Rate};

/// Bytes one trace line can deliver.
pub const TRACE_OPPORTUNITY_BYTES: u64 = 1500;

/// A link's capacity.
#[derive(Clone, Debug, PartialEq)]
pub enum Capacity {
    /// No serialization delay at all.
    Unlimited,
    Rate(Rate),
    Trace(Arc<Trace>),
}

impl Capacity {
    /// The rate asked of the link, bit/s: a constant rate, a trace's mean rate, or `None` when
    /// unlimited.
    pub fn rate_bps(&self) -> Option<u64> {
        match self {
            Capacity::Unlimited => None,
            Capacity::Rate(r) => Some(r.bits_per_sec),
            Capacity::Trace(t) => Some(t.mean_rate().bits_per_sec),
        }
    }
}

/// A loaded Mahimahi trace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Trace {
    /// Opportunity times in ms, non-decreasing; the period is the last one.
    pub opportunities_ms: Vec<u64>,
    /// Where it came from, for messages.
    pub name: String,
}

/// A trace file that cannot be used; the message names the line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceError(pub String);

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TraceError {}

impl Trace {
    /// Parses a trace's text. Blank lines are skipped; anything else must be a millisecond
    /// count not smaller than the line before, and the last must be positive (the period).
    pub fn parse(name: &str, text: &str) -> Result<Trace, TraceError> {
        let mut opportunities_ms = Vec::new();
        let mut last = 0u64;
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            let ms: u64 = line.parse().map_err(|_| {
                TraceError(format!(
                    "{name}:{}: cannot read '{line}' (a trace has one millisecond timestamp per line, e.g. 12)",
                    i + 1
                ))
            })?;
            if ms < last {
                return Err(TraceError(format!(
                    "{name}:{}: {ms} is earlier than the line before ({last}); timestamps must not decrease",
                    i + 1
                )));
            }
            last = ms;
            opportunities_ms.push(ms);
        }
        if opportunities_ms.is_empty() || last == 0 {
            return Err(TraceError(format!(
                "{name}: no delivery opportunities after 0 ms (a trace needs lines like 1, 2, 2, 5)"
            )));
        }
        Ok(Trace {
            opportunities_ms,
            name: name.to_string(),
        })
    }

    /// The loop period.
    pub fn period_ms(&self) -> u64 {
        *self
            .opportunities_ms
            .last()
            .expect("parse refuses empty traces")
    }

    /// The average rate the trace offers.
    pub fn mean_rate(&self) -> Rate {
        let bits = self.opportunities_ms.len() as u64 * TRACE_OPPORTUNITY_BYTES * 8;
        Rate::from_bits_per_sec(bits * 1000 / self.period_ms())
    }

    /// The first opportunity at or after `t` as (loop number, index); `epoch` is when loop 0
    /// started.
    pub fn first_at_or_after(&self, epoch: Instant, t: Instant) -> (u64, usize) {
        let period_ns = self.period_ms() * 1_000_000;
        let since = t.saturating_duration_since(epoch).as_nanos() as u64;
        let loop_no = since / period_ns;
        let within_ns = since % period_ns;
        // Opportunities at exactly the period boundary belong to the next loop's start; the
        // partition point is the first opportunity whose time is >= within.
        let idx = self
            .opportunities_ms
            .partition_point(|&ms| ms * 1_000_000 < within_ns);
        if idx == self.opportunities_ms.len() {
            (loop_no + 1, 0)
        } else {
            (loop_no, idx)
        }
    }

    /// The time of opportunity `idx` of loop `loop_no`.
    pub fn time_of(&self, epoch: Instant, loop_no: u64, idx: usize) -> Instant {
        let ms = loop_no * self.period_ms() + self.opportunities_ms[idx];
        epoch + Duration::from_millis(ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trace_parses_and_names_bad_lines() {
        let t = Trace::parse("t", "1\n2\n2\n\n5\n").unwrap();
        assert_eq!(t.opportunities_ms, vec![1, 2, 2, 5]);
        assert_eq!(t.period_ms(), 5);
        // 4 × 1500 B per 5 ms = 9.6 Mbit/s
        assert_eq!(t.mean_rate(), Rate::from_bits_per_sec(9_600_000));
        assert_eq!(
            Trace::parse("x.trace", "1\nfoo\n").unwrap_err().to_string(),
            "x.trace:2: cannot read 'foo' (a trace has one millisecond timestamp per line, e.g. 12)"
        );
        assert!(Trace::parse("x", "5\n3\n")
            .unwrap_err()
            .to_string()
            .contains("x:2: 3 is earlier"));
        assert!(Trace::parse("x", "").is_err());
        assert!(Trace::parse("x", "0\n0\n").is_err());
    }

    #[test]
    fn opportunities_loop_with_the_period() {
        let t = Trace::parse("t", "1\n3\n").unwrap();
        let e = Instant::ZERO;
        assert_eq!(t.first_at_or_after(e, Instant::ZERO), (0, 0));
        assert_eq!(t.first_at_or_after(e, Instant::from_micros(1001)), (0, 1));
        // Past the last opportunity of loop 0 (at 3 ms = the period) → loop 1, index 0 at 4 ms.
        assert_eq!(t.first_at_or_after(e, Instant::from_micros(3001)), (1, 0));
        assert_eq!(t.time_of(e, 1, 0), Instant::from_millis(4));
        assert_eq!(t.time_of(e, 2, 1), Instant::from_millis(9));
    }
}
