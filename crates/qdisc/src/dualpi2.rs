//! `dualpi2`: the coupled dual-queue AQM for L4S (RFC 9332), as Linux's sch_dualpi2.c.
//!
//! Packets whose ECN field is ECT(1) or CE (the L4S identifier, RFC 9331; any ECT with
//! `any_ect`) go to the L queue, all others to the C (classic) queue. One PI controller (PI2)
//! updates a base probability p' every `tupdate` from the larger of the two head-of-line
//! delays (RFC 9332 §2.5.2, Appendix A). The L queue marks with `k·p'` and, on its own, with a
//! step at `step_thresh` of sojourn time; the C queue drops (or marks ECT) with `p'²`, which is
//! what makes classic and scalable flows share capacity (§2.4). A weighted round robin in
//! bytes serves L first but guarantees the C queue `c_protection` percent (10 % by default)
//! whenever both have packets (§2.5.1). In overload (`k·p' > 1`), L4S packets are also subject
//! to the classic `p'²` drop, and every drop counts as [`Cause::Overload`] (Linux's
//! `drop_on_overload`); with `overflow` instead, p' is capped so L only marks and the queues
//! tail-drop at the limit.
//!
//! Linux's defaults: limit 10000 packets, memory limit `limit × 2 × MTU`, target 15 ms,
//! tupdate 16 ms, alpha 0.16 Hz and beta 3.2 Hz (given to Linux in 1/256 Hz: 41 and 819),
//! step 1 ms, coupling factor 2, drop on overload, drop at dequeue, C protection 10 %, L4S on
//! ECT(1) only. Dequeued and dropped packets carry their queue in `Packet::class`: 1 for L,
//! 0 for C.
//!
//! Where we differ from Linux: memory is counted as the packets' IP bytes, not
//! `skb->truesize`; there are no tc filters (so no `LLLL` class) and no GSO to split; the PI
//! update saturates p' at 0 and 1 instead of detecting `u32` wrap-around.

use std::collections::VecDeque;

use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use wire::{Duration, Ecn, Instant, Packet};

use crate::{set_ce, Cause, ClassStats, Qdisc, QdiscEvent, Stats, Verdict};

/// Probabilities are `u32` fractions of this (Linux's `MAX_PROB`).
pub const MAX_PROB: u32 = u32::MAX;

/// `Packet::class` of the classic queue.
pub const CLASS_C: u8 = 0;
/// `Packet::class` of the L4S queue.
pub const CLASS_L: u8 = 1;

/// Where the L queue's step threshold is measured.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum StepThresh {
    /// Sojourn time of the packet being dequeued (Linux default, 1 ms).
    Time(Duration),
    /// Packets left in the L queue.
    Packets(u32),
}

/// Parameters of a dualpi2 queue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Params {
    /// Packets in both queues together; Linux default 10000.
    pub limit_packets: usize,
    /// Bytes in both queues together; Linux default `limit × 2 × MTU`.
    pub memory_limit_bytes: usize,
    /// PI2 target queue delay; default 15 ms.
    pub target: Duration,
    /// PI2 update period; default 16 ms.
    pub tupdate: Duration,
    /// Integral gain in 1/256 Hz, as Linux's netlink takes it; default 41 (0.16 Hz).
    pub alpha_256: u32,
    /// Proportional gain in 1/256 Hz; default 819 (3.2 Hz).
    pub beta_256: u32,
    pub step_thresh: StepThresh,
    /// Apply the step only when the L queue holds at least this many packets; default 0.
    pub min_qlen_step: u32,
    /// k: L marks with `k·p'`; default 2 (RFC 9332 §2.4).
    pub coupling_factor: u8,
    /// On overload, drop L4S packets with the classic probability (true, default) or keep
    /// marking them and let the queue overflow (false, tc's `overflow`).
    pub drop_overload: bool,
    /// Apply the PI2 decision at enqueue (true) or dequeue (false, default).
    pub drop_early: bool,
    /// The C queue's share of the scheduler in percent when both queues are busy; default 10.
    pub c_protection_percent: u8,
    /// Classify every ECT packet to L, not just ECT(1) and CE.
    pub any_ect: bool,
    /// The link MTU: below two of these queued, nothing is dropped or marked by PI2; it also
    /// sizes the scheduler's initial credit.
    pub mtu_bytes: usize,
}

impl Params {
    /// Linux's memory limit for a packet limit: `limit × 2 × MTU`.
    pub fn default_memory_limit(limit_packets: usize, mtu_bytes: usize) -> usize {
        limit_packets.saturating_mul(2 * mtu_bytes)
    }
}

impl Default for Params {
    fn default() -> Params {
        Params {
            limit_packets: 10_000,
            memory_limit_bytes: Params::default_memory_limit(10_000, 1500),
            target: Duration::from_millis(15),
            tupdate: Duration::from_millis(16),
            alpha_256: 41,
            beta_256: 819,
            step_thresh: StepThresh::Time(Duration::from_millis(1)),
            min_qlen_step: 0,
            coupling_factor: 2,
            drop_overload: true,
            drop_early: false,
            c_protection_percent: 10,
            any_ect: false,
            mtu_bytes: 1500,
        }
    }
}

/// A queued packet and what was decided about it at enqueue.
struct Entry {
    packet: Packet,
    /// Subject to the step threshold (L4S, and the L queue was long enough).
    apply_step: bool,
}

/// The PI2 controller's state.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pi2State {
    /// p', the base probability, as a fraction of [`MAX_PROB`].
    pub prob: u32,
    /// Queue delay at the previous update, ns.
    pub last_qdelay_ns: u64,
    /// When the next update is due; `None` until the first packet arrives.
    pub next_update: Option<Instant>,
}

/// A dualpi2 queue.
pub struct DualPi2 {
    params: Params,
    /// Gains per nanosecond of delay in `MAX_PROB / 2⁶` units (Linux's internal scaling).
    alpha: u64,
    beta: u64,
    c_protection_init: i64,
    c_queue: VecDeque<Entry>,
    l_queue: VecDeque<Entry>,
    c_bytes: usize,
    l_bytes: usize,
    /// WRR credit in bytes × percent: L is served while it is ≤ 0.
    credit: i64,
    pi2: Pi2State,
    rng: ChaCha8Rng,
    stats: Stats,
    class_stats: [ClassStats; 2],
}

fn duration_ns(d: Duration) -> u64 {
    wire::time::duration_nanos(d).max(1)
}

/// Linux `dualpi2_scale_alpha_beta`: 1/256 Hz to `MAX_PROB / 64` per ns.
fn scale_gain(param_256: u32) -> u64 {
    ((u64::from(param_256) * u64::from(MAX_PROB)) >> 2) / 1_000_000_000
}

impl DualPi2 {
    pub fn new(mut params: Params, seed: u64) -> DualPi2 {
        params.coupling_factor = params.coupling_factor.max(1);
        params.c_protection_percent = params.c_protection_percent.min(100);
        let wc = i64::from(params.c_protection_percent);
        DualPi2 {
            alpha: scale_gain(params.alpha_256),
            beta: scale_gain(params.beta_256),
            // Linux: MTU × (wc − wl); negative by default, so L goes first after a reset.
            c_protection_init: params.mtu_bytes as i64 * (wc - (100 - wc)),
            credit: params.mtu_bytes as i64 * (wc - (100 - wc)),
            params,
            c_queue: VecDeque::new(),
            l_queue: VecDeque::new(),
            c_bytes: 0,
            l_bytes: 0,
            pi2: Pi2State::default(),
            rng: ChaCha8Rng::seed_from_u64(seed),
            stats: Stats::default(),
            class_stats: [
                ClassStats {
                    name: "c",
                    class: CLASS_C,
                    ..ClassStats::default()
                },
                ClassStats {
                    name: "l",
                    class: CLASS_L,
                    ..ClassStats::default()
                },
            ],
        }
    }

    /// The PI2 controller's state, for logs and tests.
    pub fn pi2(&self) -> &Pi2State {
        &self.pi2
    }

    /// p' as a fraction.
    pub fn base_probability(&self) -> f64 {
        f64::from(self.pi2.prob) / f64::from(MAX_PROB)
    }

    fn classify(&self, ecn: Ecn) -> u8 {
        // Linux masks the ECN field: 0b01 (ECT(1) and CE) or 0b11 (any ECT).
        let mask = if self.params.any_ect { 0b11 } else { 0b01 };
        if ecn.bits() & mask != 0 {
            CLASS_L
        } else {
            CLASS_C
        }
    }

    fn roll(&mut self, prob: u32) -> bool {
        self.rng.next_u32() <= prob
    }

    /// The PI2 update (RFC 9332 Appendix A.2 `dualpi2_update`, Linux
    /// `calculate_probability`):
    /// `p' += alpha·(qdelay − target) + beta·(qdelay − qdelay_old)`, with qdelay the larger
    /// head-of-line delay of the two queues at `t`.
    fn update_probability(&mut self, t: Instant) {
        let head_delay = |q: &VecDeque<Entry>| {
            q.front()
                .map_or(0, |e| (t - e.packet.enqueued_at).as_nanos() as i128)
        };
        let qdelay = head_delay(&self.c_queue).max(head_delay(&self.l_queue));
        let target = self.params.target.as_nanos() as i128;
        let delta = (qdelay - target) * i128::from(self.alpha)
            + (qdelay - i128::from(self.pi2.last_qdelay_ns)) * i128::from(self.beta);
        self.pi2.last_qdelay_ns = qdelay as u64;
        // Internal gains are in units of 64 ns (Linux's ALPHA_BETA_GRANULARITY).
        let new = (i128::from(self.pi2.prob) + delta / 64).clamp(0, i128::from(MAX_PROB)) as u32;
        self.pi2.prob = if self.params.drop_overload {
            new
        } else {
            // Cap so that k·p' ≤ 100 %: L keeps marking, never overloads into drops.
            new.min(MAX_PROB / u32::from(self.params.coupling_factor))
        };
    }

    /// The PI2 decision for one packet (Linux `must_drop`): `Some(cause)` to drop it; marks
    /// are applied in place and reported. `backlog` is what counts against the 2-MTU floor.
    fn must_drop(
        &mut self,
        entry: &mut Entry,
        backlog: usize,
        drop_cause: Cause,
        events: &mut Vec<QdiscEvent>,
    ) -> Option<Cause> {
        if backlog < 2 * self.params.mtu_bytes {
            return None;
        }
        let prob = self.pi2.prob;
        let local_l_prob = u64::from(prob) * u64::from(self.params.coupling_factor);
        let overload = local_l_prob > u64::from(MAX_PROB);
        let ect = entry.packet.ecn().is_ect();
        let class = entry.packet.class;
        let mark = if class == CLASS_C {
            // p_C = p'² (RFC 9332 §2.4), as two independent rolls.
            if !(self.roll(prob) && self.roll(prob)) {
                return None;
            }
            if overload || !ect {
                return Some(if overload {
                    Cause::Overload
                } else {
                    drop_cause
                });
            }
            true
        } else if overload {
            // Saturated: classic drops first, when configured to trade loss for latency.
            if self.params.drop_overload && self.roll(prob) && self.roll(prob) {
                return Some(Cause::Overload);
            }
            true
        } else {
            // p_L = k·p' (RFC 9332 §2.4); fits in u32 as there is no overload.
            if !self.roll(local_l_prob as u32) {
                return None;
            }
            if !ect {
                return Some(drop_cause);
            }
            true
        };
        if mark && set_ce(&mut entry.packet) {
            self.record(class, Cause::CeMark);
            events.push(QdiscEvent::Marked {
                id: entry.packet.id,
                cause: Cause::CeMark,
            });
        }
        None
    }

    fn record(&mut self, class: u8, cause: Cause) {
        self.stats.record(cause);
        self.class_stats[usize::from(class)].by_cause[cause as usize] += 1;
    }

    fn drop_entry(&mut self, entry: Entry, cause: Cause, events: &mut Vec<QdiscEvent>) {
        self.record(entry.packet.class, cause);
        events.push(QdiscEvent::Dropped {
            packet: entry.packet,
            cause,
        });
    }

    /// Takes the next packet by the WRR credit (Linux `dequeue_packet`); returns it with the
    /// credit change to apply if it is sent.
    fn next_entry(&mut self) -> Option<(Entry, i64)> {
        let c_len = self.c_queue.len();
        let l_len = self.l_queue.len();
        let wc = i64::from(self.params.c_protection_percent);
        let wl = 100 - wc;
        if l_len > 0 && (c_len == 0 || self.credit <= 0) {
            let e = self.l_queue.pop_front()?;
            self.l_bytes -= e.packet.len();
            let change = e.packet.len() as i64 * if c_len > 0 { wc } else { 0 };
            Some((e, change))
        } else if c_len > 0 {
            let e = self.c_queue.pop_front()?;
            self.c_bytes -= e.packet.len();
            let change = e.packet.len() as i64 * if l_len > 0 { -wl } else { 0 };
            Some((e, change))
        } else {
            self.credit = self.c_protection_init;
            None
        }
    }

    fn backlog(&self) -> usize {
        self.c_bytes + self.l_bytes
    }
}

impl Qdisc for DualPi2 {
    fn enqueue(
        &mut self,
        now: Instant,
        mut packet: Packet,
        events: &mut Vec<QdiscEvent>,
    ) -> Verdict {
        self.on_timer(now);
        if self.pi2.next_update.is_none() {
            self.pi2.next_update = Some(now + self.params.tupdate);
        }
        self.stats.packets_in += 1;
        let class = self.classify(packet.ecn());
        packet.class = class;
        self.class_stats[usize::from(class)].packets_in += 1;
        let len = packet.len();
        let qlen = self.c_queue.len() + self.l_queue.len();
        if qlen >= self.params.limit_packets
            || self.backlog() + len > self.params.memory_limit_bytes
        {
            self.drop_entry(
                Entry {
                    packet,
                    apply_step: false,
                },
                Cause::Overlimit,
                events,
            );
            return Verdict::Dropped;
        }
        let mut entry = Entry {
            packet,
            apply_step: false,
        };
        if self.params.drop_early {
            let backlog = self.backlog();
            if let Some(cause) = self.must_drop(&mut entry, backlog, Cause::AqmEnqueue, events) {
                self.drop_entry(entry, cause, events);
                return Verdict::Dropped;
            }
        }
        entry.packet.enqueued_at = now;
        if class == CLASS_L {
            entry.apply_step = self.l_queue.len() >= self.params.min_qlen_step as usize;
            self.l_bytes += len;
            self.l_queue.push_back(entry);
        } else {
            self.c_bytes += len;
            self.c_queue.push_back(entry);
        }
        self.stats.note_backlog(qlen + 1, self.backlog());
        Verdict::Queued
    }

    fn dequeue(&mut self, now: Instant, events: &mut Vec<QdiscEvent>) -> Option<Packet> {
        self.on_timer(now);
        while let Some((mut entry, credit_change)) = self.next_entry() {
            if !self.params.drop_early {
                let backlog = self.backlog();
                if let Some(cause) = self.must_drop(&mut entry, backlog, Cause::AqmDequeue, events)
                {
                    self.drop_entry(entry, cause, events);
                    continue;
                }
            }
            if entry.packet.class == CLASS_L && entry.apply_step {
                // The step AQM of the L queue (RFC 9332 §2.5.1.2): a shallow, immediate
                // threshold on the native L4S signal.
                let over = match self.params.step_thresh {
                    StepThresh::Time(t) => now - entry.packet.enqueued_at > t,
                    StepThresh::Packets(n) => self.l_queue.len() > n as usize,
                };
                if over {
                    if !entry.packet.ecn().is_ect() {
                        self.drop_entry(entry, Cause::AqmDequeue, events);
                        continue;
                    }
                    if set_ce(&mut entry.packet) {
                        self.record(CLASS_L, Cause::StepMark);
                        events.push(QdiscEvent::Marked {
                            id: entry.packet.id,
                            cause: Cause::StepMark,
                        });
                    }
                }
            }
            self.credit += credit_change;
            let p = entry.packet;
            let cs = &mut self.class_stats[usize::from(p.class)];
            cs.packets_out += 1;
            cs.bytes_out += p.len() as u64;
            self.stats.packets_out += 1;
            self.stats.bytes_out += p.len() as u64;
            return Some(p);
        }
        None
    }

    fn backlog_packets(&self) -> usize {
        self.c_queue.len() + self.l_queue.len()
    }
    fn backlog_bytes(&self) -> usize {
        self.backlog()
    }
    fn stats(&self) -> &Stats {
        &self.stats
    }

    fn next_timer(&self) -> Option<Instant> {
        self.pi2.next_update
    }

    fn on_timer(&mut self, now: Instant) {
        let Some(mut due) = self.pi2.next_update else {
            return;
        };
        let period = self.params.tupdate.max(Duration::from_nanos(1));
        let mut steps = 0u32;
        while due <= now {
            if self.c_queue.is_empty() && self.l_queue.is_empty() && self.pi2.last_qdelay_ns == 0 {
                // Idle: every update until `now` subtracts the same alpha·target, so apply
                // them all at once (the lab need not wake an idle queue every tupdate).
                let n = u128::from(wire::time::duration_nanos(now - due) / duration_ns(period) + 1);
                let step = u128::from(self.alpha) * self.params.target.as_nanos() / 64;
                let down = (n * step).min(u128::from(MAX_PROB)) as u32;
                self.pi2.prob = self.pi2.prob.saturating_sub(down);
                due += Duration::from_nanos((n as u64).saturating_mul(duration_ns(period)));
                break;
            }
            self.update_probability(due);
            due += period;
            steps += 1;
            if steps == 10_000 {
                // A caller that stayed away this long with packets queued: resume the
                // schedule from now rather than replay it.
                due = now + period;
                break;
            }
        }
        self.pi2.next_update = Some(due);
    }

    fn kind(&self) -> &'static str {
        "dualpi2"
    }

    fn class_stats(&self) -> Vec<ClassStats> {
        let mut out = self.class_stats.to_vec();
        out[0].backlog_packets = self.c_queue.len();
        out[0].backlog_bytes = self.c_bytes;
        out[1].backlog_packets = self.l_queue.len();
        out[1].backlog_bytes = self.l_bytes;
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{ms, tcp6, udp4};

    /// A queue whose p' stays where the test puts it (no update for 1000 s).
    fn frozen(params: Params, prob: f64) -> DualPi2 {
        let mut q = DualPi2::new(
            Params {
                tupdate: Duration::from_secs(1000),
                ..params
            },
            11,
        );
        q.pi2.prob = (prob * f64::from(MAX_PROB)) as u32;
        q
    }

    /// Keeps `standing` packets of `ecn` queued behind the head and takes `n` heads, all at
    /// `t = 0`, so that sojourn times are zero and only PI2 acts. Every packet taken off
    /// (sent or dropped) is one PI2 decision; returns the events.
    fn pass(q: &mut DualPi2, ecn: Ecn, n: u64, standing: usize) -> Vec<QdiscEvent> {
        let mut ev = Vec::new();
        let mut id = 0;
        let mut decided = 0;
        while decided < n {
            while q.backlog_packets() <= standing {
                id += 1;
                q.enqueue(ms(0), udp4(id, 1, 1500, ecn), &mut ev);
            }
            let before = q.backlog_packets();
            if q.dequeue(ms(0), &mut ev).is_some() {
                decided += 1;
            }
            // Drops made while finding that packet were decisions too.
            decided += (before - q.backlog_packets()).saturating_sub(1) as u64;
        }
        ev
    }

    fn count(ev: &[QdiscEvent], cause: Cause, dropped: bool) -> usize {
        ev.iter()
            .filter(|e| match e {
                QdiscEvent::Dropped { cause: c, .. } => dropped && *c == cause,
                QdiscEvent::Marked { cause: c, .. } => !dropped && *c == cause,
            })
            .count()
    }

    #[test]
    fn ect1_and_ce_go_to_the_l_queue_and_the_rest_to_c() {
        let mut q = DualPi2::new(Params::default(), 1);
        let mut ev = Vec::new();
        let sent = [
            (Ecn::NotEct, CLASS_C),
            (Ecn::Ect0, CLASS_C),
            (Ecn::Ect1, CLASS_L),
            (Ecn::Ce, CLASS_L),
        ];
        for (i, (ecn, _)) in sent.iter().enumerate() {
            q.enqueue(ms(0), udp4(i as u64, 1, 100, *ecn), &mut ev);
        }
        let cs = q.class_stats();
        assert_eq!((cs[0].packets_in, cs[1].packets_in), (2, 2));
        assert_eq!((cs[0].backlog_packets, cs[1].backlog_packets), (2, 2));
        // L goes first; every packet carries its queue.
        let mut got = Vec::new();
        while let Some(p) = q.dequeue(ms(0), &mut ev) {
            got.push((p.id, p.class));
        }
        assert_eq!(
            got,
            [(2, CLASS_L), (3, CLASS_L), (0, CLASS_C), (1, CLASS_C)]
        );
        // With any_ect, ECT(0) is L4S too (IPv6 as well as IPv4).
        let mut q = DualPi2::new(
            Params {
                any_ect: true,
                ..Params::default()
            },
            1,
        );
        q.enqueue(ms(0), tcp6(9, 1, 100, Ecn::Ect0), &mut ev);
        assert_eq!(q.dequeue(ms(0), &mut ev).unwrap().class, CLASS_L);
    }

    #[test]
    fn l_marks_with_k_times_p_and_c_with_p_squared() {
        let n = 40_000;
        // p' = 0.1: L marks 20 %, C marks (ECT(0)) or drops (Not-ECT) 1 %.
        let mut q = frozen(Params::default(), 0.1);
        let ev = pass(&mut q, Ecn::Ect1, n, 50);
        let l_marks = count(&ev, Cause::CeMark, false) as f64 / n as f64;
        assert!((l_marks - 0.2).abs() < 0.01, "L mark rate {l_marks}");
        assert_eq!(q.stats().drops(), 0);
        assert_eq!(
            q.class_stats()[1].count(Cause::CeMark),
            count(&ev, Cause::CeMark, false) as u64
        );

        let mut q = frozen(Params::default(), 0.1);
        let ev = pass(&mut q, Ecn::Ect0, n, 50);
        let c_marks = count(&ev, Cause::CeMark, false) as f64 / n as f64;
        assert!((c_marks - 0.01).abs() < 0.002, "C mark rate {c_marks}");

        let mut q = frozen(Params::default(), 0.1);
        let ev = pass(&mut q, Ecn::NotEct, n, 50);
        let c_drops = count(&ev, Cause::AqmDequeue, true) as f64 / n as f64;
        assert!((c_drops - 0.01).abs() < 0.002, "C drop rate {c_drops}");
        assert_eq!(q.stats().marks(), 0);

        // k = 4 doubles the L rate and leaves C alone.
        let mut q = frozen(
            Params {
                coupling_factor: 4,
                ..Params::default()
            },
            0.1,
        );
        let ev = pass(&mut q, Ecn::Ect1, n, 50);
        let l_marks = count(&ev, Cause::CeMark, false) as f64 / n as f64;
        assert!((l_marks - 0.4).abs() < 0.01, "L mark rate {l_marks}");
    }

    #[test]
    fn nothing_is_marked_below_two_mtus_of_backlog() {
        let mut q = frozen(Params::default(), 0.4);
        // One standing packet plus the one passing: never 2 × 1500 bytes behind the head.
        let ev = pass(&mut q, Ecn::Ect1, 1000, 1);
        assert!(ev.is_empty());
    }

    #[test]
    fn l_packets_above_the_step_threshold_are_marked() {
        let mut q = DualPi2::new(Params::default(), 1);
        let mut ev = Vec::new();
        for i in 0..4 {
            q.enqueue(ms(0), udp4(i, 1, 1500, Ecn::Ect1), &mut ev);
        }
        q.enqueue(ms(0), udp4(10, 1, 1500, Ecn::Ect0), &mut ev);
        // Sojourn exactly 1 ms: not above the threshold.
        assert_eq!(q.dequeue(ms(1), &mut ev).unwrap().ecn(), Ecn::Ect1);
        let p = q.dequeue(Instant::from_micros(1001), &mut ev).unwrap();
        assert_eq!(p.ecn(), Ecn::Ce);
        assert!(crate::testutil::v4_checksum_ok(&p));
        assert_eq!(
            ev,
            [QdiscEvent::Marked {
                id: 1,
                cause: Cause::StepMark
            }]
        );
        // C packets are never step-marked, however long they waited.
        q.dequeue(ms(5), &mut ev);
        q.dequeue(ms(5), &mut ev);
        let c = q.dequeue(ms(5), &mut ev).unwrap();
        assert_eq!((c.class, c.ecn()), (CLASS_C, Ecn::Ect0));
        assert_eq!(q.class_stats()[1].count(Cause::StepMark), 3);
        assert_eq!(q.class_stats()[0].count(Cause::StepMark), 0);
    }

    #[test]
    fn a_step_in_packets_counts_the_l_queue() {
        let mut q = DualPi2::new(
            Params {
                step_thresh: StepThresh::Packets(2),
                ..Params::default()
            },
            1,
        );
        let mut ev = Vec::new();
        for i in 0..5 {
            q.enqueue(ms(0), udp4(i, 1, 100, Ecn::Ect1), &mut ev);
        }
        let ecns: Vec<Ecn> = (0..5)
            .map(|_| q.dequeue(ms(9), &mut ev).unwrap().ecn())
            .collect();
        // Four, three, two, one, zero left behind: marked while more than two.
        assert_eq!(ecns, [Ecn::Ce, Ecn::Ce, Ecn::Ect1, Ecn::Ect1, Ecn::Ect1]);
    }

    #[test]
    fn the_scheduler_gives_classic_its_protected_share() {
        for (wc, c_every) in [(10u8, 10usize), (50, 2)] {
            let mut q = DualPi2::new(
                Params {
                    c_protection_percent: wc,
                    ..Params::default()
                },
                1,
            );
            let mut ev = Vec::new();
            for i in 0..1000 {
                q.enqueue(ms(0), udp4(i, 1, 1500, Ecn::Ect1), &mut ev);
                q.enqueue(ms(0), udp4(10_000 + i, 2, 1500, Ecn::NotEct), &mut ev);
            }
            let classes: Vec<u8> = (0..1000)
                .map(|_| q.dequeue(ms(0), &mut ev).unwrap().class)
                .collect();
            let c = classes.iter().filter(|&&c| c == CLASS_C).count();
            assert_eq!(c, 1000 / c_every, "wc {wc}");
            // L first after a reset (its credit starts at MTU × (wc − wl) ≤ 0).
            assert_eq!(classes[0], CLASS_L);
        }
        // A queue alone gets everything.
        let mut q = DualPi2::new(Params::default(), 1);
        let mut ev = Vec::new();
        for i in 0..20 {
            q.enqueue(ms(0), udp4(i, 2, 1500, Ecn::NotEct), &mut ev);
        }
        assert!((0..20).all(|_| q.dequeue(ms(0), &mut ev).unwrap().class == CLASS_C));
    }

    #[test]
    fn the_pi_update_follows_alpha_and_beta() {
        let mut q = DualPi2::new(Params::default(), 1);
        let mut ev = Vec::new();
        q.enqueue(ms(0), udp4(1, 1, 1500, Ecn::NotEct), &mut ev);
        assert_eq!(q.next_timer(), Some(ms(16)));
        // At 25 ms the head has waited 25 ms: p' = 0.16·(0.025 − 0.015) + 3.2·(0.025 − 0)
        // with Linux's 41/256 and 819/256 Hz.
        q.pi2.next_update = Some(ms(25));
        q.on_timer(ms(25));
        let want = 41.0 / 256.0 * 0.010 + 819.0 / 256.0 * 0.025;
        let got = q.base_probability();
        assert!((got - want).abs() / want < 0.001, "{got} vs {want}");
        assert_eq!(q.next_timer(), Some(ms(41)));
        // Queue emptied: below target and falling, p' goes down, to 0 and no lower.
        q.dequeue(ms(26), &mut ev);
        q.on_timer(ms(41));
        assert!(q.base_probability() < got);
        q.on_timer(ms(100_000));
        assert_eq!(q.pi2().prob, 0);
        assert_eq!(q.next_timer(), Some(ms(100_009)));
    }

    #[test]
    fn overload_drops_l4s_with_the_classic_probability() {
        let n = 20_000;
        // p' = 0.8: k·p' = 1.6 > 1, overload. p'² = 0.64.
        let mut q = frozen(Params::default(), 0.8);
        let ev = pass(&mut q, Ecn::Ect1, n, 50);
        let drops = count(&ev, Cause::Overload, true) as f64 / n as f64;
        assert!((drops - 0.64).abs() < 0.02, "{drops}");
        // What is not dropped is marked.
        assert_eq!(
            count(&ev, Cause::CeMark, false) as u64,
            q.stats().packets_out
        );
        // Classic ECT packets are dropped, not marked, in overload.
        let mut q = frozen(Params::default(), 0.8);
        let ev = pass(&mut q, Ecn::Ect0, n, 50);
        assert_eq!(count(&ev, Cause::CeMark, false), 0);
        assert!(count(&ev, Cause::Overload, true) > n as usize / 2);
        // With `overflow`, L4S keeps its no-loss marking and p' is capped at 1/k.
        let mut q = frozen(
            Params {
                drop_overload: false,
                ..Params::default()
            },
            0.8,
        );
        let ev = pass(&mut q, Ecn::Ect1, 2000, 50);
        assert_eq!(count(&ev, Cause::Overload, true), 0);
        assert_eq!(count(&ev, Cause::CeMark, false), 2000);
        let mut q = DualPi2::new(
            Params {
                drop_overload: false,
                ..Params::default()
            },
            1,
        );
        let mut ev = Vec::new();
        q.enqueue(ms(0), udp4(1, 1, 1500, Ecn::NotEct), &mut ev);
        q.on_timer(ms(16 * 200));
        assert_eq!(q.pi2().prob, MAX_PROB / 2);
    }

    #[test]
    fn the_limits_tail_drop() {
        let mut q = DualPi2::new(
            Params {
                limit_packets: 3,
                ..Params::default()
            },
            1,
        );
        let mut ev = Vec::new();
        for i in 0..4 {
            q.enqueue(ms(0), udp4(i, 1, 100, Ecn::Ect1), &mut ev);
        }
        assert!(
            matches!(&ev[..], [QdiscEvent::Dropped { packet, cause: Cause::Overlimit }] if packet.id == 3 && packet.class == CLASS_L)
        );
        assert_eq!(q.class_stats()[1].count(Cause::Overlimit), 1);
    }
}
