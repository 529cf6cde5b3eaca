//! What one link direction did: counts, drops by cause, marks, queue-delay distribution; and
//! the self-check of a run: what the direction was [`Asked`] to do beside what it [`Got`].
//!
//! No peer emulator tells its users when the emulation fell short of what they asked for. The
//! pure link is exact in virtual time, so what it can fall short on is what the settings
//! themselves imply (a packet-rate ceiling below the byte rate, order-keeping that lifts the
//! jitter's low end) and chance (a 10 % duplicate rate that came out 9.4 %). The real-time
//! shell adds the rest: how late it delivered ([`LinkStats::lateness`]); [`Got::engine_warning`]
//! names the engine as the culprit when that lateness is above a millisecond at the 99th
//! percentile.

use std::collections::BTreeMap;
use std::fmt;

use hdrhistogram::Histogram;
use wire::units::format_duration_exact;
use wire::{Duration, Instant};

use crate::link::LinkParams;

/// Percentiles of a delay distribution, in milliseconds.
#[derive(Copy, Clone, Debug, Default, PartialEq)]
pub struct Percentiles {
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub samples: u64,
}

/// A delay histogram from 1 µs to 1000 s with `DIGITS` significant digits: 3 (0.1 %) by
/// default; 2 (1 %) where a per-packet record must stay cheap, since the smaller table stays in
/// cache when the recorded values vary (a jittered delay).
///
/// A full table is about 160 KB at 3 digits and 24 KB at 2, and a lab holds six histograms per
/// link direction: a thousand-host lab whose links carry a few pings each would hold hundreds
/// of megabytes of zeros. So a histogram starts empty, then keeps its counts sparse (the
/// buckets it has seen, at most [`SPARSE_BUCKETS`], in a small hash table: a varying delay finds
/// its bucket in a probe or two, where the binary search of a sorted list mispredicted a branch
/// at most of its nine levels and took 50 ns a record; once it has seen a few dozen buckets, in
/// an 8 KB window of consecutive buckets counted by index, with no probing at all), and takes the
/// full table only when it has seen more buckets than that. Sparse or full, it counts by the same buckets as an
/// `hdrhistogram::Histogram` of the same bounds and digits, so its percentiles are that
/// histogram's to the microsecond.
#[derive(Clone, Debug, Default)]
pub struct DelayHistogram<const DIGITS: u8 = 3>(Counts);

/// The most buckets a histogram keeps sparse (16 bytes each, in a table at most half full)
/// before it takes the full table.
pub const SPARSE_BUCKETS: usize = 512;

#[derive(Clone, Debug, Default)]
enum Counts {
    #[default]
    Empty,
    Sparse(Sparse),
    Full(Full),
}

/// Every bucket's count, at its [`index_of`]: hdrhistogram's table, counted without the
/// bookkeeping its `record` does per value (a bounds check, a minimum, a maximum, saturating
/// sums: some 100 instructions a record, where this takes a dozen). The table for percentiles
/// is made from it when asked.
#[derive(Clone, Debug)]
struct Full {
    counts: Box<[u64]>,
    total: u64,
}

impl Full {
    fn new<const DIGITS: u8>() -> Full {
        Full {
            counts: vec![0; index_of::<DIGITS>(MAX_US) as usize + 1].into_boxed_slice(),
            total: 0,
        }
    }

    #[inline]
    fn count<const DIGITS: u8>(&mut self, us: u64, n: u64) {
        self.counts[index_of::<DIGITS>(us) as usize] += n;
        self.total += n;
    }
}

/// The largest delay counted, in µs (1000 s); larger ones count as this.
const MAX_US: u64 = 1_000_000_000;

/// The buckets seen so far, open-addressed by their lowest value: (the bucket's lowest value in
/// µs, its count), a count of 0 marking a free cell; a power-of-two number of cells, at most
/// half of them used, found by linear probing from a Fibonacci hash. A delay that varies (more
/// than [`WINDOW_AFTER`] buckets seen) is counted in a [`Window`] first.
#[derive(Clone, Debug)]
struct Sparse {
    cells: Vec<(u64, u64)>,
    /// The cell counted last: a steady delay finds it without hashing.
    last: usize,
    /// Cells of `cells` in use.
    used: usize,
    /// Buckets seen, in `cells` or in the window: at most [`SPARSE_BUCKETS`].
    buckets: usize,
    total: u64,
    window: Option<Window>,
}

/// Consecutive buckets of a [`Window`]: at 2 significant digits, eight doublings of the delay
/// (a delay of 2 to 18 ms spans about 400).
const WINDOW_CELLS: usize = 1024;

/// Buckets a sparse histogram sees before it opens its window.
const WINDOW_AFTER: usize = 32;

/// [`WINDOW_CELLS`] consecutive buckets counted by their index (hdrhistogram's counts index,
/// computed inline by [`index_of`]), so that a delay varying from packet to packet over some
/// hundreds of buckets is counted by an index and an increment rather than a hash and a probe
/// loop whose branches mispredict. Opened centred on the buckets the hash table has seen; a
/// bucket outside it is still counted there.
#[derive(Clone, Debug)]
struct Window {
    /// The index of the first cell's bucket.
    base: u64,
    counts: Box<[u64; WINDOW_CELLS]>,
}

impl Sparse {
    fn new() -> Sparse {
        Sparse {
            cells: vec![(0, 0); 4],
            last: 0,
            used: 0,
            buckets: 0,
            total: 0,
            window: None,
        }
    }

    fn home(bucket: u64, cells: usize) -> usize {
        (bucket.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize & (cells - 1)
    }

    /// Counts `n` more of `us` µs; false, counting nothing, when its bucket is new and
    /// [`SPARSE_BUCKETS`] have been seen already. Inlined where a packet is recorded: a steady
    /// delay (the bucket counted last) or one in the window is counted here, anything else out
    /// of line.
    #[inline]
    fn count<const DIGITS: u8>(&mut self, us: u64, n: u64) -> bool {
        if let Some(w) = &mut self.window {
            // Below `base`, the difference wraps far beyond the window.
            let i = index_of::<DIGITS>(us).wrapping_sub(w.base);
            if let Some(c) = w.counts.get_mut(i as usize) {
                if *c == 0 {
                    if self.buckets == SPARSE_BUCKETS {
                        return false;
                    }
                    self.buckets += 1;
                }
                *c += n;
                self.total += n;
                return true;
            }
        }
        let bucket = lowest_equivalent::<DIGITS>(us);
        if let Some(last) = self.cells.get_mut(self.last) {
            if last.0 == bucket && last.1 > 0 {
                last.1 += n;
                self.total += n;
                return true;
            }
        }
        self.count_hashed::<DIGITS>(bucket, n)
    }

    /// [`Sparse::count`] for a bucket that is not the last one counted, nor in the window.
    #[inline(never)]
    fn count_hashed<const DIGITS: u8>(&mut self, bucket: u64, n: u64) -> bool {
        if !self.add(bucket, n) {
            return false;
        }
        if self.window.is_none() && self.used >= WINDOW_AFTER {
            self.open_window::<DIGITS>();
        }
        true
    }

    /// Opens the window centred on the buckets seen so far, and moves those it covers into it.
    #[cold]
    fn open_window<const DIGITS: u8>(&mut self) {
        let seen: Vec<(u64, u64)> = self.cells.iter().copied().filter(|c| c.1 > 0).collect();
        let (lo, hi) = seen.iter().fold((u64::MAX, 0), |(lo, hi), c| {
            let i = index_of::<DIGITS>(c.0);
            (lo.min(i), hi.max(i))
        });
        let mut w = Window {
            base: (lo / 2 + hi / 2).saturating_sub(WINDOW_CELLS as u64 / 2),
            counts: Box::new([0; WINDOW_CELLS]),
        };
        self.cells.iter_mut().for_each(|c| *c = (0, 0));
        self.used = 0;
        for (b, n) in seen {
            match w
                .counts
                .get_mut(index_of::<DIGITS>(b).wrapping_sub(w.base) as usize)
            {
                Some(c) => *c = n,
                None => {
                    Self::place(&mut self.cells, b, n);
                    self.used += 1;
                }
            }
        }
        self.window = Some(w);
    }

    /// Puts `bucket`, counted `n` times, in the first free cell from its home; the caller
    /// knows it is not there yet and that a cell is free.
    fn place(cells: &mut [(u64, u64)], bucket: u64, n: u64) -> usize {
        let mask = cells.len() - 1;
        let mut j = Self::home(bucket, cells.len());
        while cells[j].1 > 0 {
            j = (j + 1) & mask;
        }
        cells[j] = (bucket, n);
        j
    }

    /// Counts `n` more in `bucket` of the hash table, which is not the cell counted last
    /// ([`Sparse::count`] looked there first); false, counting nothing, when it is a new
    /// bucket and [`SPARSE_BUCKETS`] have been seen already.
    fn add(&mut self, bucket: u64, n: u64) -> bool {
        let mask = self.cells.len() - 1;
        let mut i = Self::home(bucket, self.cells.len());
        loop {
            let cell = &mut self.cells[i];
            if cell.0 == bucket && cell.1 > 0 {
                cell.1 += n;
                self.total += n;
                self.last = i;
                return true;
            }
            if cell.1 == 0 {
                break;
            }
            i = (i + 1) & mask;
        }
        if self.buckets == SPARSE_BUCKETS {
            return false;
        }
        self.cells[i] = (bucket, n);
        self.last = i;
        self.used += 1;
        self.buckets += 1;
        self.total += n;
        if self.used * 2 > self.cells.len() {
            let grown = vec![(0, 0); self.cells.len() * 2];
            let old = std::mem::replace(&mut self.cells, grown);
            for (b, n) in old.into_iter().filter(|c| c.1 > 0) {
                let j = Self::place(&mut self.cells, b, n);
                if b == bucket {
                    self.last = j;
                }
            }
        }
        true
    }

    /// (bucket's lowest value, count) of every bucket seen, in no particular order.
    fn counts<const DIGITS: u8>(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        let window = self.window.iter().flat_map(|w| {
            w.counts
                .iter()
                .enumerate()
                .filter(|(_, n)| **n > 0)
                .map(|(i, n)| (value_of::<DIGITS>(w.base + i as u64), *n))
        });
        self.cells.iter().copied().filter(|c| c.1 > 0).chain(window)
    }
}

/// log2 of the sub-buckets per bucket of an `hdrhistogram::Histogram` of `digits` significant
/// digits: the least power of two at least 2 × 10^`digits` (hdrhistogram's
/// `sub_bucket_count_magnitude`).
const fn sub_bucket_magnitude(digits: u8) -> u32 {
    let largest = 2 * 10u64.pow(digits as u32);
    u64::BITS - (largest - 1).leading_zeros()
}

/// The lowest value of `us`'s bucket in an `hdrhistogram::Histogram` of lowest discernible
/// value 1 and `DIGITS` significant digits (its `lowest_equivalent`), computed here, with the
/// magnitude a constant, rather than through a shared table of that shape: its bucket is
/// `us`'s bit length above the sub-bucket magnitude, and the value keeps its bits from there.
#[inline]
fn lowest_equivalent<const DIGITS: u8>(us: u64) -> u64 {
    let magnitude = const { sub_bucket_magnitude(DIGITS) };
    let bucket = (u64::BITS - magnitude) - (us | ((1 << magnitude) - 1)).leading_zeros();
    (us >> bucket) << bucket
}

/// The index of `us`'s bucket among all buckets of that histogram (hdrhistogram's counts
/// index: `(bucket + 1)·2^(m−1) + sub − 2^(m−1)` with m the sub-bucket magnitude and
/// `sub = us >> bucket`), increasing with `us`.
#[inline]
fn index_of<const DIGITS: u8>(us: u64) -> u64 {
    let magnitude = const { sub_bucket_magnitude(DIGITS) };
    let bucket = (u64::BITS - magnitude) - (us | ((1 << magnitude) - 1)).leading_zeros();
    (u64::from(bucket) << (magnitude - 1)) + (us >> bucket)
}

/// The lowest value of the bucket at `index` (the inverse of [`index_of`]): buckets above the
/// first hold the upper half of their sub-buckets, 2^(m−1) indices each.
fn value_of<const DIGITS: u8>(index: u64) -> u64 {
    let magnitude = const { sub_bucket_magnitude(DIGITS) };
    let bucket = (index >> (magnitude - 1)).max(1) - 1;
    (index - (bucket << (magnitude - 1))) << bucket
}

fn new_table(digits: u8) -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_US, digits).expect("static bounds are valid")
}

impl<const DIGITS: u8> DelayHistogram<DIGITS> {
    pub fn record(&mut self, d: Duration) {
        self.record_nanos(wire::time::duration_nanos(d));
    }

    /// Records a delay of `ns` nanoseconds: [`DelayHistogram::record`] without the round trip
    /// through a `Duration` (a division to make one from two `Instant`s, a u128 product to take
    /// it apart again), for the per-packet paths. Its common cases are inlined there; the first
    /// record and the change to the full table are out of line, so that the caller sets up no
    /// large frame for them.
    #[inline]
    pub fn record_nanos(&mut self, ns: u64) {
        self.record_nanos_times(ns, 1);
    }

    /// Records `times` delays of `ns` nanoseconds each, at the cost of one: the segments of a
    /// super-packet, which all waited as long.
    #[inline]
    pub fn record_nanos_times(&mut self, ns: u64, times: u64) {
        if times == 0 {
            return;
        }
        let us = (ns / 1000).clamp(1, MAX_US);
        match &mut self.0 {
            Counts::Sparse(sparse) => {
                if !sparse.count::<DIGITS>(us, times) {
                    self.take_full_table(us, times);
                }
            }
            Counts::Full(full) => full.count::<DIGITS>(us, times),
            Counts::Empty => self.record_first(us, times),
        }
    }

    #[cold]
    #[inline(never)]
    fn record_first(&mut self, us: u64, n: u64) {
        let mut sparse = Sparse::new();
        sparse.count::<DIGITS>(us, n);
        self.0 = Counts::Sparse(sparse);
    }

    /// Counts `n` of `us` in a full table made from the sparse counts.
    #[cold]
    #[inline(never)]
    fn take_full_table(&mut self, us: u64, n: u64) {
        let mut full = Full::new::<DIGITS>();
        if let Counts::Sparse(sparse) = &self.0 {
            for (v, seen) in sparse.counts::<DIGITS>() {
                full.count::<DIGITS>(v, seen);
            }
        }
        full.count::<DIGITS>(us, n);
        self.0 = Counts::Full(full);
    }

    pub fn len(&self) -> u64 {
        match &self.0 {
            Counts::Empty => 0,
            Counts::Sparse(sparse) => sparse.total,
            Counts::Full(full) => full.total,
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    pub fn percentiles(&self) -> Percentiles {
        // A table for the moment: percentiles are asked for once a run, not per packet.
        let mut h = new_table(DIGITS);
        match &self.0 {
            Counts::Empty => return Percentiles::default(),
            Counts::Full(full) => {
                for (i, n) in full.counts.iter().enumerate().filter(|c| *c.1 > 0) {
                    h.saturating_record_n(value_of::<DIGITS>(i as u64), *n);
                }
            }
            Counts::Sparse(sparse) => {
                for (v, n) in sparse.counts::<DIGITS>() {
                    h.saturating_record_n(v, n);
                }
            }
        }
        if h.is_empty() {
            return Percentiles::default();
        }
        let q = |p: f64| h.value_at_quantile(p) as f64 / 1000.0;
        Percentiles {
            p50_ms: q(0.50),
            p95_ms: q(0.95),
            p99_ms: q(0.99),
            max_ms: h.max() as f64 / 1000.0,
            samples: h.len(),
        }
    }
    #[cfg(test)]
    fn is_full_table(&self) -> bool {
        matches!(self.0, Counts::Full(_))
    }
    #[cfg(test)]
    fn has_window(&self) -> bool {
        matches!(&self.0, Counts::Sparse(s) if s.window.is_some())
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
    /// The sum of every transmitted packet's queue delay, ns: with `queue_delay.len()`, the
    /// mean over any span between two readings (the live view's figure).
    pub queue_delay_sum_ns: u64,
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
    pub added_delay: DelayHistogram<2>,
    /// Time arrived packets waited for their slot.
    pub slot_wait: DelayHistogram<2>,
    /// Bytes charged to the transmitter in rate mode (IP length plus overhead).
    pub wire_bytes: u64,
    /// Time the transmitter was busy (rate mode): serialization or the packet-rate ceiling,
    /// whichever held each packet longer. `bytes_out` over it is the rate while backlogged.
    pub transmitting: Duration,
    /// How late the caller delivered this link's packets against their arrival times (the
    /// real-time shell records it with [`LinkStats::record_lateness`]; the pure link is never
    /// late).
    pub lateness: DelayHistogram<2>,
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

/// What a link direction was configured to do, as plain values (for summary.json's `asked`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Asked {
    /// The constant rate, or a trace's mean rate; `None` when unlimited.
    pub rate_bps: Option<u64>,
    pub delay_ms: f64,
    /// The jitter's σ and distribution, when there is jitter.
    pub jitter_ms: Option<f64>,
    pub jitter_distribution: Option<&'static str>,
    /// Long-run loss probability of the loss model.
    pub loss: f64,
    pub duplicate: f64,
    pub reorder: f64,
    pub corrupt: f64,
    pub pps: Option<u32>,
    /// The drop filters as text.
    pub filters: Vec<String>,
    pub mtu_bytes: Option<u32>,
    /// The slots and the slow path as their option text, when set.
    pub slot: Option<String>,
    pub slow: Option<String>,
}

impl Asked {
    pub fn of(p: &LinkParams) -> Asked {
        let i = &p.impair;
        Asked {
            rate_bps: p.capacity.rate_bps(),
            delay_ms: p.delay.as_secs_f64() * 1e3,
            jitter_ms: i.jitter.as_ref().map(|j| j.amount.as_secs_f64() * 1e3),
            jitter_distribution: i.jitter.as_ref().map(|j| j.distribution.name()),
            loss: p.loss.mean_loss(),
            duplicate: i.duplicate.as_ref().map_or(0.0, |d| d.probability),
            reorder: i.reorder.as_ref().map_or(0.0, |r| r.probability),
            corrupt: i.corrupt,
            pps: i.pps.map(|r| r.packets_per_sec),
            filters: i.drop.iter().map(|f| f.to_string()).collect(),
            mtu_bytes: i.narrow.as_ref().map(|n| n.mtu_bytes),
            slot: i.slot.as_ref().map(|s| s.to_string()),
            slow: i.slow.as_ref().map(|s| s.to_string()),
        }
    }
}

/// What a link direction did, as plain values (for summary.json's `got`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Got {
    /// Bits per second while the transmitter was busy (rate mode; `None` before any packet or
    /// on a trace): below the asked rate when the packet-rate ceiling held packets longer.
    pub rate_bps: Option<f64>,
    /// Delay added on the wire (delay, jitter, order-keeping), and slot waits.
    pub added_delay: Percentiles,
    pub slot_wait: Percentiles,
    /// Fractions of the packets offered (loss) or transmitted (the others).
    pub loss: f64,
    pub duplicate: f64,
    pub reorder: f64,
    pub corrupt: f64,
    /// Packets dropped by the filters, by the narrow MTU, by a black hole.
    pub filtered: u64,
    pub too_big: u64,
    pub blackholed: u64,
    /// How late the shell delivered this direction's packets (zero samples in pure runs).
    pub lateness: Percentiles,
}

impl Got {
    pub fn of(s: &LinkStats) -> Got {
        let frac = |n: u64, of: u64| if of == 0 { 0.0 } else { n as f64 / of as f64 };
        let transmitted = s.packets_out - s.duplicated;
        let drop = |c: &str| s.drops.get(c).copied().unwrap_or(0);
        Got {
            rate_bps: (!s.transmitting.is_zero())
                .then(|| s.wire_bytes as f64 * 8.0 / s.transmitting.as_secs_f64()),
            added_delay: s.added_delay.percentiles(),
            slot_wait: s.slot_wait.percentiles(),
            loss: frac(drop("loss"), s.packets_in),
            duplicate: frac(s.duplicated, transmitted),
            reorder: frac(s.reordered, transmitted),
            corrupt: frac(s.corrupted, transmitted),
            filtered: drop("filter"),
            too_big: drop("too_big"),
            blackholed: drop("blackhole"),
            lateness: s.lateness.percentiles(),
        }
    }

    /// A warning naming the engine when it, not the emulated link, set the pace: its lateness
    /// p99 above 1 ms.
    pub fn engine_warning(&self) -> Option<String> {
        (self.lateness.samples > 0 && self.lateness.p99_ms > 1.0).then(|| {
            format!(
                "the emulator itself was late by {:.1} ms at the 99th percentile (the machine is                  too busy for these settings): figures include its own delay",
                self.lateness.p99_ms
            )
        })
    }
}

fn fmt_rate(bps: f64) -> String {
    if bps >= 1e9 {
        format!("{:.3}gbit", bps / 1e9)
    } else if bps >= 1e6 {
        format!("{:.3}mbit", bps / 1e6)
    } else {
        format!("{:.1}kbit", bps / 1e3)
    }
}

fn pct(p: f64) -> String {
    format!("{:.2}%", p * 100.0)
}

impl fmt::Display for Asked {
    /// One line for the end of a run: only what was set.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        parts.push(
            self.rate_bps
                .map_or("unlimited".into(), |r| fmt_rate(r as f64)),
        );
        let delay = format_duration_exact(Duration::from_secs_f64(self.delay_ms / 1e3));
        match (self.jitter_ms, self.jitter_distribution) {
            (Some(j), Some(d)) => parts.push(format!(
                "{delay} ± {} {d}",
                format_duration_exact(Duration::from_secs_f64(j / 1e3))
            )),
            _ => parts.push(delay),
        }
        for (name, v) in [
            ("loss", self.loss),
            ("duplicate", self.duplicate),
            ("reorder", self.reorder),
            ("corrupt", self.corrupt),
        ] {
            if v > 0.0 {
                parts.push(format!("{name} {}", pct(v)));
            }
        }
        if let Some(n) = self.pps {
            parts.push(format!("{n} pps"));
        }
        if let Some(m) = self.mtu_bytes {
            parts.push(format!("mtu {m}"));
        }
        for flt in &self.filters {
            parts.push(format!("drop '{flt}'"));
        }
        if let Some(s) = &self.slot {
            parts.push(format!("slot {s}"));
        }
        if let Some(s) = &self.slow {
            parts.push(format!("slow '{s}'"));
        }
        f.write_str(&parts.join(", "))
    }
}

impl Got {
    /// One line for the end of a run, in the same order as [`Asked`]'s.
    pub fn summary(&self, asked: &Asked) -> String {
        let mut parts = Vec::new();
        if let Some(r) = self.rate_bps {
            parts.push(fmt_rate(r));
        }
        if self.added_delay.samples > 0 {
            parts.push(format!(
                "delay p50 {:.2}ms p99 {:.2}ms",
                self.added_delay.p50_ms, self.added_delay.p99_ms
            ));
        }
        for (name, want, got) in [
            ("loss", asked.loss, self.loss),
            ("duplicate", asked.duplicate, self.duplicate),
            ("reorder", asked.reorder, self.reorder),
            ("corrupt", asked.corrupt, self.corrupt),
        ] {
            if want > 0.0 || got > 0.0 {
                parts.push(format!("{name} {}", pct(got)));
            }
        }
        for (name, n) in [
            ("filtered", self.filtered),
            ("too big", self.too_big),
            ("black-holed", self.blackholed),
        ] {
            if n > 0 {
                parts.push(format!("{name} {n}"));
            }
        }
        if self.slot_wait.samples > 0 {
            parts.push(format!(
                "slot wait p50 {:.2}ms p99 {:.2}ms",
                self.slot_wait.p50_ms, self.slot_wait.p99_ms
            ));
        }
        if self.lateness.samples > 0 {
            parts.push(format!("engine late p99 {:.2}ms", self.lateness.p99_ms));
        }
        parts.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capacity::Capacity;
    use crate::impair::{Impairments, PacketRate};
    use crate::link::tests::{drain, udp};
    use crate::link::Link;
    use qdisc::fifo::{Fifo, Limit};
    use wire::Rate;

    /// What `hdrhistogram` itself says of `values_us` recorded one by one.
    fn reference(values_us: &[u64], digits: u8) -> Percentiles {
        let mut h = new_table(digits);
        for &v in values_us {
            h.saturating_record(v.clamp(1, 1_000_000_000));
        }
        let q = |p: f64| h.value_at_quantile(p) as f64 / 1000.0;
        Percentiles {
            p50_ms: q(0.50),
            p95_ms: q(0.95),
            p99_ms: q(0.99),
            max_ms: h.max() as f64 / 1000.0,
            samples: h.len(),
        }
    }

    fn recorded<const D: u8>(values_us: &[u64]) -> DelayHistogram<D> {
        let mut h = DelayHistogram::<D>::default();
        for &v in values_us {
            h.record(Duration::from_micros(v));
        }
        h
    }

    #[test]
    fn the_bucket_is_hdrhistograms_at_every_bit_length() {
        fn check<const D: u8>() {
            let h = new_table(D);
            for bits in 0..30u32 {
                let top = 1u64 << bits;
                for us in [top, top + 1, top + top / 3, top * 2 - 1] {
                    let us = us.clamp(1, 1_000_000_000);
                    assert_eq!(
                        lowest_equivalent::<D>(us),
                        h.lowest_equivalent(us),
                        "{us} µs"
                    );
                }
            }
        }
        check::<2>();
        check::<3>();
    }

    #[test]
    fn the_bucket_index_increases_with_the_value_and_gives_back_hdrhistograms_bucket() {
        fn check<const D: u8>() {
            let h = new_table(D);
            let mut last = 0;
            for us in (1..5000).chain((13..31).flat_map(|b| [1u64 << b, (1 << b) + 77])) {
                let i = index_of::<D>(us);
                assert!(i >= last, "{us} µs");
                last = i;
                assert_eq!(value_of::<D>(i), h.lowest_equivalent(us), "{us} µs");
            }
        }
        check::<2>();
        check::<3>();
    }

    #[test]
    fn a_varying_delay_is_counted_in_the_window_with_hdrhistograms_percentiles() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(23);
        // A jittered 10 ms delay (2 to 18 ms), and one packet in a thousand far outside.
        let values: Vec<u64> = (0..100_000)
            .map(|i| {
                if i % 1000 == 999 {
                    rng.gen_range(400_000..600_000)
                } else {
                    rng.gen_range(2_000..18_000)
                }
            })
            .collect();
        for n in [40, 1000, 100_000] {
            let h = recorded::<2>(&values[..n]);
            assert!(h.has_window() && !h.is_full_table(), "{n} values");
            assert_eq!(h.percentiles(), reference(&values[..n], 2), "{n} values");
            assert_eq!(h.len(), n as u64);
        }
        // Before the window, and beyond the sparse capacity at 3 digits: the same percentiles.
        assert!(!recorded::<2>(&values[..20]).has_window());
        assert_eq!(
            recorded::<2>(&values[..20]).percentiles(),
            reference(&values[..20], 2)
        );
        let h3 = recorded::<3>(&values);
        assert!(h3.is_full_table());
        assert_eq!(h3.percentiles(), reference(&values, 3));
    }

    #[test]
    fn a_delay_recorded_for_several_segments_at_once_counts_as_each_recorded_alone() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        // Super-packets of 0 to 45 segments, the delays spread wide enough at 3 digits to
        // pass from the short list through the window to the full table.
        let packets: Vec<(u64, u64)> = (0..20_000)
            .map(|_| (rng.gen_range(1..2_000_000), rng.gen_range(0..46)))
            .collect();
        for n in [3, 50, 2_000, 20_000] {
            let mut at_once = DelayHistogram::<3>::default();
            let mut one_by_one = DelayHistogram::<3>::default();
            for &(us, segments) in &packets[..n] {
                at_once.record_nanos_times(us * 1000, segments);
                for _ in 0..segments {
                    one_by_one.record_nanos(us * 1000);
                }
            }
            assert_eq!(at_once.len(), one_by_one.len(), "{n} packets");
            assert_eq!(
                at_once.percentiles(),
                one_by_one.percentiles(),
                "{n} packets"
            );
            assert_eq!(
                at_once.is_full_table(),
                one_by_one.is_full_table(),
                "{n} packets"
            );
        }
    }

    #[test]
    fn a_few_samples_stay_in_a_short_list_with_the_full_tables_percentiles() {
        // Three pings' worth of queue delay and lateness: 40 ms, 40.2 ms, 61.7 ms.
        let values = [40_000, 40_213, 61_700];
        let h3 = recorded::<3>(&values);
        let h2 = recorded::<2>(&values);
        assert!(!h3.is_full_table() && !h2.is_full_table());
        assert_eq!(h3.percentiles(), reference(&values, 3));
        assert_eq!(h2.percentiles(), reference(&values, 2));
        assert_eq!(h3.len(), 3);
        assert_eq!(
            DelayHistogram::<3>::default().percentiles(),
            Percentiles::default()
        );
    }

    #[test]
    fn many_buckets_take_the_full_table_and_the_percentiles_stay_those_of_hdrhistogram() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(22);
        // From sub-microsecond to beyond the top bound, skewed to small values as delays are.
        let values: Vec<u64> = (0..50_000)
            .map(|_| {
                let exp: u32 = rng.gen_range(0..34);
                rng.gen_range(0..(1u64 << exp))
            })
            .collect();
        for n in [1, 10, 100, 1000, 5000, 50_000] {
            let v = &values[..n];
            let h3 = recorded::<3>(v);
            let h2 = recorded::<2>(v);
            assert_eq!(h3.percentiles(), reference(v, 3), "{n} values, 3 digits");
            assert_eq!(h2.percentiles(), reference(v, 2), "{n} values, 2 digits");
        }
        assert!(recorded::<3>(&values).is_full_table());
        // Just under and just over the list's capacity: distinct buckets 1 µs apart.
        let under: Vec<u64> = (1..=SPARSE_BUCKETS as u64).collect();
        let over: Vec<u64> = (1..=SPARSE_BUCKETS as u64 + 1).collect();
        assert!(!recorded::<3>(&under).is_full_table());
        let h = recorded::<3>(&over);
        assert!(h.is_full_table());
        assert_eq!(h.percentiles(), reference(&over, 3));
    }

    #[test]
    fn a_packet_rate_below_the_byte_rate_shows_in_what_the_link_got() {
        // Asked: 100 Mbit/s, but 1000 packets/s of 1500 bytes carry only 12 Mbit/s.
        let params = LinkParams {
            capacity: Capacity::Rate(Rate::from_mbit(100)),
            delay: Duration::from_millis(10),
            impair: Impairments {
                pps: Some(PacketRate::parse("1000").unwrap()),
                duplicate: Some(crate::Duplicate::parse("10%").unwrap()),
                ..Impairments::default()
            },
            ..LinkParams::default()
        };
        let asked = Asked::of(&params);
        let mut l = Link::new(
            Instant::ZERO,
            params,
            Box::new(Fifo::new(Limit::Packets(10_000))),
            1,
        );
        for id in 0..5000 {
            l.enqueue(Instant::ZERO, udp(id, 1500, 1), &mut ());
        }
        drain(&mut l, &mut ());
        let got = Got::of(l.stats());
        assert_eq!(asked.rate_bps, Some(100_000_000));
        let r = got.rate_bps.unwrap();
        assert!((r - 12e6).abs() < 1e3, "{r}");
        assert!((got.duplicate - 0.1).abs() < 0.015, "{}", got.duplicate);
        assert!((got.added_delay.p50_ms - 10.0).abs() < 0.1, "1 % precision");
        assert_eq!(
            asked.to_string(),
            "100.000mbit, 10ms, duplicate 10.00%, 1000 pps"
        );
        let line = got.summary(&asked);
        assert!(
            line.starts_with("12.000mbit, delay p50 10.") && line.contains(", duplicate "),
            "{line}"
        );
        assert_eq!(got.engine_warning(), None);
    }

    #[test]
    fn slots_and_the_slow_path_show_in_what_was_asked_and_got() {
        let params = LinkParams {
            impair: Impairments {
                slot: Some(crate::Slot::parse("2ms 6ms packets 16").unwrap()),
                slow: Some(crate::Slow::parse("ipv6 150ms").unwrap()),
                ..Impairments::default()
            },
            ..LinkParams::default()
        };
        let asked = Asked::of(&params);
        assert_eq!(
            asked.to_string(),
            "unlimited, 0s, slot 2ms 6ms packets 16, slow 'ipv6 150ms'"
        );
        let mut l = Link::new(
            Instant::ZERO,
            params,
            Box::new(Fifo::new(Limit::Packets(10_000))),
            1,
        );
        for id in 0..100 {
            l.enqueue(Instant::from_millis(id), udp(id, 100, 1), &mut ());
        }
        drain(&mut l, &mut ());
        let line = Got::of(l.stats()).summary(&asked);
        assert!(line.contains(", slot wait p50 "), "{line}");
        let p99: f64 = line
            .rsplit("p99 ")
            .next()
            .unwrap()
            .trim_end_matches("ms")
            .parse()
            .unwrap();
        assert!((2.0..=6.1).contains(&p99), "{line}");
    }

    #[test]
    fn the_engine_is_named_when_it_was_late() {
        let mut s = LinkStats::default();
        for _ in 0..100 {
            s.record_lateness(Duration::from_micros(50));
        }
        assert_eq!(Got::of(&s).engine_warning(), None);
        for _ in 0..10 {
            s.record_lateness(Duration::from_millis(3));
        }
        let w = Got::of(&s).engine_warning().unwrap();
        assert!(w.contains("late by 3.0 ms"), "{w}");
    }
}
