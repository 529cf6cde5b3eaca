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

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use proptest::prelude::*;
    use wire::Duration;

    use super::*;
    use crate::testutil::{tcp6, udp4};

    /// Specs with small limits, so that random traffic reaches every branch.
    const SPECS: &[&str] = &[
        "fifo limit 20",
        "bfifo limit 20000",
        "codel limit 20 target 1ms interval 5ms ecn",
        "codel limit 20 target 1ms interval 5ms ce_threshold 500us",
        "fq_codel limit 20 flows 4 quantum 300 target 1ms interval 5ms memory_limit 15000 \
         drop_batch 3 ce_threshold 1ms",
        "fq_codel limit 30 target 1ms interval 4ms noecn",
        "pie limit 20 target 2ms tupdate 3ms ecn bytemode",
        "pie limit 20 target 2ms tupdate 3ms dq_rate_estimator",
        "dualpi2 limit 20 target 2ms tupdate 3ms",
        "dualpi2 limit 20 drop_enqueue any_ect overflow step_thresh 2p memlimit 20000 \
         target 1ms tupdate 2ms",
    ];

    #[derive(Clone, Debug)]
    enum Op {
        Enqueue {
            port: u16,
            len: usize,
            ecn: u8,
            v6: bool,
        },
        Dequeue,
        Advance(u64),
        Timer,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0u16..6, 60usize..1500, 0u8..4, any::<bool>())
                .prop_map(|(port, len, ecn, v6)| Op::Enqueue { port, len, ecn, v6 }),
            3 => Just(Op::Dequeue),
            2 => (0u64..3000).prop_map(Op::Advance),
            1 => Just(Op::Timer),
        ]
    }

    proptest! {
        #[test]
        fn every_packet_is_queued_sent_or_reported_dropped(
            spec in proptest::sample::select(SPECS),
            ops in proptest::collection::vec(op(), 1..400),
            seed in any::<u64>(),
        ) {
            let mut q = parse_spec(spec).unwrap().build(seed);
            let mut now = Instant::ZERO;
            // id → length of every packet the queue holds, by our own count.
            let mut held: HashMap<u64, usize> = HashMap::new();
            let (mut drops, mut marks) = (0u64, 0u64);
            let mut next_id = 0u64;
            for op in ops {
                let mut ev = Vec::new();
                match op {
                    Op::Enqueue { port, len, ecn, v6 } => {
                        next_id += 1;
                        let ecn = wire::Ecn::from_bits(ecn);
                        let p = if v6 { tcp6(next_id, port, len, ecn) } else { udp4(next_id, port, len, ecn) };
                        held.insert(next_id, len);
                        let verdict = q.enqueue(now, p, &mut ev);
                        let self_dropped = ev.iter().any(|e| matches!(e, QdiscEvent::Dropped { packet, .. } if packet.id == next_id));
                        prop_assert_eq!(verdict == Verdict::Dropped, self_dropped);
                        for e in &ev {
                            if let QdiscEvent::Marked { id, .. } = e {
                                prop_assert_eq!(*id, next_id);
                            }
                        }
                    }
                    Op::Dequeue => {
                        let got = q.dequeue(now, &mut ev);
                        if let Some(p) = &got {
                            prop_assert_eq!(held.remove(&p.id), Some(p.len()));
                            prop_assert!(p.enqueued_at <= now);
                        }
                        for e in &ev {
                            if let QdiscEvent::Marked { id, .. } = e {
                                prop_assert_eq!(Some(*id), got.as_ref().map(|p| p.id));
                                prop_assert_eq!(got.as_ref().unwrap().ecn(), wire::Ecn::Ce);
                            }
                        }
                    }
                    Op::Advance(us) => now += Duration::from_micros(us),
                    Op::Timer => {
                        // Wake when asked (or now, if that is already past), as the link does.
                        if let Some(t) = q.next_timer() {
                            now = now.max(t);
                        }
                        q.on_timer(now);
                        if let Some(t) = q.next_timer() {
                            prop_assert!(t > now);
                        }
                    }
                }
                for e in ev {
                    match e {
                        QdiscEvent::Dropped { packet, .. } => {
                            // Dropped once, and only a packet it held.
                            prop_assert_eq!(held.remove(&packet.id), Some(packet.len()));
                            drops += 1;
                        }
                        QdiscEvent::Marked { .. } => marks += 1,
                    }
                }
                prop_assert_eq!(q.backlog_packets(), held.len());
                prop_assert_eq!(q.backlog_bytes(), held.values().sum::<usize>());
            }
            let s = q.stats();
            prop_assert_eq!((s.drops(), s.marks()), (drops, marks));
            prop_assert_eq!(s.packets_in, s.packets_out + s.drops() + q.backlog_packets() as u64);
            let classes = q.class_stats();
            if !classes.is_empty() {
                prop_assert_eq!(classes.iter().map(|c| c.backlog_packets).sum::<usize>(), held.len());
                for cause in Cause::ALL {
                    prop_assert_eq!(classes.iter().map(|c| c.count(cause)).sum::<u64>(), s.count(cause));
                }
                prop_assert_eq!(classes.iter().map(|c| c.packets_out).sum::<u64>(), s.packets_out);
            }
        }
    }
}
