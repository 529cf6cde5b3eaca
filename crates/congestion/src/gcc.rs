//! The Google Congestion Control of WebRTC (draft-ietf-rmcat-gcc-02, "GCC"): the legacy
//! real-time rate controller that the classic mode of the call follows, as pure state
//! machines with `now` passed in.
//!
//! Two controllers, both on the sending side (the draft's §3 allows the delay-based one at the
//! sender when the receiver reports every packet's arrival time, as the call's feedback does):
//!
//! - **Delay-based** (§5): packets are grouped by send time ([`ArrivalFilter`], §5.1, §5.2);
//!   a Kalman filter estimates the inter-group delay variation m(i) (§5.3); the
//!   [`OveruseDetector`] compares it with an adaptive threshold (§5.4); the
//!   [`AimdRateControl`] turns over-use, normal and under-use into the estimate A_hat (§5.5).
//! - **Loss-based** (§6, [`LossBasedControl`]): once per receiver report, hold the estimate
//!   As_hat while 2–10 % of the packets were lost, cut it by half the loss ratio above 10 %,
//!   grow it by 5 % below 2 %.
//!
//! The target is `min(A_hat, As_hat)` within the application's bounds ([`Gcc`]). The point of
//! this controller in latencylab is what it does *not* do: it does not back off on a few
//! percent of loss, and its delay signal (a queue growing faster than the threshold per
//! packet group) is drowned when loss-based TCP flows keep a short FIFO full. That is how the
//! legacy calls of the L4S talk lost their packets.
//!
//! Not here: ECN (a CE mark counts as a loss, RFC 3168 §5), pacing and the feedback timeout
//! (the [`crate::Controller`] around it), sockets and clocks.

use std::collections::VecDeque;

use wire::{Duration, Instant};

/// The draft's constants (its Table 1 and the values its sections recommend).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GccParams {
    /// §5.1 burst_time: packets sent within this of a group's first packet form the group.
    pub burst_time: Duration,
    /// §5.3 q: the state noise variance, ms².
    pub state_noise_ms2: f64,
    /// §5.3 e(0): the initial error covariance, ms².
    pub initial_error_cov_ms2: f64,
    /// §5.3 chi, the noise variance filter's coefficient, "in the interval [0.1, 0.001]".
    pub chi: f64,
    /// §5.3 K: f_max is taken over the last K groups (the draft leaves K open).
    pub f_max_groups: usize,
    /// §5.4 del_var_th(0), ms.
    pub initial_threshold_ms: f64,
    /// §5.4 bounds of del_var_th, ms.
    pub min_threshold_ms: f64,
    pub max_threshold_ms: f64,
    /// §5.4 K_u and K_d: how fast the threshold follows |m| up and down, per ms.
    pub k_up: f64,
    pub k_down: f64,
    /// §5.4 overuse_time_th.
    pub overuse_time_th: Duration,
    /// §5.5 beta: a decrease sets A_hat to beta × R_hat.
    pub beta: f64,
    /// §5.5 T: the window over which the incoming rate R_hat is measured ("between 0.5 and
    /// 1 second").
    pub incoming_window: Duration,
    /// §6: how often the receiver reports its loss (an RTCP receiver report; a video call of
    /// the time sent one about once a second).
    pub report_interval: Duration,
}

impl Default for GccParams {
    fn default() -> GccParams {
        GccParams {
            burst_time: Duration::from_millis(5),
            state_noise_ms2: 1e-3,
            initial_error_cov_ms2: 0.1,
            chi: 0.01,
            f_max_groups: 5,
            initial_threshold_ms: 12.5,
            min_threshold_ms: 6.0,
            max_threshold_ms: 600.0,
            k_up: 0.01,
            k_down: 0.00018,
            overuse_time_th: Duration::from_millis(10),
            beta: 0.85,
            incoming_window: Duration::from_millis(500),
            report_interval: Duration::from_secs(1),
        }
    }
}

/// What the over-use detector signals (§5.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signal {
    Normal,
    Overuse,
    Underuse,
}

/// The delay-based rate controller's state (§5.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RateState {
    Hold,
    Increase,
    Decrease,
}

/// Milliseconds as f64, the unit the draft's formulas use.
fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// `a − b` in ms, signed.
fn signed_ms(a: Instant, b: Instant) -> f64 {
    (a.as_nanos() as f64 - b.as_nanos() as f64) / 1e6
}

#[derive(Clone, Copy, Debug)]
struct Group {
    first_send: Instant,
    /// T(i) and t(i): departure and arrival of the group's last packet (§5.1).
    last_send: Instant,
    last_arrival: Instant,
}

/// One completed packet group's news: its arrival time t(i), the delay variation d(i) and
/// the filter's estimate m(i), in ms.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Estimate {
    pub arrival: Instant,
    pub d_ms: f64,
    pub m_ms: f64,
}

/// §5.1–5.3: packet groups and the Kalman filter of the inter-group delay variation. Send
/// times are on the sender's clock and arrival times on the receiver's; only differences
/// within each clock are used.
#[derive(Clone, Debug)]
pub struct ArrivalFilter {
    params: GccParams,
    current: Option<Group>,
    previous: Option<Group>,
    /// m_hat(i), e(i), var_v_hat(i), ms and ms².
    m_hat: f64,
    error_cov: f64,
    var_v_hat: f64,
    /// The last K inter-departure times, ms, for f_max.
    inter_departure_ms: VecDeque<f64>,
}

impl ArrivalFilter {
    pub fn new(params: GccParams) -> ArrivalFilter {
        ArrivalFilter {
            params,
            current: None,
            previous: None,
            m_hat: 0.0,
            error_cov: params.initial_error_cov_ms2,
            var_v_hat: 1.0,
            inter_departure_ms: VecDeque::new(),
        }
    }

    /// The current estimate m_hat, ms.
    pub fn m_ms(&self) -> f64 {
        self.m_hat
    }

    /// A packet sent at `send` (sender's clock) arrived at `arrival` (receiver's clock).
    /// Returns the estimate when this packet closed a group.
    pub fn on_packet(&mut self, send: Instant, arrival: Instant) -> Option<Estimate> {
        let Some(cur) = self.current.as_mut() else {
            self.current = Some(Group {
                first_send: send,
                last_send: send,
                last_arrival: arrival,
            });
            return None;
        };
        if send < cur.first_send {
            // Reordered from an earlier group: its group is already judged.
            return None;
        }
        // §5.1: sent within burst_time of the group's first packet.
        if send - cur.first_send <= self.params.burst_time {
            cur.last_send = cur.last_send.max(send);
            cur.last_arrival = cur.last_arrival.max(arrival);
            return None;
        }
        // §5.2 pre-filtering: a packet that arrives within burst_time of the group's last one
        // with a negative delay variation was queued behind it (a burst that the path
        // delivered together): it joins the group.
        let inter_arrival = arrival.saturating_duration_since(cur.last_arrival);
        let d_join = signed_ms(arrival, cur.last_arrival) - signed_ms(send, cur.last_send);
        if inter_arrival < self.params.burst_time && d_join < 0.0 {
            cur.last_send = send;
            cur.last_arrival = cur.last_arrival.max(arrival);
            return None;
        }
        let done = *cur;
        self.current = Some(Group {
            first_send: send,
            last_send: send,
            last_arrival: arrival,
        });
        let prev = self.previous.replace(done)?;
        Some(self.update(prev, done))
    }

    /// §5.3, for group i = `g` after group i−1 = `prev`.
    fn update(&mut self, prev: Group, g: Group) -> Estimate {
        let p = &self.params;
        // §5.1: d(i) = t(i) − t(i−1) − (T(i) − T(i−1)).
        let inter_departure = signed_ms(g.last_send, prev.last_send);
        let d = signed_ms(g.last_arrival, prev.last_arrival) - inter_departure;
        self.inter_departure_ms.push_back(inter_departure.max(1e-3));
        while self.inter_departure_ms.len() > p.f_max_groups.max(1) {
            self.inter_departure_ms.pop_front();
        }
        // f_max = max 1/(T(j) − T(j−1)) over the last K groups, per ms;
        // alpha = (1 − chi)^(30 / (1000 · f_max)).
        let f_max = self
            .inter_departure_ms
            .iter()
            .map(|t| 1.0 / t)
            .fold(0.0, f64::max);
        let alpha = (1.0 - p.chi).powf(30.0 / (1000.0 * f_max));
        // z(i) = d(i) − m_hat(i−1); the noise variance is updated with z capped at
        // 3·sqrt(var_v_hat) (the draft's outlier filter):
        // var_v_hat(i) = max(alpha·var_v_hat(i−1) + (1 − alpha)·z(i)², 1).
        let z = d - self.m_hat;
        let z_capped = z.clamp(-3.0 * self.var_v_hat.sqrt(), 3.0 * self.var_v_hat.sqrt());
        self.var_v_hat = (alpha * self.var_v_hat + (1.0 - alpha) * z_capped * z_capped).max(1.0);
        // k(i) = (e(i−1) + q) / (var_v_hat(i) + e(i−1) + q);
        // m_hat(i) = m_hat(i−1) + z(i)·k(i); e(i) = (1 − k(i))·(e(i−1) + q).
        let prior = self.error_cov + p.state_noise_ms2;
        let k = prior / (self.var_v_hat + prior);
        self.m_hat += z * k;
        self.error_cov = (1.0 - k) * prior;
        Estimate {
            arrival: g.last_arrival,
            d_ms: d,
            m_ms: self.m_hat,
        }
    }
}

/// §5.4: the over-use detector with its adaptive threshold.
#[derive(Clone, Debug)]
pub struct OveruseDetector {
    params: GccParams,
    threshold_ms: f64,
    last_update: Option<Instant>,
    previous_m_ms: f64,
    /// Since when m has been above the threshold.
    over_since: Option<Instant>,
    signal: Signal,
}

impl OveruseDetector {
    pub fn new(params: GccParams) -> OveruseDetector {
        OveruseDetector {
            params,
            threshold_ms: params.initial_threshold_ms,
            last_update: None,
            previous_m_ms: 0.0,
            over_since: None,
            signal: Signal::Normal,
        }
    }

    /// del_var_th, ms.
    pub fn threshold_ms(&self) -> f64 {
        self.threshold_ms
    }

    /// The estimate `m_ms` of the group that arrived at `arrival`; returns the signal.
    pub fn detect(&mut self, arrival: Instant, m_ms: f64) -> Signal {
        let th = self.threshold_ms;
        self.signal = if m_ms > th {
            let since = *self.over_since.get_or_insert(arrival);
            // Over-use is signalled only after overuse_time_th above the threshold, and
            // not while m is falling (m(i) < m(i−1)).
            if arrival - since >= self.params.overuse_time_th && m_ms >= self.previous_m_ms {
                Signal::Overuse
            } else {
                self.signal_while_undecided()
            }
        } else {
            self.over_since = None;
            if m_ms < -th {
                Signal::Underuse
            } else {
                Signal::Normal
            }
        };
        self.adapt_threshold(arrival, m_ms);
        self.previous_m_ms = m_ms;
        self.signal
    }

    /// Above the threshold but not yet for long enough: an over-use already signalled stays,
    /// anything else reads as normal.
    fn signal_while_undecided(&self) -> Signal {
        match self.signal {
            Signal::Overuse => Signal::Overuse,
            _ => Signal::Normal,
        }
    }

    /// del_var_th(i) = del_var_th(i−1) + (t(i) − t(i−1))·K(i)·(|m(i)| − del_var_th(i−1)),
    /// K = K_d when |m(i)| < del_var_th(i−1), else K_u; not updated when
    /// |m(i)| − del_var_th > 15 ms; kept within [6, 600] ms.
    fn adapt_threshold(&mut self, arrival: Instant, m_ms: f64) {
        let p = &self.params;
        let last = self.last_update.replace(arrival);
        if m_ms.abs() - self.threshold_ms > 15.0 {
            return;
        }
        // The time step is capped at 100 ms (not in the draft, as in WebRTC): after a
        // silence one step would otherwise throw the threshold past |m|.
        let dt_ms = last.map_or(0.0, |l| ms(arrival - l).min(100.0));
        let k = if m_ms.abs() < self.threshold_ms {
            p.k_down
        } else {
            p.k_up
        };
        self.threshold_ms += dt_ms * k * (m_ms.abs() - self.threshold_ms);
        self.threshold_ms = self
            .threshold_ms
            .clamp(p.min_threshold_ms, p.max_threshold_ms);
    }
}

/// §5.5: the delay-based estimate A_hat, from the detector's signals and the incoming rate.
#[derive(Clone, Debug)]
pub struct AimdRateControl {
    params: GccParams,
    state: RateState,
    estimate_bps: f64,
    last_update: Option<Instant>,
    /// The incoming rate at decreases: its exponential average and variance, bit/s and
    /// (bit/s)², for "close to convergence".
    avg_max_bps: Option<f64>,
    var_max_bps2: f64,
}

impl AimdRateControl {
    pub fn new(params: GccParams, start_bps: f64) -> AimdRateControl {
        AimdRateControl {
            params,
            state: RateState::Increase,
            estimate_bps: start_bps,
            last_update: None,
            avg_max_bps: None,
            var_max_bps2: 0.0,
        }
    }

    pub fn state(&self) -> RateState {
        self.state
    }

    /// A_hat, bit/s.
    pub fn estimate_bps(&self) -> f64 {
        self.estimate_bps
    }

    /// Scales A_hat (the controller's feedback timeout).
    pub fn scale(&mut self, factor: f64) {
        self.estimate_bps *= factor;
    }

    /// One update at `now` with the detector's `signal`, the incoming rate R_hat over the
    /// last T (`None` before a full window) and the RTT.
    pub fn update(
        &mut self,
        now: Instant,
        signal: Signal,
        incoming_bps: Option<f64>,
        rtt: Duration,
    ) -> f64 {
        // The state table of §5.5 (rows: signal; columns: state; empty cells keep the state).
        self.state = match (signal, self.state) {
            (Signal::Overuse, RateState::Hold | RateState::Increase) => RateState::Decrease,
            (Signal::Normal, RateState::Hold) => RateState::Increase,
            (Signal::Normal, RateState::Decrease) => RateState::Hold,
            (Signal::Underuse, RateState::Increase | RateState::Decrease) => RateState::Hold,
            (_, s) => s,
        };
        let since_ms = self
            .last_update
            .map_or(0.0, |l| ms(now.saturating_duration_since(l)));
        self.last_update = Some(now);
        match self.state {
            RateState::Hold => {}
            RateState::Increase => {
                if let Some(r) = incoming_bps {
                    // Far above the average rate at past decreases: the path changed.
                    if self
                        .avg_max_bps
                        .is_some_and(|avg| r > avg + 3.0 * self.std_max_bps())
                    {
                        self.avg_max_bps = None;
                        self.var_max_bps2 = 0.0;
                    }
                }
                let near = match (incoming_bps, self.avg_max_bps) {
                    (Some(r), Some(avg)) => (r - avg).abs() <= 3.0 * self.std_max_bps(),
                    _ => false,
                };
                if near {
                    // Additive: at most half a packet per response_time = 100 ms + RTT;
                    // packets sized as a 30 fps frame split into packets of ≤ 1200 bytes.
                    let response_ms = 100.0 + ms(rtt);
                    let alpha = 0.5 * (since_ms / response_ms).min(1.0);
                    let bits_per_frame = self.estimate_bps / 30.0;
                    let packets_per_frame = (bits_per_frame / (1200.0 * 8.0)).ceil().max(1.0);
                    let packet_bits = bits_per_frame / packets_per_frame;
                    self.estimate_bps += (alpha * packet_bits).max(1000.0);
                } else {
                    // Multiplicative: eta = 1.08^min(time since the last update / 1 s, 1).
                    self.estimate_bps *= 1.08f64.powf((since_ms / 1000.0).min(1.0));
                }
                // The estimate must not run away from what is actually sent:
                // A_hat ≤ 1.5 · R_hat.
                if let Some(r) = incoming_bps {
                    self.estimate_bps = self.estimate_bps.min(1.5 * r);
                }
            }
            RateState::Decrease => {
                // A_hat = beta · R_hat, and R_hat feeds the average at decreases (smoothing
                // factor 0.95).
                let r = incoming_bps.unwrap_or(self.estimate_bps);
                self.estimate_bps = self.params.beta * r;
                let avg = self.avg_max_bps.unwrap_or(r);
                let avg = 0.95 * avg + 0.05 * r;
                self.var_max_bps2 = 0.95 * self.var_max_bps2 + 0.05 * (r - avg) * (r - avg);
                self.avg_max_bps = Some(avg);
            }
        }
        self.estimate_bps
    }

    fn std_max_bps(&self) -> f64 {
        self.var_max_bps2.sqrt()
    }
}

/// §6: the loss-based estimate As_hat, updated once per receiver report.
#[derive(Clone, Debug)]
pub struct LossBasedControl {
    estimate_bps: f64,
}

impl LossBasedControl {
    pub fn new(start_bps: f64) -> LossBasedControl {
        LossBasedControl {
            estimate_bps: start_bps,
        }
    }

    /// As_hat, bit/s.
    pub fn estimate_bps(&self) -> f64 {
        self.estimate_bps
    }

    pub fn scale(&mut self, factor: f64) {
        self.estimate_bps *= factor;
    }

    /// One report: `lost` of `expected` packets lost since the previous one, with As_hat(i−1)
    /// taken as at most `sending_bps` (the rate actually sent, so that a cut bites).
    pub fn on_report(&mut self, lost: u64, expected: u64, sending_bps: f64) -> f64 {
        if expected == 0 {
            return self.estimate_bps;
        }
        let p = lost.min(expected) as f64 / expected as f64;
        let prev = self.estimate_bps.min(sending_bps);
        self.estimate_bps = if p > 0.10 {
            // More than 10 % lost: As_hat(i) = As_hat(i−1)·(1 − 0.5·p).
            prev * (1.0 - 0.5 * p)
        } else if p >= 0.02 {
            // 2–10 %: unchanged; losses that do not grow are not taken as congestion.
            prev
        } else {
            // Under 2 %: As_hat(i) = 1.05·As_hat(i−1).
            prev * 1.05
        };
        self.estimate_bps
    }
}

/// Both controllers together: the rate is `min(A_hat, As_hat)` within `[min, max]` (§6).
#[derive(Clone, Debug)]
pub struct Gcc {
    params: GccParams,
    min_bps: f64,
    max_bps: f64,
    filter: ArrivalFilter,
    detector: OveruseDetector,
    aimd: AimdRateControl,
    loss: LossBasedControl,
    /// (when, bytes) reported received, for R_hat.
    received: VecDeque<(Instant, u64)>,
    received_bytes_in_window: u64,
    first_feedback: Option<Instant>,
    /// The report being gathered: its start and counts.
    report_start: Option<Instant>,
    report_lost: u64,
    report_expected: u64,
    signal: Signal,
}

impl Gcc {
    pub fn new(params: GccParams, start_bps: f64, min_bps: f64, max_bps: f64) -> Gcc {
        let start = start_bps.clamp(min_bps, max_bps);
        Gcc {
            params,
            min_bps,
            max_bps,
            filter: ArrivalFilter::new(params),
            detector: OveruseDetector::new(params),
            aimd: AimdRateControl::new(params, start),
            loss: LossBasedControl::new(start),
            received: VecDeque::new(),
            received_bytes_in_window: 0,
            first_feedback: None,
            report_start: None,
            report_lost: 0,
            report_expected: 0,
            signal: Signal::Normal,
        }
    }

    /// The target rate, bit/s: `min(A_hat, As_hat)` within the bounds.
    pub fn target_bps(&self) -> f64 {
        self.aimd
            .estimate_bps()
            .min(self.loss.estimate_bps())
            .clamp(self.min_bps, self.max_bps)
    }

    pub fn delay_based_bps(&self) -> f64 {
        self.aimd.estimate_bps()
    }
    pub fn loss_based_bps(&self) -> f64 {
        self.loss.estimate_bps()
    }
    pub fn signal(&self) -> Signal {
        self.signal
    }
    pub fn rate_state(&self) -> RateState {
        self.aimd.state()
    }
    pub fn threshold_ms(&self) -> f64 {
        self.detector.threshold_ms()
    }
    pub fn delay_variation_ms(&self) -> f64 {
        self.filter.m_ms()
    }

    /// R_hat: the bytes reported received over the last T, once T has passed.
    fn incoming_bps(&self, now: Instant) -> Option<f64> {
        let first = self.first_feedback?;
        if now - first < self.params.incoming_window {
            return None;
        }
        Some(self.received_bytes_in_window as f64 * 8.0 / self.params.incoming_window.as_secs_f64())
    }

    /// A packet sent at `send` (sender's clock) arrived at `arrival` (receiver's clock); the
    /// feedback that says so came in at `now`. Runs the delay-based controller when the
    /// packet closes a group.
    pub fn on_arrival(&mut self, now: Instant, send: Instant, arrival: Instant, rtt: Duration) {
        if let Some(e) = self.filter.on_packet(send, arrival) {
            self.signal = self.detector.detect(e.arrival, e.m_ms);
            let incoming = self.incoming_bps(now);
            self.aimd.update(now, self.signal, incoming, rtt);
            self.bound();
        }
    }

    /// A feedback at `now`: `acked_bytes` newly received, `acked` packets received and
    /// `lost` lost (a CE mark counted as a loss). Closes a receiver report every
    /// `report_interval` and runs the loss-based controller on it.
    pub fn on_feedback(&mut self, now: Instant, acked_bytes: u64, acked: u64, lost: u64) {
        self.first_feedback.get_or_insert(now);
        self.received.push_back((now, acked_bytes));
        self.received_bytes_in_window += acked_bytes;
        while let Some(&(t, b)) = self.received.front() {
            if now - t < self.params.incoming_window {
                break;
            }
            self.received.pop_front();
            self.received_bytes_in_window -= b;
        }
        let start = *self.report_start.get_or_insert(now);
        self.report_lost += lost;
        self.report_expected += acked + lost;
        if now - start >= self.params.report_interval {
            let sending = self.target_bps();
            self.loss
                .on_report(self.report_lost, self.report_expected, sending);
            self.report_start = Some(now);
            self.report_lost = 0;
            self.report_expected = 0;
            self.bound();
        }
    }

    /// Multiplies both estimates (the controller's feedback timeout).
    pub fn scale(&mut self, factor: f64) {
        self.aimd.scale(factor);
        self.loss.scale(factor);
        self.bound();
    }

    fn bound(&mut self) {
        let (lo, hi) = (self.min_bps, self.max_bps);
        let clamp = |v: f64| v.clamp(lo, hi);
        self.aimd.estimate_bps = clamp(self.aimd.estimate_bps);
        self.loss.estimate_bps = clamp(self.loss.estimate_bps);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p() -> GccParams {
        GccParams::default()
    }

    fn ms_at(v: f64) -> Instant {
        Instant::from_nanos((v * 1e6) as u64)
    }

    #[test]
    fn loss_based_control_holds_from_2_to_10_percent_and_cuts_by_half_the_loss_above() {
        let mut l = LossBasedControl::new(2_000_000.0);
        // Under 2 %: grow by 5 %.
        assert_eq!(l.on_report(1, 100, f64::MAX), 2_100_000.0);
        // 2 % and 10 %: hold.
        assert_eq!(l.on_report(2, 100, f64::MAX), 2_100_000.0);
        assert_eq!(l.on_report(10, 100, f64::MAX), 2_100_000.0);
        // 40 %: cut by 20 %.
        let cut = l.on_report(40, 100, f64::MAX);
        assert!((cut - 2_100_000.0 * 0.8).abs() < 1e-6, "{cut}");
        // No packets: no news.
        assert_eq!(l.on_report(0, 0, f64::MAX), cut);
        // The estimate starts from what is sent, so a cut is felt at once.
        assert_eq!(l.on_report(5, 100, 1_000_000.0), 1_000_000.0);
    }

    #[test]
    fn packets_sent_within_burst_time_form_one_group() {
        let mut f = ArrivalFilter::new(p());
        // Three packets sent 2 ms apart: one group; the fourth, 10 ms after the first,
        // closes it; only the second closed group yields an estimate.
        for (s, a) in [(0.0, 20.0), (2.0, 22.0), (4.0, 24.0)] {
            assert_eq!(f.on_packet(ms_at(s), ms_at(a)), None);
        }
        assert_eq!(f.on_packet(ms_at(10.0), ms_at(30.0)), None);
        let e = f.on_packet(ms_at(20.0), ms_at(43.0)).unwrap();
        // d = (30 − 24) − (10 − 4) = 0 for the second group.
        assert_eq!(e.arrival, ms_at(30.0));
        assert!(e.d_ms.abs() < 1e-9, "{e:?}");
        // The next: d = (43 − 30) − (20 − 10) = 3 ms.
        let e = f.on_packet(ms_at(30.0), ms_at(53.0)).unwrap();
        assert!((e.d_ms - 3.0).abs() < 1e-9, "{e:?}");
    }

    #[test]
    fn a_burst_delivered_back_to_back_joins_the_group_it_queued_behind() {
        let mut f = ArrivalFilter::new(p());
        f.on_packet(ms_at(0.0), ms_at(20.0));
        // Sent 8 ms later but arriving 1 ms after it: it waited behind the first (§5.2).
        assert_eq!(f.on_packet(ms_at(8.0), ms_at(21.0)), None);
        f.on_packet(ms_at(20.0), ms_at(40.0));
        let e = f.on_packet(ms_at(40.0), ms_at(60.0)).unwrap();
        // Group 1 ends at (8, 21): d = (40 − 21) − (20 − 8) = 7 ms.
        assert!((e.d_ms - 7.0).abs() < 1e-9, "{e:?}");
    }

    #[test]
    fn the_kalman_estimate_follows_a_steadily_growing_queue() {
        let mut f = ArrivalFilter::new(p());
        // A group every 10 ms, each 2 ms later than the last: m converges to 2 ms.
        let mut last = None;
        for i in 0..400 {
            let s = i as f64 * 10.0;
            if let Some(e) = f.on_packet(ms_at(s), ms_at(20.0 + s * 1.2)) {
                last = Some(e);
            }
        }
        let m = last.unwrap().m_ms;
        assert!((m - 2.0).abs() < 0.1, "{m}");
        // Then the queue is steady: m returns to 0.
        for i in 400..800 {
            let s = i as f64 * 10.0;
            if let Some(e) = f.on_packet(ms_at(s), ms_at(20.0 + 400.0 * 2.0 + s)) {
                last = Some(e);
            }
        }
        assert!(last.unwrap().m_ms.abs() < 0.1, "{:?}", last);
    }

    #[test]
    fn a_noise_outlier_moves_the_variance_by_three_deviations_at_most() {
        let mut f = ArrivalFilter::new(p());
        for i in 0..50 {
            let s = i as f64 * 10.0;
            f.on_packet(ms_at(s), ms_at(20.0 + s));
        }
        assert_eq!(f.var_v_hat, 1.0);
        // One group 500 ms late: z is capped at 3·sqrt(1) in the variance update.
        f.on_packet(ms_at(500.0), ms_at(1020.0));
        f.on_packet(ms_at(510.0), ms_at(1030.0));
        let alpha = (1.0f64 - 0.01).powf(30.0 / (1000.0 * 0.1));
        assert!(
            (f.var_v_hat - (alpha + (1.0 - alpha) * 9.0)).abs() < 1e-9,
            "{}",
            f.var_v_hat
        );
    }

    #[test]
    fn overuse_is_signalled_only_after_overuse_time_th_and_not_while_m_falls() {
        let mut d = OveruseDetector::new(p());
        assert_eq!(d.detect(ms_at(0.0), 13.0), Signal::Normal);
        assert_eq!(d.detect(ms_at(5.0), 14.0), Signal::Normal);
        // 10 ms above the threshold and m not falling.
        assert_eq!(d.detect(ms_at(10.0), 14.5), Signal::Overuse);
        let mut d = OveruseDetector::new(p());
        d.detect(ms_at(0.0), 14.0);
        // 10 ms above, but m fell.
        assert_eq!(d.detect(ms_at(10.0), 13.0), Signal::Normal);
        assert_eq!(d.detect(ms_at(20.0), -13.0), Signal::Underuse);
        assert_eq!(d.detect(ms_at(30.0), 1.0), Signal::Normal);
    }

    #[test]
    fn the_threshold_follows_m_fast_upward_slowly_downward_within_its_bounds() {
        let mut d = OveruseDetector::new(p());
        d.detect(ms_at(0.0), 0.0);
        // |m| 20 ms above a 12.5 ms threshold, 10 ms later: beyond 15 ms over, not updated.
        d.detect(ms_at(10.0), 30.0);
        assert_eq!(d.threshold_ms(), 12.5);
        // |m| = 22.5: th += 10 · 0.01 · (22.5 − 12.5) = 1.
        d.detect(ms_at(20.0), 22.5);
        assert!((d.threshold_ms() - 13.5).abs() < 1e-9);
        // |m| = 0 for 10 ms: th −= 10 · 0.00018 · 13.5.
        d.detect(ms_at(30.0), 0.0);
        assert!((d.threshold_ms() - (13.5 - 10.0 * 0.00018 * 13.5)).abs() < 1e-9);
        // Long quiet: down to 6 ms and no further.
        for i in 4..10_000 {
            d.detect(ms_at(i as f64 * 10.0), 0.0);
        }
        assert_eq!(d.threshold_ms(), 6.0);
    }

    #[test]
    fn the_rate_state_machine_follows_the_drafts_table() {
        let rtt = Duration::from_millis(20);
        let mut a = AimdRateControl::new(p(), 1_000_000.0);
        assert_eq!(a.state(), RateState::Increase);
        a.update(ms_at(0.0), Signal::Normal, None, rtt);
        // A second of normal: multiplicative increase, 8 %.
        let r = a.update(ms_at(1000.0), Signal::Normal, None, rtt);
        assert!((r - 1_080_000.0).abs() < 1.0, "{r}");
        // Over-use: A_hat = 0.85 · R_hat.
        let r = a.update(ms_at(1010.0), Signal::Overuse, Some(1_000_000.0), rtt);
        assert_eq!((a.state(), r), (RateState::Decrease, 850_000.0));
        // Normal after a decrease: hold.
        let r = a.update(ms_at(1500.0), Signal::Normal, Some(900_000.0), rtt);
        assert_eq!((a.state(), r), (RateState::Hold, 850_000.0));
        // Under-use holds too; then normal increases again.
        a.update(ms_at(1600.0), Signal::Underuse, Some(900_000.0), rtt);
        assert_eq!(a.state(), RateState::Hold);
        a.update(ms_at(1700.0), Signal::Normal, Some(900_000.0), rtt);
        assert_eq!(a.state(), RateState::Increase);
        a.update(ms_at(1800.0), Signal::Underuse, Some(900_000.0), rtt);
        assert_eq!(a.state(), RateState::Hold);
    }

    #[test]
    fn near_the_rate_of_past_decreases_the_increase_is_additive_and_never_above_1_5_r() {
        let rtt = Duration::from_millis(20);
        let mut a = AimdRateControl::new(p(), 1_000_000.0);
        a.update(ms_at(0.0), Signal::Overuse, Some(1_000_000.0), rtt);
        a.update(ms_at(10.0), Signal::Normal, Some(1_000_000.0), rtt);
        a.update(ms_at(20.0), Signal::Normal, Some(1_000_000.0), rtt);
        assert_eq!(a.state(), RateState::Increase);
        let before = a.estimate_bps();
        // R_hat equals the average at decreases: additive. 120 ms since the last update is
        // one response time (100 ms + 20 ms): half a packet, a 30 fps frame of A_hat / 30
        // split into packets of at most 1200 bytes.
        let r = a.update(ms_at(140.0), Signal::Normal, Some(1_000_000.0), rtt);
        let half_packet = 0.5 * (before / 30.0) / (before / 30.0 / 9600.0).ceil();
        assert!((r - before - half_packet).abs() < 1.0, "{before} → {r}");
        // Far from the average: multiplicative again, capped at 1.5 · R_hat.
        let r = a.update(ms_at(1140.0), Signal::Normal, Some(600_000.0), rtt);
        assert_eq!(r, 900_000.0);
    }

    #[test]
    fn gcc_keeps_its_rate_through_a_few_percent_of_loss_that_would_halve_reno() {
        let mut g = Gcc::new(p(), 2_000_000.0, 100_000.0, 4_000_000.0);
        let mut now = Instant::ZERO;
        let mut send = Instant::ZERO;
        let rtt = Duration::from_millis(40);
        // 10 s of a steady path: a packet every 4 ms, each arriving 20 ms later, feedback
        // every 10 ms, 2 packets lost in every 25 feedbacks (about 4 %).
        let mut k = 0u64;
        while now < Instant::from_secs(10) {
            now += Duration::from_millis(10);
            for _ in 0..2 {
                send += Duration::from_millis(4);
                g.on_arrival(now, send, send + Duration::from_millis(20), rtt);
            }
            k += 1;
            g.on_feedback(now, 2 * 1200, 2, u64::from(k % 25 < 2));
        }
        // The loss-based side holds the rate it had; the delay-based side sees no queue.
        assert!(
            (g.target_bps() - 2_000_000.0).abs() < 1.0,
            "{}",
            g.target_bps()
        );
        assert_eq!(g.signal(), Signal::Normal);
        assert!(g.delay_based_bps() > 2_000_000.0);
        // Then 40 % lost over a whole report: cut by 20 %, once.
        let before = g.target_bps();
        for _ in 0..150 {
            now += Duration::from_millis(10);
            g.on_feedback(now, 3 * 1200, 3, 2);
        }
        assert!(
            (g.target_bps() - 0.8 * before).abs() < 1.0,
            "{}",
            g.target_bps()
        );
    }

    #[test]
    fn gcc_backs_off_when_its_own_queue_grows() {
        let mut g = Gcc::new(p(), 4_000_000.0, 100_000.0, 8_000_000.0);
        let mut send = Instant::ZERO;
        let mut arrival = Instant::from_millis(20);
        let mut decreased = false;
        // A packet every 2.4 ms (4 Mbit/s of 1200 B) into a 1 Mbit/s bottleneck: each
        // arrives 9.6 ms after the previous one, and the queue grows by 7.2 ms a packet.
        for _ in 0..200 {
            send += Duration::from_micros(2400);
            arrival += Duration::from_micros(9600);
            let now = arrival + Duration::from_millis(10);
            g.on_feedback(now, 1200, 1, 0);
            g.on_arrival(now, send, arrival, Duration::from_millis(100));
            decreased |= g.rate_state() == RateState::Decrease;
        }
        assert!(decreased);
        // Down to about 0.85 × the 1 Mbit/s that gets through, and held there.
        assert!(g.target_bps() < 1_500_000.0, "{}", g.target_bps());
    }
}
