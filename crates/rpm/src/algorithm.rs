//! The arithmetic of draft-ietf-ippm-responsiveness-09 as a state machine in simulated time:
//! when to add a load-generating connection, when to launch a pair of probes, the moving
//! averages and the stability rule, the one-sided trimmed mean, RPM and its confidence.
//!
//! It owns no socket and no clock. The client shell feeds it bytes moved
//! ([`RpmTest::on_bytes`]) and finished probes ([`RpmTest::on_probe`]) with `now`, asks it
//! what to do ([`RpmTest::poll`]) and when to ask again ([`RpmTest::next_wakeup`]). What the
//! connections and probes are (HTTP/2, TLS) is the shell's business.
//!
//! Read before editing: draft-ietf-ippm-responsiveness-09 sections 5.1.3 (steady state),
//! 5.2 (parameters), 5.3 (probes, their rate), 5.3.1 (aggregation), 5.4 (final algorithm)
//! and 5.4.1 (confidence).

use wire::{Duration, Instant};

/// The test's parameters (draft section 5.2, "Test Parameters"), with the draft's defaults
/// except the interval: see [`Params::default`].
#[derive(Clone, Debug, PartialEq)]
pub struct Params {
    /// MAD: how many intervals a moving average spans.
    pub mad: usize,
    /// ID: the interval at which stability is evaluated and connections are added.
    pub interval: Duration,
    /// TMP: the share of the samples the one-sided trimmed mean keeps (0.95: the slowest 5 %
    /// are dropped).
    pub trimmed_mean_keep: f64,
    /// SDT: the standard deviation tolerance, as a fraction of the latest moving average.
    pub sdt: f64,
    /// INP: load-generating connections per direction at the start.
    pub initial_flows: usize,
    /// INC: connections added per direction at each interval.
    pub flows_increment: usize,
    /// MNP: at most this many load-generating connections per direction.
    pub max_flows: usize,
    /// MPS: at most this many probe pairs per second.
    pub max_probes_per_s: f64,
    /// PTC: the probes may use at most this fraction of the measured goodput.
    pub probe_capacity_share: f64,
    /// The test's time limit; at it the result is reported with its confidence (draft section
    /// 5.4.1).
    pub max_duration: Duration,
    /// `Some(n)`: exactly `n` load-generating connections per direction from the start, none
    /// added (to compare with tools that load a path with a fixed number of flows).
    pub fixed_flows: Option<usize>,
    /// The directions that carry load-generating connections.
    pub load: Load,
}

impl Default for Params {
    /// The draft's table (section 5.2), except ID: the draft's table gives 5 s; Apple's
    /// `networkQuality` and goresponsiveness evaluate every second, so a test ends within 20 s
    /// rather than within 100 s. `--interval 5s` gives the draft's.
    fn default() -> Params {
        Params {
            mad: 4,
            interval: Duration::from_secs(1),
            trimmed_mean_keep: 0.95,
            sdt: 0.05,
            initial_flows: 1,
            flows_increment: 1,
            max_flows: 16,
            max_probes_per_s: 100.0,
            probe_capacity_share: 0.05,
            max_duration: Duration::from_secs(20),
            fixed_flows: None,
            load: Load::Both,
        }
    }
}

/// Bytes one probe pair exchanges, TCP and TLS overheads included (draft section 5.3: "around
/// 5000 bytes" for a foreign probe, "no more than 1000 bytes" for a self probe).
pub const PROBE_PAIR_BYTES: f64 = 6000.0;

/// The probe rate before any goodput has been measured (pairs per second).
const FIRST_PROBES_PER_S: f64 = 1.0;

/// The direction of a load-generating connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dir {
    /// Server to client (GET of the large object).
    Down,
    /// Client to server (POST to the upload URL).
    Up,
}

impl Dir {
    pub const BOTH: [Dir; 2] = [Dir::Down, Dir::Up];
    fn index(self) -> usize {
        match self {
            Dir::Down => 0,
            Dir::Up => 1,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Dir::Down => "down",
            Dir::Up => "up",
        }
    }
}

/// Which directions a test loads. The draft's test loads both at once (section 5.4: "the
/// load-generating connections ... in both directions"); `networkQuality -s` and Cloudflare's
/// `mach` load one direction at a time and report each direction's responsiveness, which
/// [`Load::Down`] and [`Load::Up`] measure.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    serde::Serialize,
    serde::Deserialize,
    clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum Load {
    /// Downloads and uploads at once.
    #[default]
    Both,
    /// Downloads only: self probes go on download connections.
    Down,
    /// Uploads only: self probes go on upload connections.
    Up,
}

impl Load {
    /// The directions loaded.
    pub fn dirs(self) -> &'static [Dir] {
        match self {
            Load::Both => &Dir::BOTH,
            Load::Down => &[Dir::Down],
            Load::Up => &[Dir::Up],
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Load::Both => "both",
            Load::Down => "down",
            Load::Up => "up",
        }
    }
}

/// One finished probe's times (draft section 5.3).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Sample {
    /// A probe on a connection of its own: `tcp_f`, `tls_f` (per round trip of the
    /// handshake; `None` without TLS) and `http_f`.
    Foreign {
        tcp: Duration,
        tls: Option<Duration>,
        http: Duration,
    },
    /// A probe on a load-generating connection: `http_l`.
    Loaded { http: Duration },
}

/// How sure the result is (draft section 5.4.1).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub enum Confidence {
    /// Fewer than MAD intervals of the stage ran.
    Low,
    /// MAD intervals ran, but the moving averages did not settle within SDT.
    Medium,
    /// They settled.
    High,
}

impl Confidence {
    pub fn name(self) -> &'static str {
        match self {
            Confidence::Low => "Low",
            Confidence::Medium => "Medium",
            Confidence::High => "High",
        }
    }
}

/// The responsiveness over a set of samples (draft section 5.3.1).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Responsiveness {
    /// TM(tcp_f), TM(tls_f), TM(http_f), TM(http_l) in milliseconds.
    pub tcp_ms: f64,
    pub tls_ms: Option<f64>,
    pub http_ms: f64,
    pub loaded_ms: f64,
    /// Foreign_Responsiveness and Loaded_Responsiveness.
    pub foreign_rpm: f64,
    pub loaded_rpm: f64,
    /// Their mean: the RPM.
    pub rpm: f64,
}

/// The one-sided trimmed mean (draft section 5.3.1): the mean of the smallest `keep` share of
/// `values` (at least one). `None` for no values.
pub fn trimmed_mean(values: &[f64], keep: f64) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = ((v.len() as f64 * keep).floor() as usize).clamp(1, v.len());
    Some(v[..n].iter().sum::<f64>() / n as f64)
}

/// RPM over `samples`, or `None` when there is no foreign or no self probe among them.
///
/// Draft section 5.3.1, with TLS:
/// `Foreign_Responsiveness = 60000 / ((TM(tcp_f) + TM(tls_f) + TM(http_f)) / 3)`;
/// without TLS (section 5.3.1.2): `60000 / ((TM(tcp_f) + TM(http_f)) / 2)`;
/// `Loaded_Responsiveness = 60000 / TM(http_l)`;
/// `Responsiveness = (Foreign_Responsiveness + Loaded_Responsiveness) / 2`.
pub fn responsiveness<'a>(
    samples: impl IntoIterator<Item = &'a Sample>,
    keep: f64,
) -> Option<Responsiveness> {
    let ms = |d: &Duration| d.as_secs_f64() * 1e3;
    let (mut tcp, mut tls, mut http, mut loaded) = (vec![], vec![], vec![], vec![]);
    for s in samples {
        match s {
            Sample::Foreign {
                tcp: t,
                tls: l,
                http: h,
            } => {
                tcp.push(ms(t));
                if let Some(l) = l {
                    tls.push(ms(l));
                }
                http.push(ms(h));
            }
            Sample::Loaded { http: h } => loaded.push(ms(h)),
        }
    }
    let tcp_ms = trimmed_mean(&tcp, keep)?;
    let http_ms = trimmed_mean(&http, keep)?;
    let loaded_ms = trimmed_mean(&loaded, keep)?;
    let tls_ms = trimmed_mean(&tls, keep);
    let foreign_rt_ms = match tls_ms {
        Some(t) => (tcp_ms + t + http_ms) / 3.0,
        None => (tcp_ms + http_ms) / 2.0,
    };
    let foreign_rpm = 60_000.0 / foreign_rt_ms.max(1e-6);
    let loaded_rpm = 60_000.0 / loaded_ms.max(1e-6);
    Some(Responsiveness {
        tcp_ms,
        tls_ms,
        http_ms,
        loaded_ms,
        foreign_rpm,
        loaded_rpm,
        rpm: (foreign_rpm + loaded_rpm) / 2.0,
    })
}

/// The stability rule of draft section 5.4: stable when the standard deviation of the last
/// MAD moving averages is within SDT of the latest one.
#[derive(Clone, Debug, Default)]
pub struct Stability {
    averages: Vec<f64>,
}

impl Stability {
    pub fn push(&mut self, moving_average: f64) {
        self.averages.push(moving_average);
    }
    pub fn len(&self) -> usize {
        self.averages.len()
    }
    pub fn is_empty(&self) -> bool {
        self.averages.is_empty()
    }
    pub fn latest(&self) -> Option<f64> {
        self.averages.last().copied()
    }
    /// Population standard deviation of the last `mad` averages < `sdt` × the latest.
    pub fn is_stable(&self, mad: usize, sdt: f64) -> bool {
        if mad == 0 || self.averages.len() < mad {
            return false;
        }
        let w = &self.averages[self.averages.len() - mad..];
        let mean = w.iter().sum::<f64>() / mad as f64;
        let var = w.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / mad as f64;
        let latest = w[mad - 1];
        latest > 0.0 && var.sqrt() < sdt * latest
    }
}

/// What the shell should do now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Open one more load-generating connection in this direction.
    AddFlow(Dir),
    /// Launch one foreign and one self probe.
    Probe,
    /// The test is over: read [`RpmTest::outcome`].
    Finish,
}

/// One evaluated interval, for the report.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct IntervalRecord {
    pub index: u32,
    pub end_s: f64,
    /// Goodput in the interval, bits per second, down and up.
    pub down_bps: f64,
    pub up_bps: f64,
    /// Moving average aggregate goodput (bits per second), down and up: the values the
    /// stability rule compares.
    pub down_avg_bps: f64,
    pub up_avg_bps: f64,
    pub flows_down: usize,
    pub flows_up: usize,
    /// Responsiveness over the probes that finished in the last MAD intervals.
    pub rpm: Option<f64>,
    pub goodput_stable: bool,
    pub rpm_stable: bool,
}

/// The result (draft sections 5.4 and 5.4.1).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Outcome {
    pub responsiveness: Option<Responsiveness>,
    pub rpm_confidence: Confidence,
    pub goodput_confidence: Confidence,
    /// Goodput over the last MAD intervals (or all, if fewer ran), bits per second.
    pub down_bps: f64,
    pub up_bps: f64,
    pub flows_down: usize,
    pub flows_up: usize,
    pub duration_s: f64,
    /// The samples the result is computed from finished at or after this time (seconds
    /// since the start): the last MAD intervals.
    pub window_start_s: f64,
}

/// The responsiveness test (draft section 5.4) as a state machine.
#[derive(Clone, Debug)]
pub struct RpmTest {
    p: Params,
    start: Instant,
    next_interval: Instant,
    /// Intervals evaluated so far.
    intervals: u32,
    bytes_now: [u64; 2],
    /// Bytes moved in each past interval, per direction.
    bytes_per_interval: [Vec<u64>; 2],
    goodput: [Stability; 2],
    /// The interval at whose end goodput saturation was declared.
    saturated_at: Option<u32>,
    rpm: Stability,
    /// Samples, each with the interval it finished in.
    samples: Vec<(u32, Sample)>,
    flows: [usize; 2],
    to_add: [usize; 2],
    next_probe: Instant,
    probes_per_s: f64,
    records: Vec<IntervalRecord>,
    outcome: Option<Outcome>,
    finish_told: bool,
}

impl RpmTest {
    /// A test starting at `now`: the first INP connections per direction (or the fixed
    /// number) are asked for by the first polls, and the first probe pair at once.
    pub fn new(p: Params, now: Instant) -> RpmTest {
        let first = p.fixed_flows.unwrap_or(p.initial_flows).max(1);
        let mut to_add = [0; 2];
        for d in p.load.dirs() {
            to_add[d.index()] = first;
        }
        RpmTest {
            next_interval: now + p.interval,
            start: now,
            intervals: 0,
            bytes_now: [0; 2],
            bytes_per_interval: [vec![], vec![]],
            goodput: Default::default(),
            saturated_at: None,
            rpm: Stability::default(),
            samples: vec![],
            flows: [0; 2],
            to_add,
            next_probe: now,
            probes_per_s: FIRST_PROBES_PER_S,
            records: vec![],
            outcome: None,
            finish_told: false,
            p,
        }
    }

    pub fn params(&self) -> &Params {
        &self.p
    }

    /// `bytes` of payload moved by the load-generating connections of `dir`.
    pub fn on_bytes(&mut self, _now: Instant, dir: Dir, bytes: u64) {
        self.bytes_now[dir.index()] += bytes;
    }

    /// A probe finished at `now`.
    pub fn on_probe(&mut self, _now: Instant, s: Sample) {
        if self.outcome.is_none() {
            self.samples.push((self.intervals, s));
        }
    }

    /// The next thing to do, if any is due at `now`.
    pub fn poll(&mut self, now: Instant) -> Option<Action> {
        if self.outcome.is_some() {
            if self.finish_told {
                return None;
            }
            self.finish_told = true;
            return Some(Action::Finish);
        }
        for d in Dir::BOTH {
            if self.to_add[d.index()] > 0 {
                self.to_add[d.index()] -= 1;
                self.flows[d.index()] += 1;
                return Some(Action::AddFlow(d));
            }
        }
        if now >= self.next_interval {
            self.next_interval += self.p.interval;
            self.end_interval(now);
            return self.poll(now);
        }
        if now >= self.next_probe {
            let gap = Duration::from_secs_f64(1.0 / self.probes_per_s);
            // A late wake-up launches one pair, not a burst of the missed ones.
            self.next_probe = (self.next_probe + gap).max(now);
            return Some(Action::Probe);
        }
        None
    }

    /// When `poll` next has something to do.
    pub fn next_wakeup(&self) -> Instant {
        if self.outcome.is_some() || self.to_add.iter().any(|&n| n > 0) {
            return self.start;
        }
        self.next_interval.min(self.next_probe)
    }

    pub fn outcome(&self) -> Option<&Outcome> {
        self.outcome.as_ref()
    }

    pub fn intervals(&self) -> &[IntervalRecord] {
        &self.records
    }

    /// Moving average aggregate goodput of `dir` at the latest interval, bytes per second:
    /// "the number of total bytes of data transferred within interval p and the MAD - 1
    /// immediately preceding intervals, divided by MAD times ID" (draft section 5.4). Before
    /// MAD intervals have run, the missing ones count as no bytes, so the first MAD - 1
    /// averages climb and stability cannot be declared until MAD averages over whole windows
    /// agree (at the end of interval 2 MAD - 2 at the earliest).
    fn moving_goodput(&self, dir: Dir) -> f64 {
        let v = &self.bytes_per_interval[dir.index()];
        let sum: u64 = v[v.len().saturating_sub(self.p.mad)..].iter().sum();
        sum as f64 / (self.p.mad.max(1) as f64 * self.p.interval.as_secs_f64())
    }

    /// The goodput of `dir` over the intervals run so far, at most the last MAD, bytes per
    /// second: the best estimate of the capacity early in the test, for pacing the probes
    /// and for the reported goodput (unlike [`Self::moving_goodput`], not diluted by
    /// intervals that have not run).
    fn recent_goodput(&self, dir: Dir) -> f64 {
        let v = &self.bytes_per_interval[dir.index()];
        let n = v.len().min(self.p.mad).max(1);
        let sum: u64 = v[v.len().saturating_sub(n)..].iter().sum();
        sum as f64 / (n as f64 * self.p.interval.as_secs_f64())
    }

    /// Responsiveness over the samples of the last MAD intervals (draft section 5.3.1).
    fn window_rpm(&self) -> Option<Responsiveness> {
        let first = self.window_first();
        responsiveness(
            self.samples
                .iter()
                .filter(|(i, _)| *i >= first)
                .map(|(_, s)| s),
            self.p.trimmed_mean_keep,
        )
    }

    fn window_first(&self) -> u32 {
        self.intervals.saturating_sub(self.p.mad as u32)
    }

    fn end_interval(&mut self, now: Instant) {
        for d in Dir::BOTH {
            self.bytes_per_interval[d.index()].push(self.bytes_now[d.index()]);
            self.bytes_now[d.index()] = 0;
        }
        let index = self.intervals;
        self.intervals += 1;
        let (down, up) = (self.moving_goodput(Dir::Down), self.moving_goodput(Dir::Up));
        self.goodput[0].push(down);
        self.goodput[1].push(up);
        let (mad, sdt) = (self.p.mad, self.p.sdt);
        let goodput_stable =
            (self.p.load.dirs().iter()).all(|d| self.goodput[d.index()].is_stable(mad, sdt));
        let window = self.window_rpm();
        let mut rpm_stable = false;
        if self.saturated_at.is_some() {
            if let Some(r) = window {
                self.rpm.push(r.rpm);
            }
            rpm_stable = self.rpm.is_stable(mad, sdt);
        } else if goodput_stable {
            self.saturated_at = Some(index);
        }
        // Section 5.4: "At each interval: Create INC additional load-generating connections",
        // up to MNP.
        if self.p.fixed_flows.is_none() {
            for &d in self.p.load.dirs() {
                let room = self.p.max_flows.saturating_sub(self.flows[d.index()]);
                self.to_add[d.index()] = self.p.flows_increment.min(room);
            }
        }
        // Section 5.3: at most MPS pairs per second, and the probes' bytes at most PTC of
        // the measured goodput.
        let goodput_bytes_per_s = self.recent_goodput(Dir::Down) + self.recent_goodput(Dir::Up);
        self.probes_per_s = (self.p.probe_capacity_share * goodput_bytes_per_s / PROBE_PAIR_BYTES)
            .clamp(
                FIRST_PROBES_PER_S,
                self.p.max_probes_per_s.max(FIRST_PROBES_PER_S),
            );
        let elapsed = now.saturating_duration_since(self.start);
        self.records.push(IntervalRecord {
            index,
            end_s: elapsed.as_secs_f64(),
            down_bps: self.bytes_per_interval[0][index as usize] as f64 * 8.0
                / self.p.interval.as_secs_f64(),
            up_bps: self.bytes_per_interval[1][index as usize] as f64 * 8.0
                / self.p.interval.as_secs_f64(),
            down_avg_bps: down * 8.0,
            up_avg_bps: up * 8.0,
            flows_down: self.flows[0],
            flows_up: self.flows[1],
            rpm: window.map(|r| r.rpm),
            goodput_stable,
            rpm_stable,
        });
        if rpm_stable || elapsed >= self.p.max_duration {
            self.finish(now, window, goodput_stable, rpm_stable);
        }
    }

    fn finish(
        &mut self,
        now: Instant,
        window: Option<Responsiveness>,
        goodput_stable: bool,
        rpm_stable: bool,
    ) {
        let mad = self.p.mad;
        // Section 5.4.1: Low when fewer than MAD intervals of the stage ran, Medium when they
        // ran without settling, High when the moving averages settled.
        let confidence = |ran: usize, stable: bool| match (ran >= mad, stable) {
            (_, true) => Confidence::High,
            (true, false) => Confidence::Medium,
            (false, false) => Confidence::Low,
        };
        let goodput_ran = self.goodput[0].len();
        let rpm_ran = self.rpm.len();
        let first = self.window_first();
        self.outcome = Some(Outcome {
            responsiveness: window,
            rpm_confidence: confidence(rpm_ran, rpm_stable),
            goodput_confidence: confidence(goodput_ran, goodput_stable),
            down_bps: self.recent_goodput(Dir::Down) * 8.0,
            up_bps: self.recent_goodput(Dir::Up) * 8.0,
            flows_down: self.flows[0],
            flows_up: self.flows[1],
            duration_s: now.saturating_duration_since(self.start).as_secs_f64(),
            window_start_s: (first as f64 * self.p.interval.as_secs_f64()),
        });
    }

    /// The interval a sample finishing now would be counted in.
    pub fn current_interval(&self) -> u32 {
        self.intervals
    }

    /// The first interval of the result's window: samples counted in it or later make the
    /// result.
    pub fn window_first_interval(&self) -> u32 {
        self.window_first()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn trimmed_mean_drops_only_the_slowest_share() {
        // 20 values: keeping 95 % drops the one largest.
        let mut v: Vec<f64> = (1..=19).map(f64::from).collect();
        v.push(1000.0);
        assert_eq!(trimmed_mean(&v, 0.95), Some(10.0));
        assert_eq!(trimmed_mean(&[7.0], 0.95), Some(7.0));
        assert_eq!(trimmed_mean(&[], 0.95), None);
    }

    #[test]
    fn rpm_is_the_mean_of_foreign_and_loaded_responsiveness() {
        // Foreign: (100 + 100 + 100) / 3 = 100 ms -> 600 RPM; loaded 200 ms -> 300 RPM.
        let s = [
            Sample::Foreign {
                tcp: ms(100),
                tls: Some(ms(100)),
                http: ms(100),
            },
            Sample::Loaded { http: ms(200) },
        ];
        let r = responsiveness(&s, 0.95).unwrap();
        assert!((r.foreign_rpm - 600.0).abs() < 1e-9);
        assert!((r.loaded_rpm - 300.0).abs() < 1e-9);
        assert!((r.rpm - 450.0).abs() < 1e-9);
        // Without TLS the foreign round trip is the mean of two, not three with a zero.
        let s = [
            Sample::Foreign {
                tcp: ms(50),
                tls: None,
                http: ms(150),
            },
            Sample::Loaded { http: ms(100) },
        ];
        assert!((responsiveness(&s, 0.95).unwrap().foreign_rpm - 600.0).abs() < 1e-9);
        assert!(responsiveness(&s[..1], 0.95).is_none());
    }

    #[test]
    fn stability_needs_mad_averages_within_the_tolerance() {
        let mut s = Stability::default();
        for x in [100.0, 101.0, 99.0] {
            s.push(x);
        }
        assert!(!s.is_stable(4, 0.05), "three averages are not MAD");
        s.push(100.0);
        assert!(s.is_stable(4, 0.05));
        s.push(140.0);
        assert!(!s.is_stable(4, 0.05), "a jump of 40 % is not stable");
    }

    /// Drives a test over a simulated path: each flow moves `per_flow` bytes per second up to
    /// `capacity` bytes per second per direction, probes take `rtt(t)` per round trip.
    fn drive(
        p: Params,
        capacity: u64,
        per_flow: u64,
        rtt: impl Fn(f64) -> Duration,
    ) -> (Outcome, Vec<IntervalRecord>) {
        let mut t = RpmTest::new(p, Instant::ZERO);
        let mut flows = [0u64; 2];
        let step = ms(10);
        let mut now = Instant::ZERO;
        let mut pending: Vec<(Instant, Sample)> = vec![];
        for _ in 0..100_000 {
            while let Some(a) = t.poll(now) {
                match a {
                    Action::AddFlow(d) => flows[d.index()] += 1,
                    Action::Probe => {
                        let r = rtt(now.as_secs_f64());
                        pending.push((
                            now + r * 3,
                            Sample::Foreign {
                                tcp: r,
                                tls: Some(r),
                                http: r,
                            },
                        ));
                        pending.push((now + r, Sample::Loaded { http: r }));
                    }
                    Action::Finish => {
                        return (t.outcome().unwrap().clone(), t.intervals().to_vec());
                    }
                }
            }
            now += step;
            for d in Dir::BOTH {
                let rate = (flows[d.index()] * per_flow).min(capacity);
                t.on_bytes(now, d, rate * 10 / 1000);
            }
            let (done, rest): (Vec<_>, Vec<_>) =
                pending.into_iter().partition(|(at, _)| *at <= now);
            pending = rest;
            for (_, s) in done {
                t.on_probe(now, s);
            }
        }
        panic!("the test never finished");
    }

    #[test]
    fn a_steady_path_reaches_high_confidence_with_its_rtt_as_rpm() {
        let (o, rec) = drive(Params::default(), 2_500_000, 10_000_000, |_| ms(100));
        assert_eq!(o.rpm_confidence, Confidence::High, "{rec:#?}");
        assert_eq!(o.goodput_confidence, Confidence::High);
        let r = o.responsiveness.unwrap();
        assert!((r.rpm - 600.0).abs() < 1.0, "{r:?}");
        // Goodput stable once MAD whole-window averages agree (the end of interval 2 MAD - 2,
        // 7 s), RPM after MAD more: 11 s, well before 20 s.
        assert!((o.duration_s - 11.0).abs() < 0.05, "{}", o.duration_s);
        assert!((o.down_bps - 20e6).abs() < 1e5, "{}", o.down_bps);
    }

    #[test]
    fn the_moving_average_counts_intervals_not_yet_run_as_empty() {
        // A path that is full from the first millisecond: the draft's moving average divides
        // by MAD x ID from the start, so it climbs for MAD intervals and saturation cannot be
        // declared before MAD averages over whole windows agree.
        let (_, rec) = drive(Params::default(), 2_500_000, 10_000_000, |_| ms(100));
        let avg: Vec<f64> = rec.iter().map(|r| r.down_avg_bps / 1e6).collect();
        for (i, want) in [5.0, 10.0, 15.0, 20.0, 20.0].iter().enumerate() {
            assert!((avg[i] - want).abs() < 0.1, "interval {i}: {avg:?}");
        }
        let first_stable = rec.iter().position(|r| r.goodput_stable);
        assert_eq!(first_stable, Some(6), "{rec:#?}");
        // The goodput reported beside it is the rate itself, not the climbing average.
        assert!((rec[0].down_bps - 20e6).abs() < 1e5);
    }

    #[test]
    fn goodput_that_keeps_growing_with_each_flow_is_not_saturated_and_ends_at_the_limit() {
        // Each flow adds 1 Mbit/s to an unlimited path, and MNP is out of reach: the moving
        // average never settles.
        let p = Params {
            max_flows: 64,
            ..Params::default()
        };
        let (o, rec) = drive(p, u64::MAX, 125_000, |_| ms(50));
        assert_eq!(o.goodput_confidence, Confidence::Medium, "{rec:#?}");
        assert_eq!(o.rpm_confidence, Confidence::Low);
        assert!((o.duration_s - 20.0).abs() < 0.05);
        assert!(
            o.flows_down >= 20,
            "one flow more each interval: {}",
            o.flows_down
        );
    }

    #[test]
    fn flows_stop_at_mnp_and_goodput_then_settles() {
        let p = Params {
            max_flows: 4,
            ..Params::default()
        };
        let (o, rec) = drive(p, u64::MAX, 125_000, |_| ms(50));
        assert!(rec.iter().all(|r| r.flows_down <= 4));
        assert_eq!(o.flows_down, 4);
        assert_eq!(o.goodput_confidence, Confidence::High);
        assert!((o.down_bps - 4e6).abs() < 1e4, "{}", o.down_bps);
    }

    #[test]
    fn an_rpm_that_keeps_moving_has_medium_confidence() {
        // The RTT doubles every 3 s: the moving averages of RPM never settle within 5 %.
        let (o, _) = drive(Params::default(), 2_500_000, 10_000_000, |t| {
            ms(50 << ((t / 3.0) as u32).min(6))
        });
        assert_eq!(o.rpm_confidence, Confidence::Medium);
    }

    #[test]
    fn fixed_flows_open_at_once_and_never_grow() {
        let p = Params {
            fixed_flows: Some(4),
            ..Params::default()
        };
        let (o, rec) = drive(p, 2_500_000, 10_000_000, |_| ms(100));
        assert_eq!((o.flows_down, o.flows_up), (4, 4));
        assert!(rec.iter().all(|r| r.flows_down == 4));
    }

    #[test]
    fn a_test_of_one_direction_loads_only_that_way_and_settles_on_its_goodput() {
        for (load, dir) in [(Load::Down, Dir::Down), (Load::Up, Dir::Up)] {
            let p = Params {
                load,
                ..Params::default()
            };
            let (o, rec) = drive(p, 2_500_000, 10_000_000, |_| ms(100));
            let (loaded, idle) = match dir {
                Dir::Down => ((o.flows_down, o.down_bps), (o.flows_up, o.up_bps)),
                Dir::Up => ((o.flows_up, o.up_bps), (o.flows_down, o.down_bps)),
            };
            assert_eq!(idle, (0, 0.0), "{load:?}: {rec:#?}");
            assert!(
                loaded.0 >= 1 && (loaded.1 - 20e6).abs() < 1e5,
                "{load:?}: {o:?}"
            );
            // The idle direction's goodput never settles; it must not hold the test back.
            assert_eq!(o.goodput_confidence, Confidence::High, "{load:?}");
            assert_eq!(o.rpm_confidence, Confidence::High, "{load:?}");
            assert!(
                (o.duration_s - 11.0).abs() < 0.05,
                "{load:?}: {}",
                o.duration_s
            );
        }
    }

    #[test]
    fn probes_are_paced_to_a_share_of_the_goodput() {
        let mut t = RpmTest::new(Params::default(), Instant::ZERO);
        while t.poll(Instant::ZERO).is_some() {}
        // 20 Mbit/s down and nothing up during the first second.
        t.on_bytes(Instant::ZERO, Dir::Down, 2_500_000);
        let mut probes = 0;
        let mut now = Instant::from_millis(1000);
        while now < Instant::from_millis(2000) {
            while let Some(a) = t.poll(now) {
                if a == Action::Probe {
                    probes += 1;
                }
            }
            now += ms(1);
        }
        // 5 % of 2.5 MB/s over 6000 bytes a pair: 20.8 pairs per second.
        assert!((20..=22).contains(&probes), "{probes}");
    }
}
