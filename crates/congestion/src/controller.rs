//! The rate controller: feed it feedback with `now`, read the target and pacing rates.
//!
//! Three modes:
//! - [`Mode::L4s`] (sends ECT(1)), Prague-style and scalable:
//!   - α, the EWMA of the CE fraction F of the packets reported in each observation window of
//!     one virtual RTT: `α ← (1 − g)·α + g·F`, `g = 1/16` (RFC 8257 §3.3). α starts at 1, as in
//!     Linux DCTCP, so that the first marks of a new flow are answered firmly.
//!   - On CE: `rate ← rate·(1 − α/2)` (RFC 8257 §3.3 applied to a rate), at most once per
//!     virtual RTT.
//!   - Virtual RTT `vrtt = max(srtt, 25 ms)` (Prague's RTT-independence). Additive increase of
//!     one packet per vrtt, as a rate: `d(rate)/dt = MSS·8 / vrtt²` bit/s per second, which is
//!     what a window flow with RTT vrtt gets from `cwnd += 1 MSS per RTT`. Below 25 ms every
//!     flow so grows at the same rate per second whatever its RTT.
//! - [`Mode::Classic`] (sends ECT(0)): a legacy real-time video sender, the Google Congestion
//!   Control of WebRTC (draft-ietf-rmcat-gcc-02, module [`crate::gcc`]): a loss-based
//!   estimate that holds through 2–10 % of loss and a delay-based estimate from the packets'
//!   arrival times ([`Controller::on_arrival`]); a CE mark counts as a loss (RFC 3168 §5).
//!   It stays so after an ECN fallback (then sending Not-ECT).
//! - [`Mode::NotEct`] (marks nothing), the fallback of an L4S sender whose ECN validation
//!   fails: Reno on loss, halving the rate at most once per RTT (RFC 5681 §3.1), with
//!   additive increase at the real srtt (Reno is RTT-dependent).
//!
//! In L4S and Reno modes loss halves the rate, at most once per RTT in total with any CE cut
//! in the same RTT. In every mode a sender that hears no feedback for `max(4·vrtt, 200 ms)`
//! while sending halves its rate per such period, as a retransmission timeout would collapse
//! a window.
//!
//! Not here: packet formats, counting at the receiver, turning the rate into frames (the
//! `call` program does that), slow start (a call starts at a configured rate and grows by
//! additive increase, which at 25 ms reaches 8 Mbit/s from 1 Mbit/s in under half a second).

use wire::{Duration, Ecn, Instant};

use crate::gcc::{Gcc, GccParams};
use crate::pacer::Pacer;
use crate::validation::{EcnCounts, EcnState, EcnValidator, FailReason};

/// Which congestion response and which ECN codepoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// ECT(1) and the scalable (Prague-style) response.
    L4s,
    /// ECT(0) and a legacy real-time sender (GCC).
    Classic,
    /// Not-ECT; Reno on loss (or GCC, after a classic sender's fallback).
    NotEct,
}

impl Mode {
    /// The codepoint the sender sets on its packets in this mode.
    pub fn ecn(self) -> Ecn {
        match self {
            Mode::L4s => Ecn::Ect1,
            Mode::Classic => Ecn::Ect0,
            Mode::NotEct => Ecn::NotEct,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Mode::L4s => "l4s",
            Mode::Classic => "classic",
            Mode::NotEct => "not-ect",
        }
    }
}

/// Parameters; the defaults suit a video call of 0.5–8 Mbit/s over 1200-byte packets.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Params {
    pub min_rate_bps: u64,
    pub max_rate_bps: u64,
    pub start_rate_bps: u64,
    /// Packet size that additive increase adds per (virtual) RTT.
    pub mss_bytes: u64,
    /// Prague's reference RTT: the floor of the virtual RTT in L4S mode.
    pub reference_rtt: Duration,
    /// The EWMA gain is `1 / 2^alpha_gain_shift` (RFC 8257 §3.3 suggests g = 1/16: shift 4).
    pub alpha_gain_shift: u32,
    /// Pacing rate = target × pacing_percent / 100. 120 is Linux's tcp_pacing_ca_ratio.
    pub pacing_percent: u64,
    /// Burst the pacer allows after idleness.
    pub pacing_burst: Duration,
    /// RTT assumed before the first sample (RFC 6298 §2.1 uses 1 s for the RTO; a real-time
    /// flow wants a shorter guess).
    pub initial_rtt: Duration,
    /// The classic mode's controller (draft-ietf-rmcat-gcc-02's constants).
    pub gcc: GccParams,
}

impl Default for Params {
    fn default() -> Params {
        Params {
            min_rate_bps: 500_000,
            max_rate_bps: 8_000_000,
            start_rate_bps: 1_000_000,
            mss_bytes: 1200,
            reference_rtt: Duration::from_millis(25),
            alpha_gain_shift: 4,
            pacing_percent: 120,
            pacing_burst: Duration::from_millis(2),
            initial_rtt: Duration::from_millis(100),
            gcc: GccParams::default(),
        }
    }
}

/// What one feedback newly reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Feedback {
    /// Packets newly reported received.
    pub acked_packets: u64,
    pub acked_bytes: u64,
    /// Packets newly reported lost.
    pub lost_packets: u64,
    /// Newly received packets per ECN codepoint; `None` when the peer reports no counts.
    pub ecn: Option<EcnCounts>,
    /// A round-trip sample carried by this feedback, if any.
    pub rtt: Option<Duration>,
}

/// Something the application should know about (and log).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// ECN validation failed at `at`; from now on packets go out Not-ECT.
    EcnFallback { at: Instant, reason: FailReason },
}

/// Counters, for the logs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub acked_packets: u64,
    pub ce_packets: u64,
    pub lost_packets: u64,
    pub ce_reductions: u64,
    pub loss_reductions: u64,
    pub feedback_timeouts: u64,
}

/// The controller. See the module documentation for the control law.
#[derive(Clone, Debug)]
pub struct Controller {
    params: Params,
    mode: Mode,
    rate_bps: f64,
    alpha: f64,
    srtt: Option<Duration>,
    min_rtt: Option<Duration>,
    /// α's observation window: its start and the packets reported in it.
    window_start: Instant,
    window_acked: u64,
    window_ce: u64,
    /// The last cut, and the rate just before it (a loss in the same RTT may deepen the cut to
    /// half of that, never further).
    last_cut: Option<Instant>,
    rate_before_cut: f64,
    /// Last time additive increase was applied.
    last_increase: Instant,
    last_feedback: Instant,
    last_sent: Option<Instant>,
    pacer: Pacer,
    /// The classic mode's rate controller; it keeps the rate from then on.
    gcc: Option<Gcc>,
    validator: EcnValidator,
    events: Vec<Event>,
    stats: Stats,
}

impl Controller {
    pub fn new(params: Params, mode: Mode, now: Instant) -> Controller {
        let start = (params.start_rate_bps as f64)
            .clamp(params.min_rate_bps as f64, params.max_rate_bps as f64);
        Controller {
            params,
            mode,
            rate_bps: start,
            alpha: 1.0,
            srtt: None,
            min_rtt: None,
            window_start: now,
            window_acked: 0,
            window_ce: 0,
            last_cut: None,
            rate_before_cut: start,
            last_increase: now,
            last_feedback: now,
            last_sent: None,
            pacer: Pacer::new(now, params.pacing_burst),
            gcc: (mode == Mode::Classic).then(|| {
                Gcc::new(
                    params.gcc,
                    start,
                    params.min_rate_bps as f64,
                    params.max_rate_bps as f64,
                )
            }),
            validator: EcnValidator::new(mode.ecn()),
            events: Vec::new(),
            stats: Stats::default(),
        }
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }
    /// The ECN codepoint to set on outgoing packets now.
    pub fn send_ecn(&self) -> Ecn {
        self.mode.ecn()
    }
    pub fn ecn_state(&self) -> EcnState {
        self.validator.state()
    }
    pub fn alpha(&self) -> f64 {
        self.alpha
    }
    pub fn srtt(&self) -> Option<Duration> {
        self.srtt
    }
    pub fn min_rtt(&self) -> Option<Duration> {
        self.min_rtt
    }
    pub fn stats(&self) -> &Stats {
        &self.stats
    }
    /// The classic mode's GCC state, for the logs; `None` in the other modes.
    pub fn gcc(&self) -> Option<&Gcc> {
        self.gcc.as_ref()
    }
    /// The next event, oldest first.
    pub fn poll_event(&mut self) -> Option<Event> {
        if self.events.is_empty() {
            None
        } else {
            Some(self.events.remove(0))
        }
    }

    /// The rate the application should produce, bit/s.
    pub fn target_rate_bps(&self) -> u64 {
        self.rate_bps as u64
    }

    /// The rate at which packets leave, bit/s: a little above the target so that a frame is
    /// not stretched over the whole frame interval.
    pub fn pacing_rate_bps(&self) -> u64 {
        (self.rate_bps * self.params.pacing_percent as f64 / 100.0) as u64
    }

    /// When the next packet may leave.
    pub fn next_send_time(&self) -> Instant {
        self.pacer.next_send_time()
    }

    /// When [`Controller::on_tick`] has something to do (the feedback timeout), or when the
    /// pacer opens, whichever is first.
    pub fn next_wakeup(&self) -> Instant {
        let timeout = match self.last_sent {
            Some(_) => self.last_feedback + self.feedback_timeout(),
            None => Instant::FAR_FUTURE,
        };
        timeout.min(self.next_send_time())
    }

    /// The RTT the control law uses: `max(srtt, reference)` in L4S mode, srtt otherwise.
    pub fn virtual_rtt(&self) -> Duration {
        let srtt = self.srtt.unwrap_or(self.params.initial_rtt);
        match self.mode {
            Mode::L4s => srtt.max(self.params.reference_rtt),
            // A floor of 1 ms keeps the Reno slope finite on loopback.
            Mode::Classic | Mode::NotEct => srtt.max(Duration::from_millis(1)),
        }
    }

    fn feedback_timeout(&self) -> Duration {
        (self.virtual_rtt() * 4).max(Duration::from_millis(200))
    }

    /// A packet of `bytes` left at `now`.
    pub fn on_packet_sent(&mut self, now: Instant, bytes: u64) {
        if self.last_sent.is_none() {
            // The feedback clock starts with the first packet.
            self.last_feedback = now;
        }
        self.last_sent = Some(now);
        self.pacer.on_sent(now, bytes, self.pacing_rate_bps());
    }

    /// One RTT sample (RFC 6298 §2: srtt ← 7/8·srtt + 1/8·sample).
    pub fn on_rtt_sample(&mut self, rtt: Duration) {
        self.srtt = Some(match self.srtt {
            None => rtt,
            Some(s) => (s * 7 + rtt) / 8,
        });
        self.min_rtt = Some(self.min_rtt.map_or(rtt, |m| m.min(rtt)));
    }

    /// The peer reports that a packet sent at `send` (this sender's clock) arrived at
    /// `arrival` (the peer's clock); `now` is when the report came in. Feeds GCC's
    /// delay-based controller in classic mode; the other modes ignore it.
    pub fn on_arrival(&mut self, now: Instant, send: Instant, arrival: Instant) {
        let rtt = self.virtual_rtt();
        if let Some(g) = self.gcc.as_mut() {
            g.on_arrival(now, send, arrival, rtt);
            self.rate_bps = g.target_bps();
        }
    }

    /// One feedback from the peer, at `now`.
    pub fn on_feedback(&mut self, now: Instant, fb: &Feedback) {
        if let Some(rtt) = fb.rtt {
            self.on_rtt_sample(rtt);
        }
        self.last_feedback = now;
        let sent = self.mode.ecn();
        if let Some(reason) = self
            .validator
            .on_feedback(now, sent, fb.acked_packets, fb.ecn)
        {
            self.fall_back(now, reason);
        }
        let ce = match (self.mode, fb.ecn) {
            // Marks on packets sent ECT count; after a fallback, stragglers sent before it
            // still carry marks, but the path's ECN is not trusted any more.
            (Mode::L4s | Mode::Classic, Some(c)) => c.ce,
            _ => 0,
        };
        self.stats.acked_packets += fb.acked_packets;
        self.stats.ce_packets += ce;
        self.stats.lost_packets += fb.lost_packets;

        if let Some(g) = self.gcc.as_mut() {
            // RFC 3168 §5: a CE mark asks for the same response as a drop, so a marked
            // packet counts as lost.
            let ce = ce.min(fb.acked_packets);
            g.on_feedback(
                now,
                fb.acked_bytes,
                fb.acked_packets - ce,
                fb.lost_packets + ce,
            );
            self.rate_bps = g.target_bps();
            return;
        }
        self.update_alpha(now, fb.acked_packets, ce);
        self.additive_increase(now, fb.acked_packets);
        if fb.lost_packets > 0 {
            self.on_loss(now);
        } else if ce > 0 {
            self.on_ce(now);
        }
        self.clamp();
    }

    /// Applies the feedback timeout: no feedback for `max(4·vrtt, 200 ms)` while sending.
    pub fn on_tick(&mut self, now: Instant) {
        let Some(last_sent) = self.last_sent else {
            return;
        };
        if now - self.last_feedback >= self.feedback_timeout() && last_sent > self.last_feedback {
            self.rate_bps /= 2.0;
            if let Some(g) = self.gcc.as_mut() {
                g.scale(0.5);
                self.rate_bps = g.target_bps();
            }
            self.stats.feedback_timeouts += 1;
            self.last_feedback = now;
            self.last_increase = now;
            self.clamp();
        }
    }

    fn fall_back(&mut self, now: Instant, reason: FailReason) {
        self.mode = Mode::NotEct;
        self.events.push(Event::EcnFallback { at: now, reason });
    }

    /// RFC 8257 §3.3: once per observation window (one virtual RTT of feedback),
    /// `α ← (1 − g)·α + g·F` with F the fraction of reported packets that were CE-marked.
    fn update_alpha(&mut self, now: Instant, acked: u64, ce: u64) {
        self.window_acked += acked;
        self.window_ce += ce.min(acked);
        if now - self.window_start >= self.virtual_rtt() && self.window_acked > 0 {
            let f = self.window_ce as f64 / self.window_acked as f64;
            let g = 1.0 / f64::from(1u32 << self.params.alpha_gain_shift);
            self.alpha = (1.0 - g) * self.alpha + g * f;
            self.window_start = now;
            self.window_acked = 0;
            self.window_ce = 0;
        }
    }

    /// One MSS per virtual RTT, as a rate: `d(rate)/dt = MSS·8 / vrtt²`. Applied only when
    /// the feedback reports delivered packets, so an idle or blacked-out flow does not grow.
    fn additive_increase(&mut self, now: Instant, acked: u64) {
        let vrtt = self.virtual_rtt();
        // After a long silence grow by at most one vrtt's worth.
        let dt = (now - self.last_increase).min(vrtt);
        self.last_increase = now;
        if acked == 0 {
            return;
        }
        let vrtt_s = vrtt.as_secs_f64();
        let slope_bps_per_s = self.params.mss_bytes as f64 * 8.0 / (vrtt_s * vrtt_s);
        self.rate_bps += slope_bps_per_s * dt.as_secs_f64();
    }

    fn in_cut_guard(&self, now: Instant) -> bool {
        self.last_cut.is_some_and(|t| now - t < self.virtual_rtt())
    }

    fn on_ce(&mut self, now: Instant) {
        if self.in_cut_guard(now) {
            return;
        }
        self.rate_before_cut = self.rate_bps;
        self.rate_bps *= match self.mode {
            Mode::L4s => 1.0 - self.alpha / 2.0,
            // RFC 3168 §6.1.2: the same as for a loss.
            Mode::Classic | Mode::NotEct => 0.5,
        };
        self.last_cut = Some(now);
        self.stats.ce_reductions += 1;
    }

    fn on_loss(&mut self, now: Instant) {
        if self.in_cut_guard(now) {
            // Already cut in this RTT: deepen to a total halving, never beyond.
            self.rate_bps = self.rate_bps.min(self.rate_before_cut / 2.0);
            return;
        }
        self.rate_before_cut = self.rate_bps;
        self.rate_bps /= 2.0;
        self.last_cut = Some(now);
        self.stats.loss_reductions += 1;
    }

    fn clamp(&mut self) {
        self.rate_bps = self.rate_bps.clamp(
            self.params.min_rate_bps as f64,
            self.params.max_rate_bps as f64,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> Params {
        Params {
            min_rate_bps: 100_000,
            max_rate_bps: 100_000_000,
            start_rate_bps: 5_000_000,
            ..Params::default()
        }
    }

    /// Feedback for `packets` packets, `ce` of them marked, all sent with `sent`.
    fn fb(packets: u64, ce: u64, sent: Ecn, rtt: Duration) -> Feedback {
        let mut c = EcnCounts::default();
        for _ in 0..packets - ce {
            c.count(sent);
        }
        c.ce = ce;
        Feedback {
            acked_packets: packets,
            acked_bytes: packets * 1200,
            lost_packets: 0,
            ecn: Some(c),
            rtt: Some(rtt),
        }
    }

    /// Drives `c` with one feedback every `step` for `span`; `make(k)` builds the k-th.
    fn drive(
        c: &mut Controller,
        from: Instant,
        step: Duration,
        span: Duration,
        mut make: impl FnMut(u64) -> Feedback,
    ) -> Instant {
        let mut now = from;
        let mut k = 0;
        while now < from + span {
            now += step;
            c.on_packet_sent(now, 1200);
            c.on_feedback(now, &make(k));
            k += 1;
        }
        now
    }

    #[test]
    fn alpha_converges_to_a_steady_ce_fraction() {
        for (marked_of_10, want) in [(3u64, 0.3), (1, 0.1), (0, 0.0)] {
            let mut c = Controller::new(params(), Mode::L4s, Instant::ZERO);
            let rtt = Duration::from_millis(20);
            drive(
                &mut c,
                Instant::ZERO,
                Duration::from_millis(5),
                Duration::from_secs(10),
                |_| fb(10, marked_of_10, Ecn::Ect1, rtt),
            );
            assert!(
                (c.alpha() - want).abs() < 0.01,
                "F = {want}: alpha {}",
                c.alpha()
            );
        }
    }

    #[test]
    fn a_ce_cut_is_alpha_over_two_and_happens_at_most_once_per_virtual_rtt() {
        let mut c = Controller::new(params(), Mode::L4s, Instant::ZERO);
        let rtt = Duration::from_millis(10); // below the 25 ms reference: vrtt = 25 ms
        let mut cuts = Vec::new();
        let mut now = Instant::ZERO;
        for _ in 0..200 {
            now += Duration::from_millis(1);
            let before = c.target_rate_bps();
            let alpha = c.alpha();
            c.on_feedback(now, &fb(2, 1, Ecn::Ect1, rtt));
            let after = c.target_rate_bps();
            if after < before {
                // The cut is α/2 of the rate (plus at most 1 ms of additive increase).
                let expected = before as f64 * (1.0 - alpha / 2.0);
                assert!(
                    (after as f64 - expected).abs() < 20_000.0,
                    "{before} → {after}"
                );
                cuts.push(now);
            }
        }
        assert_eq!(c.virtual_rtt(), Duration::from_millis(25));
        assert!(
            cuts.len() >= 7 && cuts.len() <= 9,
            "{} cuts in 200 ms",
            cuts.len()
        );
        for w in cuts.windows(2) {
            assert!(w[1] - w[0] >= Duration::from_millis(25), "{:?}", cuts);
        }
        assert_eq!(c.stats().ce_reductions, cuts.len() as u64);
    }

    #[test]
    fn the_rate_grows_without_marks_by_one_packet_per_virtual_rtt() {
        let p = params();
        let mut c = Controller::new(p, Mode::L4s, Instant::ZERO);
        let start = c.target_rate_bps();
        drive(
            &mut c,
            Instant::ZERO,
            Duration::from_millis(5),
            Duration::from_secs(1),
            |_| fb(5, 0, Ecn::Ect1, Duration::from_millis(20)),
        );
        let grown = c.target_rate_bps() - start;
        // 1200 B per 25 ms per 25 ms: 15.36 Mbit/s per second.
        let expected = 1200.0 * 8.0 / (0.025f64 * 0.025);
        assert!(
            (grown as f64 - expected).abs() < 0.05 * expected,
            "grew {grown} bit/s in a second, expected about {expected}"
        );
        assert_eq!(c.stats().ce_reductions + c.stats().loss_reductions, 0);
    }

    #[test]
    fn nothing_delivered_means_no_growth() {
        let mut c = Controller::new(params(), Mode::L4s, Instant::ZERO);
        let start = c.target_rate_bps();
        drive(
            &mut c,
            Instant::ZERO,
            Duration::from_millis(5),
            Duration::from_millis(500),
            |_| Feedback::default(),
        );
        assert_eq!(c.target_rate_bps(), start);
    }

    #[test]
    fn loss_halves_the_rate_once_per_rtt_in_l4s_and_reno_modes() {
        for mode in [Mode::L4s, Mode::NotEct] {
            let mut c = Controller::new(params(), mode, Instant::ZERO);
            let rtt = Duration::from_millis(40);
            let before = c.target_rate_bps();
            let mut now = Instant::ZERO;
            for _ in 0..3 {
                now += Duration::from_millis(5);
                let mut f = fb(4, 0, mode.ecn(), rtt);
                f.lost_packets = 1;
                c.on_feedback(now, &f);
            }
            let after = c.target_rate_bps();
            assert!(
                (after as f64 - before as f64 / 2.0).abs() < 0.01 * before as f64,
                "{mode:?}: {before} → {after}"
            );
            assert_eq!(c.stats().loss_reductions, 1);
            // One RTT later a new loss halves again.
            now += Duration::from_millis(45);
            let mut f = fb(4, 0, mode.ecn(), rtt);
            f.lost_packets = 1;
            c.on_feedback(now, &f);
            assert_eq!(c.stats().loss_reductions, 2);
            assert!(c.target_rate_bps() < after * 6 / 10);
        }
    }

    #[test]
    fn a_loss_after_a_ce_cut_in_the_same_rtt_deepens_it_to_half_and_no_further() {
        let mut c = Controller::new(params(), Mode::L4s, Instant::ZERO);
        let rtt = Duration::from_millis(30);
        let before = c.target_rate_bps() as f64;
        c.on_feedback(Instant::from_millis(1), &fb(4, 1, Ecn::Ect1, rtt));
        // α = 1 at first: the CE cut is already a halving.
        let after_ce = c.target_rate_bps() as f64;
        assert!((after_ce - before / 2.0).abs() < 0.01 * before);
        let mut f = fb(4, 0, Ecn::Ect1, rtt);
        f.lost_packets = 2;
        c.on_feedback(Instant::from_millis(2), &f);
        assert!((c.target_rate_bps() as f64 - before / 2.0).abs() < 0.01 * before);
    }

    #[test]
    fn classic_mode_is_gcc_holding_through_moderate_loss_and_cutting_on_heavy_loss_or_ce() {
        let mut c = Controller::new(params(), Mode::Classic, Instant::ZERO);
        assert_eq!(c.send_ecn(), Ecn::Ect0);
        let rtt = Duration::from_millis(40);
        let before = c.target_rate_bps();
        // 3 s of 5 % loss, a feedback every 10 ms: Reno would have halved 75 times.
        let mut now = Instant::ZERO;
        for k in 0..300 {
            now += Duration::from_millis(10);
            c.on_packet_sent(now, 1200);
            let mut f = fb(4, 0, Ecn::Ect0, rtt);
            f.lost_packets = u64::from(k % 5 == 0);
            c.on_feedback(now, &f);
        }
        assert_eq!(c.target_rate_bps(), before);
        assert_eq!(c.stats().loss_reductions, 0);
        // 30 % CE: counted as loss, a cut by 15 % at the first report wholly made of it.
        for _ in 0..150 {
            now += Duration::from_millis(10);
            c.on_packet_sent(now, 1200);
            c.on_feedback(now, &fb(10, 3, Ecn::Ect0, rtt));
        }
        let after = c.target_rate_bps() as f64;
        assert!(
            (after - 0.85 * before as f64).abs() < 1.0,
            "{before} → {after}"
        );
        assert_eq!(
            c.gcc().map(|g| g.loss_based_bps() as u64),
            Some(after as u64)
        );
        assert!(Controller::new(params(), Mode::L4s, now).gcc().is_none());
    }

    #[test]
    fn growth_per_second_is_the_same_for_rtts_below_the_reference_but_not_with_reno() {
        let growth = |mode: Mode, rtt_ms: u64| {
            let mut c = Controller::new(params(), mode, Instant::ZERO);
            let start = c.target_rate_bps();
            drive(
                &mut c,
                Instant::ZERO,
                Duration::from_millis(2),
                Duration::from_secs(1),
                |_| fb(2, 0, mode.ecn(), Duration::from_millis(rtt_ms)),
            );
            (c.target_rate_bps() - start) as f64
        };
        let (short, long) = (growth(Mode::L4s, 5), growth(Mode::L4s, 20));
        assert!((short - long).abs() < 0.05 * long, "L4S: {short} vs {long}");
        // Reno's growth depends on the RTT: the short flow grows much faster.
        let (short, long) = (growth(Mode::NotEct, 10), growth(Mode::NotEct, 40));
        assert!(short > 4.0 * long, "Reno: {short} vs {long}");
    }

    #[test]
    fn bleaching_makes_the_sender_fall_back_to_not_ect_classic_and_say_when() {
        let mut c = Controller::new(params(), Mode::L4s, Instant::ZERO);
        assert_eq!(c.send_ecn(), Ecn::Ect1);
        let rtt = Duration::from_millis(20);
        c.on_feedback(Instant::from_millis(10), &fb(10, 0, Ecn::Ect1, rtt));
        assert_eq!(c.ecn_state(), EcnState::Capable);
        // A hop starts clearing the field.
        c.on_feedback(Instant::from_millis(20), &fb(10, 0, Ecn::NotEct, rtt));
        assert_eq!(c.mode(), Mode::NotEct);
        assert_eq!(c.send_ecn(), Ecn::NotEct);
        assert_eq!(
            c.poll_event(),
            Some(Event::EcnFallback {
                at: Instant::from_millis(20),
                reason: FailReason::Bleached
            })
        );
        assert_eq!(c.poll_event(), None);
        // Marks on stragglers sent before the fallback no longer cut the rate.
        let rate = c.target_rate_bps();
        c.on_feedback(Instant::from_millis(30), &fb(10, 5, Ecn::Ect1, rtt));
        assert!(c.target_rate_bps() >= rate);
    }

    #[test]
    fn a_peer_without_ecn_counts_also_makes_the_sender_fall_back() {
        let mut c = Controller::new(params(), Mode::L4s, Instant::ZERO);
        let mut f = fb(5, 0, Ecn::Ect1, Duration::from_millis(20));
        f.ecn = None;
        c.on_feedback(Instant::from_millis(10), &f);
        assert_eq!(
            c.poll_event(),
            Some(Event::EcnFallback {
                at: Instant::from_millis(10),
                reason: FailReason::NotReported
            })
        );
    }

    #[test]
    fn silence_while_sending_halves_the_rate_per_timeout() {
        let mut c = Controller::new(params(), Mode::L4s, Instant::ZERO);
        c.on_rtt_sample(Duration::from_millis(20));
        let before = c.target_rate_bps();
        c.on_packet_sent(Instant::from_millis(1), 1200);
        c.on_packet_sent(Instant::from_millis(150), 1200);
        // vrtt 25 ms: the timeout is max(4 × 25 ms, 200 ms) after the first packet.
        c.on_tick(Instant::from_millis(200));
        assert_eq!(c.target_rate_bps(), before);
        assert!(c.next_wakeup() <= Instant::from_millis(201));
        c.on_tick(Instant::from_millis(201));
        assert_eq!(c.target_rate_bps(), before / 2);
        assert_eq!(c.stats().feedback_timeouts, 1);
    }

    #[test]
    fn the_rate_stays_within_its_bounds_and_pacing_runs_above_it() {
        let p = Params {
            min_rate_bps: 500_000,
            max_rate_bps: 2_000_000,
            start_rate_bps: 1_000_000,
            ..Params::default()
        };
        let mut c = Controller::new(p, Mode::L4s, Instant::ZERO);
        drive(
            &mut c,
            Instant::ZERO,
            Duration::from_millis(5),
            Duration::from_secs(2),
            |_| fb(5, 0, Ecn::Ect1, Duration::from_millis(20)),
        );
        assert_eq!(c.target_rate_bps(), 2_000_000);
        assert_eq!(c.pacing_rate_bps(), 2_400_000);
        let mut now = Instant::from_secs(3);
        for _ in 0..20 {
            now += Duration::from_millis(30);
            let mut f = fb(5, 0, Ecn::Ect1, Duration::from_millis(20));
            f.lost_packets = 1;
            c.on_feedback(now, &f);
        }
        assert_eq!(c.target_rate_bps(), 500_000);
    }
}
