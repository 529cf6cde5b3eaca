//! `pie`: Proportional Integral controller Enhanced (RFC 8033), as Linux's sch_pie.c and
//! net/sched/pie.c.
//!
//! Every `tupdate` the drop probability p moves by `alpha·(qdelay − target) +
//! beta·(qdelay − qdelay_old)`, with alpha and beta scaled down while p is small (the tiers of
//! RFC 8033 §4.2). Each arriving packet is then dropped early with probability p
//! (derandomised, §5.1: never while the accumulated probability is below 0.85, always once
//! it reaches 8.5), or marked CE instead when `ecn` is on, the packet is ECT and p ≤ 10 %
//! (§5.1). No early drop during the burst allowance (150 ms after the queue was last idle,
//! §4.4), while the delay is under half the target and p under 20 %, or while under two
//! MTUs are queued. The queue delay is each dequeued packet's sojourn time, or with
//! `dq_rate_estimator` the backlog over the measured departure rate (§4.3, §5.3).
//!
//! Linux's defaults: limit 1000 packets, target 15 ms, tupdate 15 ms, alpha 2/16, beta 20/16
//! (tc's integers, in units of 1/16: 1/8 and 1 + 1/4), no ECN, no bytemode, timestamps
//! rather than the rate estimator.
//!
//! Where we differ from Linux: time is nanoseconds (Linux: 64 ns ticks and jiffies for
//! tupdate); the departure-rate estimate keeps 32 fraction bits (Linux: 8); p is clamped to
//! [0, 1] (Linux lets it pass 1 without wrapping); and `accu_prob` is reset after a mark as
//! after a drop (Linux does not, so after a forced decision it marks every ECT packet until
//! its next drop; RFC 8033 §5.1 resets on the decision).

use std::collections::VecDeque;

use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use wire::{Duration, Instant, Packet};

use crate::{set_ce, Cause, Qdisc, QdiscEvent, Stats, Verdict};

/// Probabilities are `u64` fractions of this: 56 bits, as Linux (`U64_MAX >> 8`), so that
/// 8.5 of them still fit in a `u64` for the derandomiser.
pub const MAX_PROB: u64 = u64::MAX >> 8;

/// Bytes that must drain before the rate estimator takes a sample (Linux QUEUE_THRESHOLD,
/// RFC 8033 §5.3 DQ_THRESHOLD = 2^14).
const DQ_THRESHOLD_BYTES: u64 = 16384;

/// Parameters of a pie queue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Params {
    /// Tail-drop limit in packets; Linux default 1000.
    pub limit_packets: usize,
    /// Target queue delay; default 15 ms.
    pub target: Duration,
    /// Probability update period; default 15 ms.
    pub tupdate: Duration,
    /// Integral gain in units of 1/16 Hz, as tc takes it (0..=32); default 2 (0.125).
    pub alpha_16: u32,
    /// Proportional gain in units of 1/16 Hz (0..=32); default 20 (1.25).
    pub beta_16: u32,
    /// Mark ECT packets instead of dropping while p ≤ 10 %.
    pub ecn: bool,
    /// Scale the probability by packet size / MTU (RFC 8033 §5.2).
    pub bytemode: bool,
    /// Estimate the queue delay from the departure rate instead of timestamps.
    pub dq_rate_estimator: bool,
    /// The link MTU: the 2-MTU floor and bytemode's reference size.
    pub mtu_bytes: usize,
}

impl Default for Params {
    fn default() -> Params {
        Params {
            limit_packets: 1000,
            target: Duration::from_millis(15),
            tupdate: Duration::from_millis(15),
            alpha_16: 2,
            beta_16: 20,
            ecn: false,
            bytemode: false,
            dq_rate_estimator: false,
            mtu_bytes: 1500,
        }
    }
}

/// The controller's state (Linux `struct pie_vars`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PieVars {
    /// Drop probability p, as a fraction of [`MAX_PROB`].
    pub prob: u64,
    /// Current queue delay estimate, ns.
    pub qdelay_ns: u64,
    /// The estimate at the previous update, ns.
    pub qdelay_old_ns: u64,
    /// Burst allowance left (RFC 8033 §4.4).
    pub burst_time: Duration,
    /// Derandomiser: probability accumulated since the last drop (RFC 8033 §5.1).
    pub accu_prob: u64,
    /// When the last departure (or rate measurement cycle) started.
    pub dq_tstamp: Option<Instant>,
    /// Bytes departed in the current measurement cycle; `None` when not measuring.
    pub dq_count: Option<u64>,
    /// Departure rate, bytes per ns × 2³²; 0 until measured.
    pub avg_dq_rate: u64,
    /// When the next update is due; `None` until the first packet arrives.
    pub next_update: Option<Instant>,
}

/// A pie queue.
pub struct Pie {
    params: Params,
    queue: VecDeque<Packet>,
    bytes: usize,
    vars: PieVars,
    rng: ChaCha8Rng,
    stats: Stats,
}

/// The burst allowance a reset grants: 150 ms (RFC 8033 §4.4 MAX_BURST).
pub const MAX_BURST: Duration = Duration::from_millis(150);

/// alpha and beta per ns of delay, in [`MAX_PROB`] units, after the tier scaling of RFC 8033
/// §4.2 for the current p: ÷2 below 10 %, and ÷4 more for each further decade below 1 %,
/// down to ÷2048 below 0.0001 %.
pub fn scaled_gains(params: &Params, prob: u64) -> (u64, u64) {
    // Linux: param × (MAX_PROB / ticks per second) >> 4; here per nanosecond.
    let per_ns = MAX_PROB / 1_000_000_000;
    let mut alpha = (u64::from(params.alpha_16) * per_ns) >> 4;
    let mut beta = (u64::from(params.beta_16) * per_ns) >> 4;
    if prob < MAX_PROB / 10 {
        alpha >>= 1;
        beta >>= 1;
        let mut power = 100u64;
        while prob < MAX_PROB / power && power <= 1_000_000 {
            alpha >>= 2;
            beta >>= 2;
            power *= 10;
        }
    }
    (alpha, beta)
}

impl Pie {
    pub fn new(params: Params, seed: u64) -> Pie {
        let mut vars = PieVars::default();
        reset_cycle(&mut vars);
        Pie {
            params,
            queue: VecDeque::new(),
            bytes: 0,
            vars,
            rng: ChaCha8Rng::seed_from_u64(seed),
            stats: Stats::default(),
        }
    }

    /// The controller's state, for logs and tests.
    pub fn vars(&self) -> &PieVars {
        &self.vars
    }

    /// p as a fraction.
    pub fn probability(&self) -> f64 {
        self.vars.prob as f64 / MAX_PROB as f64
    }

    /// RFC 8033 §5.1 `drop_early` with Linux's derandomisation.
    fn drop_early(&mut self, packet_len: usize) -> bool {
        let v = &mut self.vars;
        if !v.burst_time.is_zero() {
            return false;
        }
        // Low delay and low p: the queue is fine (RFC 8033 §4.1).
        if v.qdelay_ns < duration_ns(self.params.target) / 2 && v.prob < MAX_PROB / 5 {
            return false;
        }
        // Like RED's min_th: a couple of packets is not a standing queue.
        if self.bytes < 2 * self.params.mtu_bytes {
            return false;
        }
        let local_prob = if self.params.bytemode && packet_len <= self.params.mtu_bytes {
            // p × size / MTU (RFC 8033 §5.2), dividing first as Linux does.
            packet_len as u64 * (v.prob / self.params.mtu_bytes.max(1) as u64)
        } else {
            v.prob
        };
        if local_prob == 0 {
            v.accu_prob = 0;
        } else {
            v.accu_prob = v.accu_prob.saturating_add(local_prob);
        }
        // Derandomisation bounds (RFC 8033 §5.1): no drop below 0.85, surely one at 8.5.
        if v.accu_prob < (MAX_PROB / 100) * 85 {
            return false;
        }
        if v.accu_prob >= (MAX_PROB / 2) * 17 {
            return true;
        }
        (self.rng.next_u64() >> 8) < local_prob
    }

    /// RFC 8033 §4.2 `calculate_drop_prob` as Linux `pie_calculate_probability`.
    fn update_probability(&mut self) {
        let p = &self.params;
        let v = &mut self.vars;
        let backlog = self.bytes as u64;
        let (qdelay, qdelay_old) = if p.dq_rate_estimator {
            let old = v.qdelay_ns;
            v.qdelay_old_ns = v.qdelay_ns;
            let q = if v.avg_dq_rate > 0 {
                ((u128::from(backlog) << 32) / u128::from(v.avg_dq_rate)).min(u128::from(u64::MAX))
                    as u64
            } else {
                0
            };
            (q, old)
        } else {
            (v.qdelay_ns, v.qdelay_old_ns)
        };
        let target = duration_ns(p.target);
        let (alpha, beta) = scaled_gains(p, v.prob);
        let mut delta = i128::from(alpha) * (i128::from(qdelay) - i128::from(target))
            + i128::from(beta) * (i128::from(qdelay) - i128::from(qdelay_old));
        // Above 10 %, p moves up by at most 2 % per update (RFC 8033 §4.2).
        let two_percent = i128::from(MAX_PROB / 100 * 2);
        if delta > two_percent && v.prob >= MAX_PROB / 10 {
            delta = two_percent;
        }
        // A delay over 250 ms adds 2 % at once (Linux; RFC 8033 §4.2 note).
        if qdelay > 250_000_000 {
            delta += two_percent;
        }
        let raw = i128::from(v.prob) + delta;
        let saturated = raw >= i128::from(MAX_PROB);
        v.prob = raw.clamp(0, i128::from(MAX_PROB)) as u64;
        // Two updates in a row with an empty queue: decay p by 1/64 (RFC 8033 §4.2).
        if qdelay == 0 && qdelay_old == 0 && !saturated {
            v.prob -= v.prob / 64;
        }
        v.qdelay_ns = qdelay;
        // Delay low twice and p back to zero: a new burst allowance (RFC 8033 §4.4).
        if v.qdelay_ns < target / 2
            && v.qdelay_old_ns < target / 2
            && v.prob == 0
            && (!p.dq_rate_estimator || v.avg_dq_rate > 0)
        {
            reset_cycle(v);
        }
        if !p.dq_rate_estimator {
            v.qdelay_old_ns = qdelay;
        }
    }

    /// Linux `pie_process_dequeue`: the delay sample and the burst allowance's decrease.
    fn on_departure(&mut self, packet: &Packet, now: Instant) {
        let backlog = self.bytes as u64;
        let v = &mut self.vars;
        let dtime;
        if !self.params.dq_rate_estimator {
            v.qdelay_ns = if backlog == 0 {
                0
            } else {
                duration_ns(now - packet.enqueued_at)
            };
            dtime = v.dq_tstamp.map_or(0, |t| duration_ns(now - t));
            v.dq_tstamp = Some(now);
            if dtime == 0 {
                return;
            }
        } else {
            // Start a measurement cycle once enough is queued to time its departure.
            if backlog >= DQ_THRESHOLD_BYTES && v.dq_count.is_none() {
                v.dq_tstamp = Some(now);
                v.dq_count = Some(0);
            }
            let Some(count) = v.dq_count else { return };
            let count = count + packet.len() as u64;
            v.dq_count = Some(count);
            if count < DQ_THRESHOLD_BYTES {
                return;
            }
            dtime = v.dq_tstamp.map_or(0, |t| duration_ns(now - t));
            if dtime == 0 {
                return;
            }
            // Bytes per ns in 32.32 fixed point; an EWMA with weight 1/8 (RFC 8033 §5.3).
            let rate =
                ((u128::from(count) << 32) / u128::from(dtime)).min(u128::from(u64::MAX)) as u64;
            v.avg_dq_rate = if v.avg_dq_rate == 0 {
                rate
            } else {
                v.avg_dq_rate - (v.avg_dq_rate >> 3) + (rate >> 3)
            };
            if backlog < DQ_THRESHOLD_BYTES {
                v.dq_count = None;
            } else {
                v.dq_count = Some(0);
                v.dq_tstamp = Some(now);
            }
        }
        v.burst_time = v.burst_time.saturating_sub(Duration::from_nanos(dtime));
    }
}

/// Linux `pie_vars_init`: a fresh burst allowance and measurement cycle; p stays.
fn reset_cycle(v: &mut PieVars) {
    v.burst_time = MAX_BURST;
    v.dq_tstamp = None;
    v.accu_prob = 0;
    v.dq_count = None;
    v.avg_dq_rate = 0;
}

fn duration_ns(d: Duration) -> u64 {
    wire::time::duration_nanos(d)
}

impl Qdisc for Pie {
    fn enqueue(
        &mut self,
        now: Instant,
        mut packet: Packet,
        events: &mut Vec<QdiscEvent>,
    ) -> Verdict {
        self.on_timer(now);
        if self.vars.next_update.is_none() {
            self.vars.next_update = Some(now + self.params.tupdate);
        }
        self.stats.packets_in += 1;
        let cause = if self.queue.len() >= self.params.limit_packets {
            Some(Cause::Overlimit)
        } else if !self.drop_early(packet.len()) {
            None
        } else if self.params.ecn && self.vars.prob <= MAX_PROB / 10 && set_ce(&mut packet) {
            self.stats.record(Cause::CeMark);
            events.push(QdiscEvent::Marked {
                id: packet.id,
                cause: Cause::CeMark,
            });
            self.vars.accu_prob = 0;
            None
        } else {
            Some(Cause::AqmEnqueue)
        };
        if let Some(cause) = cause {
            self.vars.accu_prob = 0;
            self.stats.record(cause);
            events.push(QdiscEvent::Dropped { packet, cause });
            return Verdict::Dropped;
        }
        packet.enqueued_at = now;
        self.bytes += packet.len();
        self.queue.push_back(packet);
        self.stats.note_backlog(self.queue.len(), self.bytes);
        Verdict::Queued
    }

    fn dequeue(&mut self, now: Instant, _events: &mut Vec<QdiscEvent>) -> Option<Packet> {
        self.on_timer(now);
        let p = self.queue.pop_front()?;
        self.bytes -= p.len();
        self.on_departure(&p, now);
        self.stats.packets_out += 1;
        self.stats.bytes_out += p.len() as u64;
        Some(p)
    }

    fn backlog_packets(&self) -> usize {
        self.queue.len()
    }
    fn backlog_bytes(&self) -> usize {
        self.bytes
    }
    fn stats(&self) -> &Stats {
        &self.stats
    }

    fn next_timer(&self) -> Option<Instant> {
        self.vars.next_update
    }

    fn on_timer(&mut self, now: Instant) {
        let Some(mut due) = self.vars.next_update else {
            return;
        };
        let period = self.params.tupdate.max(Duration::from_nanos(1));
        let mut steps = 0u32;
        while due <= now {
            self.update_probability();
            due += period;
            steps += 1;
            if steps == 10_000 {
                // A caller that stayed away this long: resume the schedule from now rather
                // than replay it (an idle PIE has long reached p = 0 by then).
                due = now + period;
                break;
            }
        }
        self.vars.next_update = Some(due);
    }

    fn kind(&self) -> &'static str {
        "pie"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{ms, udp4};
    use wire::Ecn;

    fn prob(f: f64) -> u64 {
        (f * MAX_PROB as f64) as u64
    }

    /// A queue whose p stays where the test puts it, past its burst allowance, with a delay
    /// above half the target.
    fn frozen(params: Params, p: f64) -> Pie {
        let mut q = Pie::new(
            Params {
                tupdate: Duration::from_secs(1000),
                limit_packets: 1_000_000,
                ..params
            },
            5,
        );
        q.vars.prob = prob(p);
        q.vars.burst_time = Duration::ZERO;
        q.vars.qdelay_ns = 20_000_000;
        q
    }

    #[test]
    fn pie_scales_alpha_and_beta_by_the_rfc_8033_tiers() {
        let params = Params::default();
        let (a1, b1) = scaled_gains(&params, MAX_PROB);
        // RFC 8033 §4.2: p < 0.000001: /2048; < 0.00001: /512; < 0.0001: /128;
        // < 0.001: /32; < 0.01: /8; < 0.1: /2; otherwise unscaled.
        let table = [
            (0.5, 0u32),
            (0.1, 0),
            (0.09, 1),
            (0.009, 3),
            (0.0009, 5),
            (0.00009, 7),
            (0.000009, 9),
            (0.0000009, 11),
            (0.0, 11),
        ];
        for (p, shift) in table {
            let (a, b) = scaled_gains(&params, prob(p));
            assert_eq!((a, b), (a1 >> shift, b1 >> shift), "p = {p}");
        }
        // Unscaled, alpha is 1/8 and beta 5/4 per second of delay.
        let per_s = |g: u64| g as f64 * 1e9 / MAX_PROB as f64;
        assert!((per_s(a1) - 0.125).abs() < 1e-6 && (per_s(b1) - 1.25).abs() < 1e-6);
    }

    #[test]
    fn pie_update_applies_the_controller_with_its_caps() {
        // From p = 0 (tier /2048): 25 ms of delay, 0 before.
        let mut q = Pie::new(Params::default(), 1);
        q.vars.qdelay_ns = 25_000_000;
        q.update_probability();
        let want = (0.125 * 0.010 + 1.25 * 0.025) / 2048.0;
        assert!(
            (q.probability() - want).abs() / want < 1e-3,
            "{}",
            q.probability()
        );
        // Above 10 %, at most 2 % per update.
        let mut q = Pie::new(Params::default(), 1);
        q.vars.prob = prob(0.5);
        q.vars.qdelay_ns = 200_000_000;
        q.update_probability();
        assert!((q.probability() - 0.52).abs() < 1e-9);
        // Over 250 ms, another 2 % on top.
        q.vars.qdelay_ns = 300_000_000;
        q.update_probability();
        assert!((q.probability() - 0.56).abs() < 1e-9);
        // An empty queue for two updates decays p by 1/64 on top of the controller.
        let mut q = Pie::new(Params::default(), 1);
        q.vars.prob = prob(0.5);
        q.update_probability();
        let after_control = 0.5 - 0.125 * 0.015;
        assert!((q.probability() - after_control * 63.0 / 64.0).abs() < 1e-6);
    }

    #[test]
    fn derandomisation_never_drops_below_085_and_always_at_85() {
        let mut q = frozen(Params::default(), 0.06);
        let mut ev = Vec::new();
        let mut since_drop = 0;
        let mut gaps = Vec::new();
        for i in 0..50_000 {
            since_drop += 1;
            if q.enqueue(ms(0), udp4(i, 1, 1500, Ecn::NotEct), &mut ev) == Verdict::Dropped {
                gaps.push(since_drop);
                since_drop = 0;
            }
        }
        assert!(gaps.len() > 1000);
        // 0.85 / 0.06 = 14.2: the 15th packet is the first that may go; 8.5 / 0.06 = 141.7.
        assert!(
            gaps.iter().all(|g| (15..=142).contains(g)),
            "{:?}",
            gaps.iter().min()
        );
        // And the bounds exactly, with a p so small that the dice never say drop.
        let mut q = frozen(Params::default(), 1e-9);
        q.enqueue(ms(0), udp4(0, 1, 1500, Ecn::NotEct), &mut ev);
        q.enqueue(ms(0), udp4(0, 1, 1500, Ecn::NotEct), &mut ev);
        let local = q.vars.prob;
        q.vars.accu_prob = MAX_PROB / 100 * 85 - 2 * local;
        assert!(!q.drop_early(1500));
        q.vars.accu_prob = MAX_PROB / 2 * 17 - local;
        assert!(q.drop_early(1500));
    }

    #[test]
    fn no_early_drop_during_the_burst_allowance() {
        let mut q = Pie::new(
            Params {
                tupdate: Duration::from_secs(1000),
                ..Params::default()
            },
            3,
        );
        q.vars.prob = prob(0.5);
        assert_eq!(q.vars.burst_time, MAX_BURST);
        let mut ev = Vec::new();
        let mut first_drop = None;
        for t in 0..400u64 {
            for k in 0..2 {
                if q.enqueue(ms(t), udp4(t * 2 + k, 1, 1500, Ecn::NotEct), &mut ev)
                    == Verdict::Dropped
                {
                    first_drop.get_or_insert(t);
                }
            }
            q.dequeue(ms(t), &mut ev);
        }
        // Departures from t = 0 use up the allowance at t = 150; the next arrival may go.
        let first = first_drop.unwrap();
        assert!((150..160).contains(&first), "{first}");
        // Low delay twice with p back at 0 grants a new allowance.
        q.vars.prob = 0;
        q.vars.qdelay_ns = 0;
        q.vars.qdelay_old_ns = 0;
        q.update_probability();
        assert_eq!(q.vars.burst_time, MAX_BURST);
    }

    #[test]
    fn ecn_marks_only_while_p_is_at_most_ten_percent() {
        let ecn = Params {
            ecn: true,
            ..Params::default()
        };
        let mut q = frozen(ecn.clone(), 0.08);
        let mut ev = Vec::new();
        for i in 0..5000 {
            q.enqueue(ms(0), udp4(i, 1, 1500, Ecn::Ect0), &mut ev);
        }
        assert!(q.stats().count(Cause::CeMark) > 200);
        assert_eq!(q.stats().drops(), 0);
        let mut q = frozen(ecn, 0.12);
        for i in 0..5000 {
            q.enqueue(ms(0), udp4(i, 1, 1500, Ecn::Ect0), &mut ev);
        }
        assert!(q.stats().count(Cause::AqmEnqueue) > 200);
        assert_eq!(q.stats().marks(), 0);
    }

    #[test]
    fn bytemode_drops_small_packets_less() {
        let bytemode = Params {
            bytemode: true,
            ..Params::default()
        };
        let mut big = frozen(bytemode.clone(), 0.05);
        let mut small = frozen(bytemode, 0.05);
        let mut ev = Vec::new();
        for i in 0..3 {
            small.enqueue(ms(0), udp4(i, 1, 1500, Ecn::NotEct), &mut ev);
        }
        for i in 0..20_000 {
            big.enqueue(ms(0), udp4(i, 1, 1500, Ecn::NotEct), &mut ev);
            small.enqueue(ms(0), udp4(i, 1, 150, Ecn::NotEct), &mut ev);
        }
        let (b, s) = (big.stats().drops() as f64, small.stats().drops() as f64);
        assert!((s / b - 0.1).abs() < 0.03, "{s} / {b}");
    }

    #[test]
    fn the_rate_estimator_turns_backlog_into_delay() {
        let mut q = Pie::new(
            Params {
                dq_rate_estimator: true,
                tupdate: Duration::from_secs(1000),
                ..Params::default()
            },
            1,
        );
        let mut ev = Vec::new();
        // 1500 bytes leave every millisecond with 30 packets standing: 30 ms of queue.
        for i in 0..30 {
            q.enqueue(ms(0), udp4(i, 1, 1500, Ecn::NotEct), &mut ev);
        }
        for t in 1..200u64 {
            q.enqueue(ms(t), udp4(100 + t, 1, 1500, Ecn::NotEct), &mut ev);
            q.dequeue(ms(t), &mut ev);
        }
        assert!(q.vars.avg_dq_rate > 0);
        q.update_probability();
        let qdelay_ms = q.vars.qdelay_ns as f64 / 1e6;
        assert!((qdelay_ms - 30.0).abs() < 1.5, "{qdelay_ms}");
    }

    #[test]
    fn the_timer_runs_every_tupdate_from_the_first_packet() {
        let mut q = Pie::new(Params::default(), 1);
        assert_eq!(q.next_timer(), None);
        let mut ev = Vec::new();
        q.enqueue(ms(3), udp4(1, 1, 1500, Ecn::NotEct), &mut ev);
        assert_eq!(q.next_timer(), Some(ms(18)));
        q.on_timer(ms(17));
        assert_eq!(q.next_timer(), Some(ms(18)));
        q.on_timer(ms(50));
        assert_eq!(q.next_timer(), Some(ms(63)));
    }
}
