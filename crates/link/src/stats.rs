//! What one link direction did: counts, drops by cause, marks, queue-delay distribution.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use wire::{Duration, Instant};

/// Percentiles of a delay distribution, in milliseconds.
#[derive(Copy, Clone, Debug, Default, PartialEq)]
pub struct Percentiles {
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub samples: u64,
}

/// A delay histogram with 3 significant digits from 1 µs to 1000 s.
#[derive(Clone, Debug)]
pub struct DelayHistogram(Histogram<u64>);

impl Default for DelayHistogram {
    fn default() -> Self {
        DelayHistogram(
            Histogram::new_with_bounds(1, 1_000_000_000, 3).expect("static bounds are valid"),
        )
    }
}

impl DelayHistogram {
    pub fn record(&mut self, d: Duration) {
        let us = (d.as_nanos() / 1000).clamp(1, 1_000_000_000) as u64;
        self.0.saturating_record(us);
    }
    pub fn len(&self) -> u64 {
        self.0.len()
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    pub fn percentiles(&self) -> Percentiles {
        if self.0.is_empty() {
            return Percentiles::default();
        }
        let q = |p: f64| self.0.value_at_quantile(p) as f64 / 1000.0;
        Percentiles {
            p50_ms: q(0.50),
            p95_ms: q(0.95),
            p99_ms: q(0.99),
            max_ms: self.0.max() as f64 / 1000.0,
            samples: self.0.len(),
        }
    }
}

/// Counters of one link direction.
#[derive(Clone, Debug, Default)]
pub struct LinkStats {
    pub packets_in: u64,
    pub bytes_in: u64,
    pub packets_out: u64,
    pub bytes_out: u64,
    /// Drops by cause name (`loss`, `down`, `overlimit`, `aqm_dequeue` …).
    pub drops: BTreeMap<&'static str, u64>,
    /// CE marks set by the queue (both `ce_mark` and `step_mark`).
    pub ce_marks: u64,
    /// Marks by cause name.
    pub marks: BTreeMap<&'static str, u64>,
    /// Queue delay (sojourn time from enqueue to dequeue) of every transmitted packet.
    pub queue_delay: DelayHistogram,
    /// The same, by the discipline's class (DualPI2: 0 = classic, 1 = L4S).
    pub queue_delay_by_class: [DelayHistogram; 2],
    /// Marks by class.
    pub marks_by_class: [u64; 2],
    /// First packet in and last packet delivered, for throughput.
    pub first_in: Option<Instant>,
    pub last_out: Option<Instant>,
    /// Copies made on the wire (counted in `packets_out` too).
    pub duplicated: u64,
    /// Packets sent ahead by `reorder`.
    pub reordered: u64,
    /// Packets with a bit flipped.
    pub corrupted: u64,
    /// Oversized IPv4 packets the router in front fragmented, and ICMP errors it sent back.
    pub fragmented: u64,
    pub icmp_too_big: u64,
    /// Delay added on the wire to each transmitted packet: propagation, jitter, order-keeping
    /// (0 for a packet sent ahead by `reorder`).
    pub added_delay: DelayHistogram,
    /// Time arrived packets waited for their slot.
    pub slot_wait: DelayHistogram,
    /// Time the transmitter was busy (rate mode): serialization or the packet-rate ceiling,
    /// whichever held each packet longer. `bytes_out` over it is the rate while backlogged.
    pub transmitting: Duration,
    /// How late the caller delivered this link's packets against their arrival times (the
    /// real-time shell records it with [`LinkStats::record_lateness`]; the pure link is never
    /// late).
    pub lateness: DelayHistogram,
}

impl LinkStats {
    /// Delivered bits per second between the first arrival and the last delivery.
    pub fn throughput_bps(&self) -> f64 {
        match (self.first_in, self.last_out) {
            (Some(a), Some(b)) if b > a => self.bytes_out as f64 * 8.0 / (b - a).as_secs_f64(),
            _ => 0.0,
        }
    }
    pub fn total_drops(&self) -> u64 {
        self.drops.values().sum()
    }
    /// Records how late a packet of this link reached its host.
    pub fn record_lateness(&mut self, late: Duration) {
        self.lateness.record(late);
    }
}
