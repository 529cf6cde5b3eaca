//! Queue disciplines as pure state machines behind one small trait, [`Qdisc`].
//!
//! A discipline is fed with `enqueue(now, packet)` and asked with `dequeue(now)`; time is
//! always passed in and randomness comes from a seed given at build time, so a run is
//! repeatable. Every drop and every ECN mark is reported as a [`QdiscEvent`] with its
//! [`Cause`], so the link above can log it. Disciplines never touch a clock, a socket or a
//! thread.
//!
//! Specs are written as tc writes them (`fifo limit 1000`, `codel target 5ms ecn`) and parsed by
//! [`spec::parse`]; what is left out takes Linux's default.

pub mod codel;
pub mod codel_law;
pub mod dualpi2;
pub mod fifo;
pub mod fq_codel;
pub mod pie;
pub mod spec;
#[cfg(test)]
pub(crate) mod testutil;

use wire::{Ecn, Instant, Packet};

pub use spec::{parse as parse_spec, Spec, SpecError};

/// Why a discipline dropped or marked a packet. The names are those of summary.json and the
/// link logs.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Cause {
    /// The queue was full (packets, bytes or memory limit).
    Overlimit,
    /// The AQM dropped at enqueue (PIE, DualPI2).
    AqmEnqueue,
    /// The AQM dropped at dequeue (CoDel, FQ-CoDel).
    AqmDequeue,
    /// The AQM set CE instead of dropping.
    CeMark,
    /// DualPI2's L4S step threshold (or a ce_threshold) set CE.
    StepMark,
    /// Dropped because the AQM's probability saturated (DualPI2/PIE overload).
    Overload,
}

impl Cause {
    pub const ALL: [Cause; 6] = [
        Cause::Overlimit,
        Cause::AqmEnqueue,
        Cause::AqmDequeue,
        Cause::CeMark,
        Cause::StepMark,
        Cause::Overload,
    ];

    pub const fn name(self) -> &'static str {
        match self {
            Cause::Overlimit => "overlimit",
            Cause::AqmEnqueue => "aqm_enqueue",
            Cause::AqmDequeue => "aqm_dequeue",
            Cause::CeMark => "ce_mark",
            Cause::StepMark => "step_mark",
            Cause::Overload => "overload",
        }
    }

    /// True for causes that set CE rather than drop.
    pub const fn is_mark(self) -> bool {
        matches!(self, Cause::CeMark | Cause::StepMark)
    }

    const fn index(self) -> usize {
        self as usize
    }
}

/// Something a discipline did to a packet other than queue and deliver it.
#[derive(Debug, PartialEq, Eq)]
pub enum QdiscEvent {
    /// The packet left the queue without being delivered. It is handed back so that the
    /// caller can log it (flow, size, sojourn time).
    Dropped { packet: Packet, cause: Cause },
    /// CE was set on the packet with this id: the one being enqueued when reported by
    /// `enqueue`, the one returned when reported by `dequeue`.
    Marked { id: u64, cause: Cause },
}

/// What became of the packet given to `enqueue`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Queued,
    /// The packet was dropped (it is also in the events, with its cause).
    Dropped,
}

/// Counters every discipline keeps.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub packets_in: u64,
    pub packets_out: u64,
    pub bytes_out: u64,
    /// Indexed by `Cause as usize`; marks count under `CeMark` / `StepMark`.
    pub by_cause: [u64; 6],
    pub max_backlog_packets: usize,
    pub max_backlog_bytes: usize,
}

impl Stats {
    pub fn count(&self, cause: Cause) -> u64 {
        self.by_cause[cause.index()]
    }
    pub fn record(&mut self, cause: Cause) {
        self.by_cause[cause.index()] += 1;
    }
    pub fn drops(&self) -> u64 {
        Cause::ALL
            .iter()
            .filter(|c| !c.is_mark())
            .map(|c| self.count(*c))
            .sum()
    }
    pub fn marks(&self) -> u64 {
        Cause::ALL
            .iter()
            .filter(|c| c.is_mark())
            .map(|c| self.count(*c))
            .sum()
    }
    /// Call after every enqueue to track the high-water marks.
    pub fn note_backlog(&mut self, packets: usize, bytes: usize) {
        self.max_backlog_packets = self.max_backlog_packets.max(packets);
        self.max_backlog_bytes = self.max_backlog_bytes.max(bytes);
    }
}

/// Counters for one sub-queue of a discipline that has several (DualPI2: classic and L4S).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClassStats {
    /// Short name for summaries: `c` or `l` for DualPI2.
    pub name: &'static str,
    /// The value this class gives `Packet::class`.
    pub class: u8,
    pub packets_in: u64,
    pub packets_out: u64,
    pub bytes_out: u64,
    /// Indexed by `Cause as usize`, as [`Stats::by_cause`].
    pub by_cause: [u64; 6],
    pub backlog_packets: usize,
    pub backlog_bytes: usize,
}

impl ClassStats {
    pub fn count(&self, cause: Cause) -> u64 {
        self.by_cause[cause.index()]
    }
}

/// Sets CE on an ECN-capable packet, as Linux's `INET_ECN_set_ce`: true for ECT(0), ECT(1)
/// and CE (already marked: nothing to change, but the AQM's signal is delivered all the same,
/// so it must not drop), false for Not-ECT and for bytes that are not an IP header.
pub(crate) fn set_ce(packet: &mut Packet) -> bool {
    match packet.ecn() {
        Ecn::NotEct => false,
        Ecn::Ce => true,
        Ecn::Ect0 | Ecn::Ect1 => packet.set_ecn(Ecn::Ce).is_ok(),
    }
}

/// A queue discipline: the one trait the link uses.
///
/// The link sets `packet.enqueued_at = now` before `enqueue`; disciplines use it for sojourn
/// time. Events are appended to `events`, which the caller drains.
pub trait Qdisc: Send {
    /// Offers a packet to the queue.
    fn enqueue(&mut self, now: Instant, packet: Packet, events: &mut Vec<QdiscEvent>) -> Verdict;
    /// Takes the next packet to transmit, if any; AQM drops at dequeue are reported in `events`.
    fn dequeue(&mut self, now: Instant, events: &mut Vec<QdiscEvent>) -> Option<Packet>;
    fn backlog_packets(&self) -> usize;
    fn backlog_bytes(&self) -> usize;
    fn stats(&self) -> &Stats;
    /// When the discipline wants `on_timer` called (PIE's and DualPI2's tupdate), if ever.
    fn next_timer(&self) -> Option<Instant> {
        None
    }
    /// Runs timers that are due at `now`. Calling it early is harmless.
    fn on_timer(&mut self, _now: Instant) {}
    /// The discipline's tc name (`fifo`, `codel`, …).
    fn kind(&self) -> &'static str;
    /// Per-sub-queue counters for disciplines with several queues (DualPI2: `[c, l]`); empty
    /// for the others. Dequeued and dropped packets carry their sub-queue in `Packet::class`.
    fn class_stats(&self) -> Vec<ClassStats> {
        Vec::new()
    }
}
