//! The CoDel control law (RFC 8289), shared by [`crate::codel`] and [`crate::fq_codel`], as
//! Linux's `include/net/codel.h` and `codel_impl.h` run it.
//!
//! This module owns the dequeue-side decision: given the head of a queue and `now`, whether to
//! drop it (or set CE), when the next drop is due (`interval / √count`), and the state that
//! carries across dropping episodes. It does not own a queue, limits or flows: the caller hands
//! it a [`Head`] that pops packets and keeps its own backlog accounting.
//!
//! Where Linux differs from the RFC 8289 pseudocode (§5), we follow Linux:
//! - `1/√count` is Linux's fixed-point Newton step (Q0.32 arithmetic, 16 bits stored), one
//!   step per change of `count`, not an exact square root. The first few spacings therefore
//!   differ from `interval/√count` (count 2 gives `interval/2`, not `interval/1.41`); from
//!   count 4 on the error is a few percent and shrinks.
//! - "Nothing to drop" is `backlog ≤ one MTU` (the device MTU, `mtu_bytes`), measured after the
//!   head has been taken off, where the RFC says `bytes() ≤ MAXPACKET`.
//! - `ok_to_drop` needs `now` strictly after `first_above_time`; the RFC has `>=`.
//! - On entering the dropping state with ECN on, an ECT packet is marked and kept, and the
//!   count rules are applied all the same (the RFC drops and dequeues the next packet).
//! - `ce_threshold` (not in the RFC): any ECT packet whose sojourn exceeds it gets CE as a
//!   shallow, immediate signal ([`Cause::StepMark`]), independent of the control law.
//! - Time is nanoseconds in a `u64`; Linux counts in 1024 ns units in a wrapping `u32`.

use wire::{Duration, Instant, Packet};

use crate::{set_ce, Cause, QdiscEvent, Stats};

/// Bits of `rec_inv_sqrt` kept between steps (Linux's `REC_INV_SQRT_BITS`).
const REC_INV_SQRT_BITS: u32 = 16;
const REC_INV_SQRT_SHIFT: u32 = 32 - REC_INV_SQRT_BITS;

/// The parameters of the control law.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CodelParams {
    /// Acceptable standing queue delay (RFC 8289 §4.4); Linux default 5 ms.
    pub target: Duration,
    /// Window over which the delay must stay above target before dropping, and the base of
    /// the drop spacing (RFC 8289 §4.3); Linux default 100 ms.
    pub interval: Duration,
    /// With this many bytes or fewer left queued, never drop (Linux: the device MTU).
    pub mtu_bytes: usize,
    /// Set CE on ECT packets instead of dropping them.
    pub ecn: bool,
    /// Mark ECT packets whose sojourn time exceeds this; `None` disables it (Linux default).
    pub ce_threshold: Option<Duration>,
}

impl Default for CodelParams {
    /// Linux's defaults for plain codel: 5 ms, 100 ms, MTU 1500, no ECN, no ce_threshold.
    fn default() -> CodelParams {
        CodelParams {
            target: Duration::from_millis(5),
            interval: Duration::from_millis(100),
            mtu_bytes: 1500,
            ecn: false,
            ce_threshold: None,
        }
    }
}

/// The per-queue state of the control law (Linux's `struct codel_vars`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CodelVars {
    /// Drops (or marks) since entering the dropping state, plus the carried-over count.
    pub count: u32,
    /// `count` when the dropping state was last entered.
    pub lastcount: u32,
    /// In the dropping state.
    pub dropping: bool,
    /// 1/√count in Q0.16 (Linux stores 16 bits and computes in Q0.32).
    pub rec_inv_sqrt: u16,
    /// When the sojourn time will have been above target for a full interval; `None` while
    /// it is below target.
    pub first_above_time: Option<Instant>,
    /// When the next drop is due while dropping.
    pub drop_next: Instant,
    /// Sojourn time of the last packet looked at.
    pub ldelay: Duration,
}

impl Default for CodelVars {
    fn default() -> CodelVars {
        CodelVars {
            count: 0,
            lastcount: 0,
            dropping: false,
            rec_inv_sqrt: 0,
            first_above_time: None,
            drop_next: Instant::ZERO,
            ldelay: Duration::ZERO,
        }
    }
}

/// Statistics the control law keeps beyond the discipline's [`Stats`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CodelStats {
    /// The largest packet seen at dequeue, in bytes (Linux's `maxpacket`).
    pub maxpacket_bytes: usize,
}

/// A queue as the control law sees it.
pub(crate) trait Head {
    /// Removes and returns the head packet, updating the caller's backlog accounting.
    fn pop(&mut self) -> Option<Packet>;
    /// Bytes still queued in the whole discipline (Linux passes `sch->qstats.backlog`).
    fn backlog_bytes(&self) -> usize;
}

/// One Newton-Raphson step towards 1/√count (Linux `codel_Newton_step`):
/// `new = (old / 2) · (3 − count · old²)`, in Q0.32 with 16 bits kept.
pub fn newton_step(vars: &mut CodelVars) {
    let invsqrt = u64::from(vars.rec_inv_sqrt) << REC_INV_SQRT_SHIFT;
    let invsqrt2 = (invsqrt * invsqrt) >> 32;
    let mut val = (3u64 << 32).wrapping_sub(u64::from(vars.count).wrapping_mul(invsqrt2));
    // Divide by 4 first so that the multiply below fits 64 bits, as Linux does. When count
    // has jumped far past the estimate (fq_codel's batch drop adds to it) the subtraction
    // above wraps; Linux's unsigned C arithmetic wraps there too, and so do we, bit for bit.
    val >>= 2;
    val = val.wrapping_mul(invsqrt) >> (32 - 2 + 1);
    vars.rec_inv_sqrt = (val >> REC_INV_SQRT_SHIFT) as u16;
}

/// `t + interval / √count` (RFC 8289 §5.6 `control_law`), with 1/√count from
/// [`newton_step`]: Linux's `reciprocal_scale(interval, rec_inv_sqrt << 16)`.
pub fn control_law(t: Instant, interval: Duration, rec_inv_sqrt: u16) -> Instant {
    let interval_ns = wire::time::duration_nanos(interval) as u128;
    let scaled = (interval_ns * (u128::from(rec_inv_sqrt) << REC_INV_SQRT_SHIFT)) >> 32;
    t + Duration::from_nanos(scaled as u64)
}

/// The reset value of `rec_inv_sqrt`: 1.0 in Q0.16, for count = 1.
const REC_INV_SQRT_ONE: u16 = (u32::MAX >> REC_INV_SQRT_SHIFT) as u16;

/// Whether the packet just taken off the head may be dropped (RFC 8289 §5.5
/// `dodequeue`'s `ok_to_drop`, Linux `codel_should_drop`). `backlog_after` is what is still
/// queued behind it.
fn should_drop(
    packet: Option<&Packet>,
    backlog_after: usize,
    params: &CodelParams,
    vars: &mut CodelVars,
    cstats: &mut CodelStats,
    now: Instant,
) -> bool {
    let Some(packet) = packet else {
        vars.first_above_time = None;
        return false;
    };
    vars.ldelay = now - packet.enqueued_at;
    cstats.maxpacket_bytes = cstats.maxpacket_bytes.max(packet.len());
    if vars.ldelay < params.target || backlog_after <= params.mtu_bytes {
        // Below target, or too little queued to be a standing queue: reset the window.
        vars.first_above_time = None;
        return false;
    }
    match vars.first_above_time {
        None => {
            vars.first_above_time = Some(now + params.interval);
            false
        }
        Some(t) => now > t,
    }
}

fn drop_packet(packet: Packet, stats: &mut Stats, events: &mut Vec<QdiscEvent>) {
    stats.record(Cause::AqmDequeue);
    events.push(QdiscEvent::Dropped {
        packet,
        cause: Cause::AqmDequeue,
    });
}

fn mark(packet: &Packet, cause: Cause, stats: &mut Stats, events: &mut Vec<QdiscEvent>) {
    stats.record(cause);
    events.push(QdiscEvent::Marked {
        id: packet.id,
        cause,
    });
}

/// Dequeues through the control law (RFC 8289 §5.6, Linux `codel_dequeue`): returns the
/// packet to send, after dropping (or marking) what the law says. Drops and marks go to
/// `events` and `stats`.
pub(crate) fn dequeue<H: Head>(
    params: &CodelParams,
    vars: &mut CodelVars,
    cstats: &mut CodelStats,
    stats: &mut Stats,
    head: &mut H,
    now: Instant,
    events: &mut Vec<QdiscEvent>,
) -> Option<Packet> {
    let mut packet = head.pop();
    if packet.is_none() {
        vars.dropping = false;
        return None;
    }
    let drop = should_drop(
        packet.as_ref(),
        head.backlog_bytes(),
        params,
        vars,
        cstats,
        now,
    );
    'decided: {
        if vars.dropping {
            if !drop {
                // Sojourn time went below target: leave the dropping state.
                vars.dropping = false;
            } else if now >= vars.drop_next {
                // Time for the next drop; drop (or mark) until the schedule is ahead of now
                // or the queue recovers (RFC 8289 §5.6, the `while` loop).
                while vars.dropping && now >= vars.drop_next {
                    vars.count = vars.count.wrapping_add(1);
                    newton_step(vars);
                    let Some(mut p) = packet.take() else { break };
                    if params.ecn && set_ce(&mut p) {
                        mark(&p, Cause::CeMark, stats, events);
                        vars.drop_next =
                            control_law(vars.drop_next, params.interval, vars.rec_inv_sqrt);
                        packet = Some(p);
                        break 'decided;
                    }
                    drop_packet(p, stats, events);
                    packet = head.pop();
                    if should_drop(
                        packet.as_ref(),
                        head.backlog_bytes(),
                        params,
                        vars,
                        cstats,
                        now,
                    ) {
                        vars.drop_next =
                            control_law(vars.drop_next, params.interval, vars.rec_inv_sqrt);
                    } else {
                        vars.dropping = false;
                    }
                }
            }
        } else if drop {
            let mut p = packet.take().expect("checked above");
            if params.ecn && set_ce(&mut p) {
                mark(&p, Cause::CeMark, stats, events);
                packet = Some(p);
            } else {
                drop_packet(p, stats, events);
                packet = head.pop();
                // Linux re-evaluates only to refresh first_above_time and ldelay; the
                // dropping state is entered regardless.
                should_drop(
                    packet.as_ref(),
                    head.backlog_bytes(),
                    params,
                    vars,
                    cstats,
                    now,
                );
            }
            vars.dropping = true;
            // If the delay went back above target soon after the last dropping episode, the
            // drop rate that controlled the queue then is a good start now (RFC 8289 §5.6;
            // Linux takes `count - lastcount`, and "soon" is 16 intervals since drop_next).
            let delta = vars.count.wrapping_sub(vars.lastcount);
            let since_next = now.as_nanos() as i128 - vars.drop_next.as_nanos() as i128;
            let sixteen = 16 * wire::time::duration_nanos(params.interval) as i128;
            if delta > 1 && since_next < sixteen {
                vars.count = delta;
                // Not exact for the new count, but each later step converges quadratically.
                newton_step(vars);
            } else {
                vars.count = 1;
                vars.rec_inv_sqrt = REC_INV_SQRT_ONE;
            }
            vars.lastcount = vars.count;
            vars.drop_next = control_law(now, params.interval, vars.rec_inv_sqrt);
        }
    }
    if let (Some(p), Some(threshold)) = (packet.as_mut(), params.ce_threshold) {
        // Linux compares the last computed sojourn time (of this packet) with the threshold.
        if vars.ldelay > threshold && set_ce(p) {
            mark(p, Cause::StepMark, stats, events);
        }
    }
    packet
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{ms, udp4};
    use wire::Ecn;

    /// A queue that always holds `backlog_bytes` and whose head has waited `sojourn`: a
    /// standing queue fed as fast as it drains, to drive the law in simulated time.
    struct Standing {
        now: Instant,
        sojourn: Duration,
        backlog_bytes: usize,
        ecn: Ecn,
        next_id: u64,
    }

    impl Head for Standing {
        fn pop(&mut self) -> Option<Packet> {
            self.next_id += 1;
            let mut p = udp4(self.next_id, 1000, 1500, self.ecn);
            p.enqueued_at = self.now - self.sojourn;
            Some(p)
        }
        fn backlog_bytes(&self) -> usize {
            self.backlog_bytes
        }
    }

    struct Rig {
        params: CodelParams,
        vars: CodelVars,
        cstats: CodelStats,
        stats: Stats,
        head: Standing,
        events: Vec<QdiscEvent>,
    }

    impl Rig {
        fn new(params: CodelParams, sojourn_ms: u64) -> Rig {
            Rig {
                params,
                vars: CodelVars::default(),
                cstats: CodelStats::default(),
                stats: Stats::default(),
                head: Standing {
                    now: Instant::ZERO,
                    sojourn: Duration::from_millis(sojourn_ms),
                    backlog_bytes: 30_000,
                    ecn: Ecn::NotEct,
                    next_id: 0,
                },
                events: Vec::new(),
            }
        }

        /// One dequeue at `t`, on a clock that starts a second in so that the first packets
        /// can have waited as long as the test says.
        fn step(&mut self, t: Instant) -> Option<Packet> {
            let now = t + Duration::from_secs(1);
            self.head.now = now;
            dequeue(
                &self.params,
                &mut self.vars,
                &mut self.cstats,
                &mut self.stats,
                &mut self.head,
                now,
                &mut self.events,
            )
        }

        /// Dequeues once a millisecond over `[from, to)` ms; returns the times of drops.
        fn run(&mut self, from: u64, to: u64) -> Vec<Instant> {
            let mut drops = Vec::new();
            for t in from..to {
                let before = self.stats.count(Cause::AqmDequeue);
                self.step(ms(t));
                for _ in before..self.stats.count(Cause::AqmDequeue) {
                    drops.push(ms(t));
                }
            }
            drops
        }
    }

    #[test]
    fn newton_steps_track_the_reciprocal_square_root() {
        // From count 1 (1.0) one step per increment, as the dropping state does.
        let mut v = CodelVars {
            count: 1,
            rec_inv_sqrt: REC_INV_SQRT_ONE,
            ..CodelVars::default()
        };
        let mut y = 1.0f64;
        for count in 2..2000u32 {
            v.count = count;
            newton_step(&mut v);
            // The same recurrence in floating point: y' = y(3 - c·y²)/2.
            y = y * (3.0 - f64::from(count) * y * y) / 2.0;
            let got = f64::from(v.rec_inv_sqrt) / 65536.0;
            assert!((got - y).abs() < 2e-4, "count {count}: {got} vs {y}");
            if count >= 4 {
                let exact = 1.0 / f64::from(count).sqrt();
                assert!(
                    (got - exact).abs() / exact < 0.03,
                    "count {count}: {got} vs {exact}"
                );
            }
        }
    }

    #[test]
    fn control_law_scales_the_interval_by_the_reciprocal_square_root() {
        let half = 1u16 << 15; // 0.5 in Q0.16
        let t = control_law(ms(1000), Duration::from_millis(100), half);
        assert_eq!(t, ms(1050));
        let t = control_law(ms(0), Duration::from_millis(100), REC_INV_SQRT_ONE);
        // 0xffff/65536 of 100 ms: 99.998 ms.
        assert_eq!(t.as_nanos(), 100_000_000 * 0xffff / 0x10000);
    }

    #[test]
    fn codel_never_drops_below_target() {
        let mut r = Rig::new(CodelParams::default(), 4);
        assert!(r.run(0, 5000).is_empty());
        assert_eq!(r.stats.drops(), 0);
        assert!(!r.vars.dropping);
    }

    #[test]
    fn codel_drops_only_after_a_full_interval_above_target() {
        let mut r = Rig::new(CodelParams::default(), 6);
        let drops = r.run(0, 300);
        // First above target at t=0; drop at the first dequeue strictly after 0 + 100 ms.
        assert_eq!(drops.first(), Some(&ms(101)));
        // A dip below target restarts the full interval.
        let mut r = Rig::new(CodelParams::default(), 6);
        assert!(r.run(0, 90).is_empty());
        r.head.sojourn = Duration::from_millis(3);
        r.step(ms(90));
        r.head.sojourn = Duration::from_millis(6);
        let drops = r.run(91, 400);
        assert_eq!(drops.first(), Some(&ms(192)));
    }

    #[test]
    fn codel_spaces_drops_by_interval_over_sqrt_count() {
        let mut r = Rig::new(CodelParams::default(), 50);
        let drops = r.run(0, 4000);
        assert!(drops.len() > 30, "{} drops", drops.len());
        for (k, pair) in drops.windows(2).enumerate() {
            let count = (k + 1) as f64; // the gap after the drop made with this count
            let gap_ms = (pair[1] - pair[0]).as_secs_f64() * 1e3;
            let want_ms = 100.0 / count.sqrt();
            if count >= 4.0 {
                // 1 ms dequeue granularity plus the Newton approximation.
                assert!(
                    (gap_ms - want_ms).abs() <= 1.0 + want_ms * 0.03,
                    "gap {k}: {gap_ms} ms, want {want_ms} ms"
                );
            }
        }
        // And the first gap is the full interval: count 1.
        assert_eq!(drops[1] - drops[0], Duration::from_millis(100));
    }

    #[test]
    fn reentering_soon_after_dropping_resumes_at_count_minus_lastcount() {
        let mut r = Rig::new(CodelParams::default(), 50);
        let drops = r.run(0, 1000).len() as u32;
        assert!(drops > 3);
        // Entered at count 1 (lastcount 1), then one more count per drop.
        assert_eq!((r.vars.count, r.vars.lastcount), (drops, 1));
        // Below target: leave the dropping state.
        r.head.sojourn = Duration::from_millis(1);
        r.run(1000, 1010);
        assert!(!r.vars.dropping);
        // Above target again, well within 16 intervals: re-enter at count - lastcount.
        r.head.sojourn = Duration::from_millis(50);
        let again = r.run(1010, 1200);
        assert_eq!(again.first(), Some(&ms(1111)));
        assert!(r.vars.dropping);
        assert_eq!(r.vars.lastcount, drops - 1);
    }

    #[test]
    fn reentering_after_sixteen_intervals_restarts_at_count_one() {
        let mut r = Rig::new(CodelParams::default(), 50);
        r.run(0, 1000);
        assert!(r.vars.count > 3);
        r.head.sojourn = Duration::from_millis(1);
        r.run(1000, 2800);
        r.head.sojourn = Duration::from_millis(50);
        let again = r.run(2800, 3000);
        assert_eq!(again.first(), Some(&ms(2901)));
        assert_eq!((r.vars.count, r.vars.lastcount), (1, 1));
    }

    #[test]
    fn codel_marks_ect_packets_instead_of_dropping_when_ecn_is_on() {
        let params = CodelParams {
            ecn: true,
            ..CodelParams::default()
        };
        let mut r = Rig::new(params, 50);
        r.head.ecn = Ecn::Ect0;
        let mut marked = Vec::new();
        for t in 0..2000 {
            let before = r.stats.count(Cause::CeMark);
            let p = r.step(ms(t)).unwrap();
            if r.stats.count(Cause::CeMark) > before {
                assert_eq!(p.ecn(), Ecn::Ce);
                assert!(crate::testutil::v4_checksum_ok(&p));
                assert!(r.events.iter().any(
                    |e| matches!(e, QdiscEvent::Marked { id, cause: Cause::CeMark } if *id == p.id)
                ));
                marked.push(ms(t));
            } else {
                assert_eq!(p.ecn(), Ecn::Ect0);
            }
        }
        assert_eq!(r.stats.drops(), 0);
        // Marks follow the same schedule as drops would: first after one interval.
        assert_eq!(marked.first(), Some(&ms(101)));
        assert!(marked.len() > 10);
        // The same traffic without ECT is dropped even with ECN on.
        let mut r = Rig::new(
            CodelParams {
                ecn: true,
                ..CodelParams::default()
            },
            50,
        );
        assert!(!r.run(0, 2000).is_empty());
        assert_eq!(r.stats.marks(), 0);
        // And ECT traffic is dropped when ECN is off.
        let mut r = Rig::new(CodelParams::default(), 50);
        r.head.ecn = Ecn::Ect0;
        assert!(!r.run(0, 2000).is_empty());
        assert_eq!(r.stats.marks(), 0);
    }

    #[test]
    fn codel_never_drops_with_at_most_one_mtu_queued() {
        let mut r = Rig::new(CodelParams::default(), 200);
        r.head.backlog_bytes = 1500;
        assert!(r.run(0, 3000).is_empty());
        r.head.backlog_bytes = 1501;
        assert!(!r.run(3000, 4000).is_empty());
    }

    #[test]
    fn ce_threshold_marks_every_ect_packet_above_it() {
        let params = CodelParams {
            ce_threshold: Some(Duration::from_millis(2)),
            ..CodelParams::default()
        };
        let mut r = Rig::new(params, 3);
        r.head.ecn = Ecn::Ect1;
        for t in 0..50 {
            assert_eq!(r.step(ms(t)).unwrap().ecn(), Ecn::Ce);
        }
        assert_eq!(r.stats.count(Cause::StepMark), 50);
        r.head.sojourn = Duration::from_millis(2);
        assert_eq!(r.step(ms(60)).unwrap().ecn(), Ecn::Ect1);
        assert_eq!(r.stats.drops(), 0);
    }
}
