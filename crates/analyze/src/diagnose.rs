//! Diagnoses: naming what held a connection back, with a time span and the evidence.
//!
//! [`crate::tcp`] records compact evidence while it rebuilds a connection ([`Evidence`]:
//! a few events per stall, aggregate counters, RTT minima in time bins whose width doubles
//! to stay under a fixed count); [`diagnose`] turns it into [`Diagnosis`] values once the
//! connection's minimum RTT is known. [`bleaching`] compares one connection seen at two
//! vantage points. Thresholds are constants here, each with its reason; the definitions are
//! written out for users in `docs/analyze.md`. Nothing here reads packets.

use wire::time::duration_nanos;
use wire::{Duration, Instant};

use crate::model::*;

/// Most events kept per kind and direction; counts beyond it are still exact.
const MAX_EVENTS: usize = 4096;
/// Most diagnoses of one kind per direction listed separately (the rest are summed up in the
/// last one).
const MAX_LISTED: usize = 10;
/// RTT bins kept per direction before their width doubles.
const MAX_RTT_BINS: usize = 2048;

/// A round trip this short is "next to" an end for every sender-side rule: their
/// thresholds (waits of 1 ms, ACKs held 10 ms) are at least this long.
pub(crate) const NEAR: Duration = Duration::from_millis(1);

/// How soon after the ACK a Nagle-held segment leaves its sender (the kernel sends it from
/// the ACK's softirq: microseconds; this leaves room for a loaded host).
pub(crate) const NAGLE_SLACK: Duration = Duration::from_micros(500);

/// Least time Nagle holds must cost in all before `nagle_delayed_ack` is named: one delayed-ACK
/// timeout of Linux's (`TCP_DELACK_MIN`, 40 ms), the wait a single hold costs when the peer
/// defers its ACK. The captures of scripts/corpus lose 1.5 s and more to Nagle (some 40 holds
/// of ~40 ms each); a loaded host whose sender once held three bulk writes for about a
/// millisecond each lost 4 ms, which is not what costs anyone time.
const NAGLE_MIN_TOTAL: Duration = Duration::from_millis(40);

/// A one-way delay that never rose this far above its minimum shows no queue between the
/// sender and the capture point (TSvals tick in milliseconds, so less is not measurable).
const OWD_FLAT: Duration = Duration::from_millis(5);

/// A sub-MSS segment sent right after the ACK of the previous one.
#[derive(Copy, Clone, Debug)]
pub(crate) struct NagleEvent {
    pub prev_time: Instant,
    pub prev_len: u32,
    /// From the ACK to this segment, at the capture point.
    pub after_ack: Duration,
    pub ack_time: Instant,
    pub time: Instant,
    pub len: u32,
    /// The peer's receive window when this segment left, bytes.
    pub peer_window: u64,
}

/// The receive window was full from `since`; the last segment went at `last_send`; an ACK
/// reopened it at `reopen`.
#[derive(Copy, Clone, Debug)]
pub(crate) struct Stall {
    pub since: Instant,
    pub last_send: Instant,
    pub reopen: Instant,
    pub window: u64,
    /// The ACK that reopened the window also acknowledged new data: the receiver had taken
    /// the data and only its ACK was late. A window update after an earlier ACK of the same
    /// data is the receiving application reading late.
    pub reopen_acked: bool,
}

/// A retransmission after a long silence.
#[derive(Copy, Clone, Debug)]
pub(crate) struct RtoEvent {
    pub last_send: Instant,
    pub time: Instant,
    pub seq: u64,
}

/// One loss-recovery episode.
#[derive(Copy, Clone, Debug)]
pub(crate) struct Recovery {
    pub start: Instant,
    pub end: Instant,
    pub packets: u64,
    pub bytes: u64,
    /// An ACK passed the recovery point; false when the capture ended first.
    pub recovered: bool,
}

/// Smallest and largest RTT (or one-way delay) per time bin, in integer nanoseconds: a
/// sample is added for most data segments, and a `Duration` costs a division to build.
#[derive(Clone, Debug, Default)]
pub(crate) struct RttBins {
    t0: Option<Instant>,
    width_ns: u64,
    /// (bin index, smallest, largest sample in ns, samples)
    bins: Vec<(u64, u64, u64, u32)>,
    /// Smallest sample so far, ns.
    min_ns: Option<u64>,
    /// The last bin's span, `[lo, hi)` nanoseconds after `t0`: a sample inside it needs no
    /// division to find its bin (most samples, one bin holding many).
    last_lo_ns: u64,
    last_hi_ns: u64,
}

impl RttBins {
    #[inline]
    pub fn add(&mut self, t: Instant, rtt: Duration) {
        self.add_ns(t, duration_nanos(rtt));
    }

    /// [`RttBins::add`] of a sample given in nanoseconds.
    #[inline]
    pub fn add_ns(&mut self, t: Instant, rtt_ns: u64) {
        if let (Some(t0), Some(b)) = (self.t0, self.bins.last_mut()) {
            let rel_ns = t.as_nanos().saturating_sub(t0.as_nanos());
            if rel_ns >= self.last_lo_ns && rel_ns < self.last_hi_ns {
                b.3 += 1;
                b.2 = b.2.max(rtt_ns);
                if rtt_ns < b.1 {
                    b.1 = rtt_ns;
                    // The smallest so far is never above the last bin's smallest.
                    self.min_ns = Some(self.min_ns.map_or(rtt_ns, |m| m.min(rtt_ns)));
                }
                return;
            }
        }
        self.add_to_new_bin(t, rtt_ns);
    }

    /// [`RttBins::add_ns`] of a sample outside the last bin (or the first sample).
    #[cold]
    #[inline(never)]
    fn add_to_new_bin(&mut self, t: Instant, rtt_ns: u64) {
        let t0 = *self.t0.get_or_insert(t);
        if self.width_ns == 0 {
            self.width_ns = 10_000_000;
        }
        self.min_ns = Some(self.min_ns.map_or(rtt_ns, |m| m.min(rtt_ns)));
        let rel_ns = t.as_nanos().saturating_sub(t0.as_nanos());
        let idx = rel_ns / self.width_ns;
        match self.bins.last_mut() {
            Some(b) if b.0 == idx => {
                b.1 = b.1.min(rtt_ns);
                b.2 = b.2.max(rtt_ns);
                b.3 += 1;
            }
            _ => self.bins.push((idx, rtt_ns, rtt_ns, 1)),
        }
        if self.bins.len() > MAX_RTT_BINS {
            self.width_ns *= 2;
            let mut merged: Vec<(u64, u64, u64, u32)> = Vec::new();
            for &(i, lo, hi, n) in &self.bins {
                match merged.last_mut() {
                    Some(m) if m.0 == i / 2 => {
                        m.1 = m.1.min(lo);
                        m.2 = m.2.max(hi);
                        m.3 += n;
                    }
                    _ => merged.push((i / 2, lo, hi, n)),
                }
            }
            self.bins = merged;
        }
        let last = self.bins.last().map_or(0, |b| b.0);
        self.last_lo_ns = last.saturating_mul(self.width_ns);
        self.last_hi_ns = self.last_lo_ns.saturating_add(self.width_ns);
    }

    /// Smallest RTT so far (zero before the first sample).
    pub fn min(&self) -> Duration {
        Duration::from_nanos(self.min_ns.unwrap_or(0))
    }

    /// Each bin as (index, smallest, largest sample).
    fn spans(&self) -> impl Iterator<Item = (u64, Duration, Duration)> + '_ {
        self.bins
            .iter()
            .map(|b| (b.0, Duration::from_nanos(b.1), Duration::from_nanos(b.2)))
    }
}

/// What [`crate::tcp`] records about one direction's data for the diagnoses.
#[derive(Clone, Debug, Default)]
pub(crate) struct Evidence {
    /// The smallest RTT sample (only the minimum of all of them is ever read).
    pub rtt_min: Option<Duration>,
    /// RTT samples taken while more data was in flight behind the sampled segment: the only
    /// ones that can show a queue (others may include the receiver's ACK delay or its
    /// application's think time).
    pub queue_rtt: RttBins,
    pub nagle: Vec<NagleEvent>,
    pub stalls: Vec<Stall>,
    pub window_full_ns: u64,
    pub window_full_count: u64,
    pub app_idle_ns: u64,
    pub app_gaps: u64,
    pub app_first: Option<Instant>,
    pub app_last: Instant,
    pub rto: Vec<RtoEvent>,
    pub recoveries: Vec<Recovery>,
    /// One-way delay of the data from the capture's clock against the sender's TCP
    /// timestamp clock (RFC 7323 §3), offset by [`OWD_OFFSET`] so that it is never negative;
    /// only its changes mean anything.
    pub owd: RttBins,
    /// First and last (capture time, TSval) of the data, to check the TSval clock's rate.
    pub ts_first: Option<(Instant, u32)>,
    pub ts_last: Option<(Instant, u32)>,
    /// The data's flights (what the sender sent in one round trip), for
    /// `slow_start_after_idle`.
    pub flights: Flights,
}

/// Linux's smallest retransmission timeout, `TCP_RTO_MIN` (RFC 6298 §2.4 asks for 1 s): a
/// sender idle for less than one RTT plus this has not been idle for an RTO.
const RTO_MIN: Duration = Duration::from_millis(200);

/// The first flight after an idle spell, cut short: the sender went on one round trip later
/// though the peer had sent nothing meanwhile.
#[derive(Copy, Clone, Debug)]
pub(crate) struct IdleRestart {
    /// The last data before the idle spell.
    pub idle_from: Instant,
    /// The flight: its first segment, its bytes, and when the next flight began.
    pub start: Instant,
    pub bytes: u64,
    pub next: Instant,
    /// The largest flight before the idle spell, bytes.
    pub largest_before: u64,
    /// The largest receive window the peer advertised during the flight, bytes.
    pub peer_window: u64,
}

/// One direction's data cut into flights: data separated by gaps of at least half the path's
/// round trip (from the handshake), which is what a sender limited by its window sends per
/// round trip, seen the same at the sender, on the path and at the receiver.
#[derive(Clone, Debug, Default)]
pub(crate) struct Flights {
    /// The current flight's first and last segment and its bytes.
    start: Option<Instant>,
    last: Option<Instant>,
    bytes: u64,
    largest: u64,
    /// The current flight began after an idle spell: (the last data before it, the largest
    /// flight before it).
    after_idle: Option<(Instant, u64)>,
    /// The largest receive window the peer advertised during the current flight.
    window: u64,
    /// How many zero windows the peer had advertised at the last data.
    zero_windows: u64,
    pub restarts: Vec<IdleRestart>,
}

/// What the sender knew of its peer when it sent a segment.
#[derive(Copy, Clone, Debug)]
pub(crate) struct PeerView {
    /// When the peer last sent data (a flight after it answers it).
    pub last_data: Option<Instant>,
    /// The receive window it last advertised, bytes.
    pub window: u64,
    /// How many zero windows it has advertised.
    pub zero_windows: u64,
}

impl Flights {
    /// New data of `len` bytes at `now`; `path_rtt_ns` from the handshake (none: no flights).
    /// In integer nanoseconds, and inlined: this runs on every new segment.
    #[inline(always)]
    pub fn data(&mut self, now: Instant, len: u64, path_rtt_ns: Option<u64>, peer: PeerView) {
        let Some(rtt) = path_rtt_ns.filter(|&r| r != 0) else {
            return;
        };
        if let Some(last) = self.last {
            let gap = now.as_nanos().saturating_sub(last.as_nanos());
            if gap >= rtt / 2 {
                self.end_flight(now, last, gap, rtt, &peer);
            }
        }
        self.window = self.window.max(peer.window);
        self.zero_windows = peer.zero_windows;
        self.start.get_or_insert(now);
        self.last = Some(now);
        self.bytes += len;
    }

    /// The flight that ended at `last` is over: a gap of `gap` ns (at least half the path's
    /// round trip, `rtt` ns) came before the data at `now`.
    #[cold]
    #[inline(never)]
    fn end_flight(&mut self, now: Instant, last: Instant, gap: u64, rtt: u64, peer: &PeerView) {
        // The flight after an idle spell was cut short when the next one follows a round trip
        // later with nothing from the peer in between (not a reply).
        if let (Some((idle_from, largest_before)), Some(start)) =
            (self.after_idle.take(), self.start)
        {
            let answered = peer.last_data.is_some_and(|t| t > last);
            if !answered && gap < rtt.saturating_mul(2) && self.restarts.len() < MAX_EVENTS {
                self.restarts.push(IdleRestart {
                    idle_from,
                    start,
                    bytes: self.bytes,
                    next: now,
                    largest_before,
                    peer_window: self.window,
                });
            }
        }
        self.largest = self.largest.max(self.bytes);
        // A silence the peer's zero window imposed is a stall, not idle.
        if gap >= rtt.saturating_add(duration_nanos(RTO_MIN))
            && peer.zero_windows == self.zero_windows
        {
            self.after_idle = Some((last, self.largest));
        }
        self.start = None;
        self.bytes = 0;
        self.window = 0;
    }
}

/// Keeps one-way delays positive: the first packet's delay is taken as this much, and later
/// ones move around it by at most the TSval range we accept (well under this).
const OWD_OFFSET: Duration = Duration::from_secs(1000);

/// The TSval clock we can read: 1 kHz (Linux and the BSDs, 1 ms ticks). Accepted when the
/// rate measured over the transfer is within 10 % of it (a queue that grows by a few hundred
/// ms over seconds skews the estimate by a few per cent, a different clock by 10x or more).
const TS_HZ: f64 = 1000.0;

impl Evidence {
    pub fn window_full(
        &mut self,
        since: Instant,
        last_send: Instant,
        reopen: Instant,
        window: u64,
        reopen_acked: bool,
    ) {
        self.window_full_ns += (reopen - since).as_nanos() as u64;
        self.window_full_count += 1;
        if self.stalls.len() < MAX_EVENTS {
            self.stalls.push(Stall {
                since,
                last_send,
                reopen,
                window,
                reopen_acked,
            });
        }
    }

    /// A data segment seen at `t` carrying `tsval`: its one-way delay, up to a constant, is
    /// `(t - t_first) - (tsval - tsval_first) / TS_HZ`. Inlined: this runs on every data
    /// segment with timestamps.
    #[inline(always)]
    pub fn one_way_delay(&mut self, t: Instant, tsval: u32) {
        let (t0, ts0) = *self.ts_first.get_or_insert((t, tsval));
        self.ts_last = Some((t, tsval));
        // A TSval older than the first (a retransmission carrying an old one is not allowed,
        // RFC 7323 §5.5, but clocks do odd things) or a huge step is not a delay sample.
        let ticks = tsval.wrapping_sub(ts0) as i32;
        if ticks < 0 {
            return;
        }
        // In i64: `ticks` is below 2^31, so `ts_ns` below 2^52; a capture time so far past
        // the first that `since_ns` leaves i64 would be far outside the accepted range anyway.
        let since_ns = t.as_nanos().saturating_sub(t0.as_nanos());
        if since_ns >= 1 << 62 {
            return;
        }
        const TICK_NS: i64 = (1e9 / TS_HZ) as i64;
        const OFFSET_NS: i64 = OWD_OFFSET.as_nanos() as i64;
        let owd_ns = OFFSET_NS + since_ns as i64 - i64::from(ticks) * TICK_NS;
        if owd_ns > 0 && owd_ns < 2 * OFFSET_NS {
            self.owd.add_ns(t, owd_ns as u64);
        }
    }

    /// Whether the sender's TSval clock ran at [`TS_HZ`] over at least half a second of data.
    fn ts_clock_usable(&self) -> bool {
        let (Some((t0, ts0)), Some((t1, ts1))) = (self.ts_first, self.ts_last) else {
            return false;
        };
        let span_s = (t1 - t0).as_secs_f64();
        if span_s < 0.5 {
            return false;
        }
        let hz = f64::from(ts1.wrapping_sub(ts0)) / span_s;
        (hz / TS_HZ - 1.0).abs() <= 0.1
    }

    /// Whether the data's one-way delay stayed flat: no bin's smallest one-way delay rose
    /// [`OWD_FLAT`] above the minimum (so no queue stood between the sender and here).
    fn owd_flat(&self) -> bool {
        let base = self.owd.min();
        self.ts_clock_usable()
            && self
                .owd
                .spans()
                .all(|(_, lo, _)| lo.saturating_sub(base) < OWD_FLAT)
    }

    pub fn app_idle(&mut self, from: Instant, to: Instant) {
        self.app_idle_ns += (to - from).as_nanos() as u64;
        self.app_gaps += 1;
        self.app_first.get_or_insert(from);
        self.app_last = to;
    }
}

/// Segments any window keeps queued at its bottleneck: the one being serialized and a few
/// behind it. Below this many a "standing queue" is the line's slowness, not a buffer.
const FEW_SEGMENTS: f64 = 4.0;

/// How long [`FEW_SEGMENTS`] full segments take at the direction's rate. On a 400 kbit/s line
/// that is about 120 ms, tens of times the few ms it is at 10 Mbit/s: an RTT that much above
/// its minimum is those segments, and the delay a user feels on such a line lies elsewhere
/// (for instance in the sender's own socket buffer, which no capture shows).
fn few_segments_time(throughput_bps: f64, mss: Option<u16>) -> Duration {
    if throughput_bps.is_nan() || throughput_bps <= 0.0 {
        return Duration::ZERO;
    }
    let bits = FEW_SEGMENTS * f64::from(mss.unwrap_or(1460)) * 8.0;
    Duration::from_nanos((bits / throughput_bps * 1e9) as u64)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// The diagnoses that need the sender's view of bytes in flight and ACK arrival times.
const SENDER_SIDE: &[DiagnosisKind] = &[
    DiagnosisKind::NagleDelayedAck,
    DiagnosisKind::DelayedAckPacing,
    DiagnosisKind::RwndLimited,
    DiagnosisKind::AppLimited,
];

/// All diagnoses of one connection, ordered by start time, and per direction (`a2b`, `b2a`)
/// the kinds that could not be judged from the capture point.
pub(crate) fn diagnose(
    c: &Connection,
    ev: [&Evidence; 2],
    last_syn: Option<Instant>,
    last_synack: Option<Instant>,
) -> (Vec<Diagnosis>, [Vec<DiagnosisKind>; 2]) {
    let mut out = Vec::new();
    let mut not_judged: [Vec<DiagnosisKind>; 2] = Default::default();
    let dur_ns = (c.last_time - c.first_time).as_nanos() as f64;
    for (i, dir) in [Dir::AtoB, Dir::BtoA].into_iter().enumerate() {
        let d = c.dir(dir);
        let e = ev[i];
        let rtt_min = e.rtt_min.unwrap_or(Duration::ZERO);
        let point = d.capture_point;
        // The round trip between the capture point and this direction's sender, from the
        // handshake: the SYN-ACK -> ACK time for `a`'s data, SYN -> SYN-ACK for `b`'s.
        let to_sender = match dir {
            Dir::AtoB => c.handshake.synack_rtt,
            Dir::BtoA => c.handshake.syn_rtt,
        };
        // Sender-side rules read bytes in flight and ACK arrival times as the sender saw
        // them. They hold at the sender; without a handshake where nothing better is known
        // (as tcptrace assumes); and anywhere within a millisecond of the sender, when the
        // data's one-way delay shows no queue between it and the capture point either.
        let near_sender = match point {
            CapturePoint::Sender => true,
            CapturePoint::Unknown if d.vantage_basis == VantageBasis::None => true,
            _ => to_sender.is_some_and(|t| t <= NEAR) && e.owd_flat(),
        };
        // Only directions that carried data have anything to judge.
        if d.stats.data_packets > 0 && !near_sender {
            not_judged[i].extend_from_slice(SENDER_SIDE);
        }
        let judged = |k: DiagnosisKind| near_sender || !SENDER_SIDE.contains(&k);
        if judged(DiagnosisKind::NagleDelayedAck) {
            let slack = if point == CapturePoint::Sender {
                Duration::ZERO
            } else {
                to_sender.unwrap_or(Duration::ZERO)
            };
            nagle(&mut out, dir, d, c.dir(dir.other()).options.mss, e, slack);
        }
        if judged(DiagnosisKind::DelayedAckPacing) {
            pacing(&mut out, dir, e, rtt_min);
        }
        // bufferbloat, only from evidence of a queue: RTTs that grow while data is in flight
        // (the queue beyond the capture point), or one-way delay that grows (the queue before
        // it). At the sender only the first exists, at the receiver only the second; in
        // between, or when unsure, both are looked at and the larger finding kept.
        let path_rtt = c
            .handshake
            .syn_rtt
            .zip(c.handshake.synack_rtt)
            .map_or(Duration::ZERO, |(x, y)| x + y);
        let mut by_rtt = Vec::new();
        if point != CapturePoint::Receiver {
            // Less than a few segments' time above the minimum is the line's slowness, not a
            // queue (see `few_segments_time`).
            let few = few_segments_time(d.stats.throughput_bps, c.dir(dir.other()).options.mss);
            let q = &e.queue_rtt;
            bufferbloat(&mut by_rtt, dir, q, rtt_min, rtt_min.max(few), Basis::Rtt);
        }
        let mut by_owd = Vec::new();
        if point != CapturePoint::Sender {
            if e.ts_clock_usable() {
                let base = e.owd.min();
                bufferbloat(&mut by_owd, dir, &e.owd, base, path_rtt, Basis::OneWay);
            } else if point == CapturePoint::Receiver && d.stats.data_packets > 0 {
                not_judged[i].push(DiagnosisKind::Bufferbloat);
            }
        }
        let worst = |v: &[Diagnosis]| v.iter().map(|d| d.delay_ms).fold(0.0, f64::max);
        if worst(&by_owd) > worst(&by_rtt) {
            out.extend(by_owd);
        } else {
            out.extend(by_rtt);
        }
        // rwnd_limited: the window was the limit for a fifth of the connection or more.
        if judged(DiagnosisKind::RwndLimited)
            && e.window_full_count >= 2
            && dur_ns > 0.0
            && e.window_full_ns as f64 >= 0.2 * dur_ns
        {
            let (first, last) = (e.stalls.first(), e.stalls.last());
            if let (Some(f), Some(l)) = (first, last) {
                let wmax = e.stalls.iter().map(|s| s.window).max().unwrap_or(0);
                let frac = e.window_full_ns as f64 / dur_ns * 100.0;
                out.push(Diagnosis {
                    kind: DiagnosisKind::RwndLimited,
                    frames: Frames::default(),
                    dir: Some(dir),
                    start: f.since,
                    end: l.reopen,
                    delay_ms: e.window_full_ns as f64 / 1e6,
                    summary: format!(
                        "the receiver's window (at most {wmax} bytes) was full {} times, for {:.0} ms in all ({frac:.0}% of the connection); the sender could not send more",
                        e.window_full_count,
                        e.window_full_ns as f64 / 1e6
                    ),
                });
            }
        }
        // app_limited: nothing in flight and nothing sent for a fifth of the connection.
        if judged(DiagnosisKind::AppLimited)
            && e.app_gaps >= 1
            && dur_ns > 0.0
            && e.app_idle_ns as f64 >= 0.2 * dur_ns
        {
            if let Some(first) = e.app_first {
                out.push(Diagnosis {
                    kind: DiagnosisKind::AppLimited,
                    frames: Frames::default(),
                    dir: Some(dir),
                    start: first,
                    end: e.app_last,
                    delay_ms: e.app_idle_ns as f64 / 1e6,
                    summary: format!(
                        "the sender had nothing in flight and sent nothing {} times, idle {:.0} ms in all ({:.0}% of the connection): the application did not supply data",
                        e.app_gaps,
                        e.app_idle_ns as f64 / 1e6,
                        e.app_idle_ns as f64 / dur_ns * 100.0
                    ),
                });
            }
        }
        slow_start_after_idle(&mut out, dir, e);
        // loss_burst: three or more segments retransmitted in one recovery episode.
        let bursts: Vec<&Recovery> = e.recoveries.iter().filter(|r| r.packets >= 3).collect();
        for (k, r) in bursts.iter().enumerate() {
            if k == MAX_LISTED {
                let rest = bursts.len() - MAX_LISTED;
                let pk: u64 = bursts[MAX_LISTED..].iter().map(|r| r.packets).sum();
                out.push(Diagnosis {
                    kind: DiagnosisKind::LossBurst,
                    frames: Frames::default(),
                    dir: Some(dir),
                    start: r.start,
                    end: bursts[bursts.len() - 1].end,
                    delay_ms: bursts[MAX_LISTED..]
                        .iter()
                        .map(|r| ms(r.end - r.start))
                        .sum(),
                    summary: format!("{rest} more loss bursts, {pk} segments retransmitted"),
                });
                break;
            }
            out.push(Diagnosis {
                kind: DiagnosisKind::LossBurst,
                frames: Frames::default(),
                dir: Some(dir),
                start: r.start,
                end: r.end,
                delay_ms: ms(r.end - r.start),
                summary: if r.recovered {
                    format!(
                        "{} segments ({} bytes) were retransmitted in one loss episode; recovery took {:.1} ms",
                        r.packets,
                        r.bytes,
                        ms(r.end - r.start)
                    )
                } else {
                    format!(
                        "{} segments ({} bytes) were retransmitted in one loss episode; no ACK covered them in the {:.1} ms until the capture ended, so no recovery was seen",
                        r.packets,
                        r.bytes,
                        ms(r.end - r.start)
                    )
                },
            });
        }
        for (k, r) in e.rto.iter().enumerate() {
            if k == MAX_LISTED {
                let rest = &e.rto[MAX_LISTED..];
                out.push(Diagnosis {
                    kind: DiagnosisKind::RtoStall,
                    frames: Frames::default(),
                    dir: Some(dir),
                    start: r.last_send,
                    end: rest[rest.len() - 1].time,
                    delay_ms: rest.iter().map(|r| ms(r.time - r.last_send)).sum(),
                    summary: format!("{} more retransmission timeouts", rest.len()),
                });
                break;
            }
            out.push(Diagnosis {
                kind: DiagnosisKind::RtoStall,
                frames: Frames::default(),
                dir: Some(dir),
                start: r.last_send,
                end: r.time,
                delay_ms: ms(r.time - r.last_send),
                summary: format!(
                    "nothing was sent for {:.0} ms with data outstanding, then byte {} was retransmitted: a retransmission timeout (minimum RTT {:.1} ms)",
                    ms(r.time - r.last_send),
                    r.seq,
                    ms(rtt_min)
                ),
            });
        }
    }
    // syn_retransmit: the SYN (or SYN-ACK) went more than once.
    // Only a SYN that was answered in the end: an unanswered one is the `syn_timeout` story.
    if c.handshake.syn_count >= 2 && c.handshake.synack_count > 0 {
        if let (Some(f), Some(l)) = (c.handshake.syn_time, last_syn) {
            out.push(Diagnosis {
                kind: DiagnosisKind::SynRetransmit,
                frames: Frames::default(),
                dir: Some(Dir::AtoB),
                start: f,
                end: l,
                delay_ms: ms(l - f),
                summary: format!(
                    "the SYN was sent {} times; connecting took {:.0} ms longer than it had to",
                    c.handshake.syn_count,
                    ms(l - f)
                ),
            });
        }
    }
    if c.handshake.synack_count >= 2 {
        if let (Some(f), Some(l)) = (c.handshake.synack_time, last_synack) {
            out.push(Diagnosis {
                kind: DiagnosisKind::SynRetransmit,
                frames: Frames::default(),
                dir: Some(Dir::BtoA),
                start: f,
                end: l,
                delay_ms: ms(l - f),
                summary: format!(
                    "the SYN-ACK was sent {} times, {:.0} ms between the first and the last",
                    c.handshake.synack_count,
                    ms(l - f)
                ),
            });
        }
    }
    // ecn_unused: negotiated, never marked.
    let (x, y) = (&c.a2b.stats, &c.b2a.stats);
    if c.handshake.ecn.negotiated() && x.ce + y.ce == 0 && x.ece + y.ece == 0 {
        let rexmit = x.retransmitted_packets + y.retransmitted_packets;
        let ect = x.ect0 + x.ect1 + y.ect0 + y.ect1;
        out.push(Diagnosis {
            kind: DiagnosisKind::EcnUnused,
            frames: Frames::default(),
            dir: None,
            start: c.first_time,
            end: c.last_time,
            delay_ms: 0.0,
            summary: format!(
                "ECN was negotiated ({}) and {ect} packets were ECN-capable, but none was CE-marked{}",
                if c.handshake.ecn == EcnSetup::AccEcn { "AccECN" } else { "classic" },
                if rexmit > 0 {
                    format!("; {rexmit} retransmissions show the path dropped instead of marking")
                } else {
                    String::new()
                }
            ),
        });
    }
    out.sort_by(|a, b| a.start.cmp(&b.start).then(a.kind.cmp(&b.kind)));
    (out, not_judged)
}

/// slow_start_after_idle: after an idle spell longer than an RTO, the sender's first flight
/// was at most half of its largest flight before the spell and of the peer's receive window
/// (so not a reader that had stopped, whose window reopens small), and it went on sending one
/// round trip later with nothing from the peer in between: its window had been cut back while
/// idle
/// (RFC 5681 §4.1, restart window; RFC 2861 §3; Linux `tcp_slow_start_after_idle=1`). Each
/// costs at least the round trip it waited for ACKs.
fn slow_start_after_idle(out: &mut Vec<Diagnosis>, dir: Dir, e: &Evidence) {
    let cut: Vec<&IdleRestart> = e
        .flights
        .restarts
        .iter()
        .filter(|r| r.bytes * 2 <= r.largest_before && r.bytes * 2 <= r.peer_window)
        .collect();
    let (Some(f), Some(l)) = (cut.first(), cut.last()) else {
        return;
    };
    let waits: Vec<f64> = cut.iter().map(|r| ms(r.next - r.start)).collect();
    let total: f64 = waits.iter().sum();
    let idle_ms = median(cut.iter().map(|r| ms(r.start - r.idle_from)).collect());
    let flight = cut.iter().map(|r| r.bytes).max().unwrap_or(0);
    let before = cut.iter().map(|r| r.largest_before).max().unwrap_or(0);
    out.push(Diagnosis {
        kind: DiagnosisKind::SlowStartAfterIdle,
        frames: Frames::default(),
        dir: Some(dir),
        start: f.idle_from,
        end: l.next,
        delay_ms: total,
        summary: format!(
            "{} times after an idle spell (median {idle_ms:.0} ms) the sender's first flight was at most {flight} bytes and it went on a round trip later with nothing new from the peer, though before the spell it had sent up to {before} bytes in one flight: its congestion window restarted after idle (RFC 5681 §4.1; Linux's tcp_slow_start_after_idle=1); at least {total:.0} ms of round trips lost",
            cut.len(),
        ),
    });
}

/// nagle_delayed_ack: sub-MSS segments that each left only when the ACK of the previous
/// sub-MSS segment came back (RFC 896; RFC 9293 §3.7.4).
///
/// `slack` is the round trip between the capture point and the sender: the held segment is
/// seen that much later after the ACK than the sender sent it.
fn nagle(
    out: &mut Vec<Diagnosis>,
    dir: Dir,
    d: &Direction,
    peer_mss: Option<u16>,
    e: &Evidence,
    slack: Duration,
) {
    // "Full-sized" is the peer's MSS; the largest segment seen stands in when it is close
    // (options such as timestamps take 12 bytes of it) or when the MSS is unknown.
    let max_seg = d.stats.max_segment_bytes;
    let full = match peer_mss.map(u64::from) {
        Some(m) if max_seg + 40 >= m => max_seg.min(m),
        Some(m) => m,
        None => max_seg + 1,
    };
    let evs: Vec<&NagleEvent> = e
        .nagle
        .iter()
        .filter(|n| u64::from(n.prev_len) < full && u64::from(n.len) < full)
        .filter(|n| {
            let gap = n.time - n.prev_time;
            n.after_ack <= (gap / 10).max(NAGLE_SLACK) + slack
        })
        // A window with no room for a full segment makes small segments without Nagle.
        .filter(|n| n.peer_window >= full + u64::from(n.len))
        .collect();
    let (Some(f), Some(l)) = (evs.first(), evs.last()) else {
        return;
    };
    let waits: Vec<f64> = evs.iter().map(|n| ms(n.time - n.prev_time)).collect();
    let total: f64 = waits.iter().sum();
    if total < ms(NAGLE_MIN_TOTAL) {
        return;
    }
    out.push(Diagnosis {
        kind: DiagnosisKind::NagleDelayedAck,
        frames: Frames::default(),
        dir: Some(dir),
        start: f.prev_time,
        end: l.time,
        delay_ms: total,
        summary: format!(
            "{} times a small segment ({} bytes, after one of {} bytes) was held until the previous one was ACKed, a median {:.1} ms later: Nagle's algorithm waiting on the peer's (delayed) ACK; {:.0} ms lost in all",
            evs.len(),
            f.len,
            f.prev_len,
            median(waits),
            total
        ),
    });
    let _ = f.ack_time;
}

/// delayed_ack_pacing: the window was full and the sender idle until an ACK of new data that
/// came much later than one RTT: the receiver's delayed-ACK timer set the pace (RFC 9293
/// §3.8.6.3). A stall ended by a bare window update, the data acknowledged before, is the
/// receiving application reading late, not a deferred ACK: Linux acknowledges on its timer
/// with the data still unread (a small window), then opens the window when the application
/// reads.
fn pacing(out: &mut Vec<Diagnosis>, dir: Dir, e: &Evidence, rtt_min: Duration) {
    // An ACK held at least 10 ms (and half an RTT) beyond the RTT is a timer, not the path.
    let extra_min = Duration::from_millis(10).max(rtt_min / 2);
    let held: Vec<&Stall> = e
        .stalls
        .iter()
        .filter(|s| s.reopen_acked && (s.reopen - s.last_send).saturating_sub(rtt_min) >= extra_min)
        .collect();
    if held.len() < 3 {
        return;
    }
    // A timer sets the pace only when it holds most rounds of the stretch: a few rounds
    // among thousands held by a receiver that was not scheduled are that receiver's delay.
    let (from, to) = (held[0].since, held[held.len() - 1].reopen);
    let rounds = e
        .stalls
        .iter()
        .filter(|s| s.since >= from && s.reopen <= to)
        .count();
    if held.len() * 2 < rounds {
        return;
    }
    let idle: Vec<f64> = held.iter().map(|s| ms(s.reopen - s.last_send)).collect();
    let lost: f64 = held
        .iter()
        .map(|s| ms((s.reopen - s.last_send).saturating_sub(rtt_min)))
        .sum();
    let period: Vec<f64> = held
        .windows(2)
        .map(|w| ms(w[1].reopen - w[0].reopen))
        .collect();
    let wmax = held.iter().map(|s| s.window).max().unwrap_or(0);
    out.push(Diagnosis {
        kind: DiagnosisKind::DelayedAckPacing,
        frames: Frames::default(),
        dir: Some(dir),
        start: held[0].since,
        end: held[held.len() - 1].reopen,
        delay_ms: lost,
        summary: format!(
            "{} times the receive window ({wmax} bytes) filled and the sender sat idle a median {:.1} ms until the next ACK (minimum RTT {:.1} ms); ACKs came every {:.1} ms, paced by the receiver's delayed-ACK timer; {:.0} ms lost in all",
            held.len(),
            median(idle),
            ms(rtt_min),
            median(period),
            lost
        ),
    });
}

/// What a bufferbloat finding was measured on.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Basis {
    /// RTT samples (at the sender, or beyond a capture point in the middle).
    Rtt,
    /// One-way delay from the sender's TCP timestamps (at the receiver).
    OneWay,
}

/// bufferbloat: delay far above its minimum (by at least max(`path_rtt`, 5 ms)) in every bin
/// for at least 500 ms and 4 path RTTs; the standing queue is the median of the bins'
/// minimum excess over that span. `base` is the delay with an empty queue: the minimum RTT,
/// or the smallest one-way delay.
fn bufferbloat(
    out: &mut Vec<Diagnosis>,
    dir: Dir,
    bins: &RttBins,
    base: Duration,
    path_rtt: Duration,
    basis: Basis,
) {
    let Some(t0) = bins.t0 else { return };
    let w = bins.width_ns;
    let thresh = path_rtt.max(Duration::from_millis(5));
    let sustained = Duration::from_millis(500).max(path_rtt * 4);
    let gap_ok_bins = (1_000_000_000 / w.max(1)).max(1);
    let bins: Vec<(u64, Duration, Duration)> = bins.spans().collect();
    let mut runs: Vec<(usize, usize)> = Vec::new();
    let mut cur: Option<(usize, usize)> = None;
    for (k, b) in bins.iter().enumerate() {
        let high = b.1.saturating_sub(base) >= thresh;
        cur = match (cur, high) {
            (Some((s, last)), true) if b.0 - bins[last].0 <= gap_ok_bins => Some((s, k)),
            (Some(r), true) => {
                runs.push(r);
                Some((k, k))
            }
            (None, true) => Some((k, k)),
            (Some(r), false) => {
                runs.push(r);
                None
            }
            (None, false) => None,
        };
    }
    runs.extend(cur);
    let at = |i: u64| t0 + Duration::from_nanos(i * w);
    for (s, l) in runs {
        let (bs, bl) = (&bins[s], &bins[l]);
        let start = at(bs.0);
        let end = at(bl.0 + 1);
        if end - start < sustained || l - s + 1 < 3 {
            continue;
        }
        let excess: Vec<f64> = bins[s..=l]
            .iter()
            .map(|b| ms(b.1.saturating_sub(base)))
            .collect();
        // The queue that stood: the median over the span of each bin's smallest excess (a
        // bin's minimum is the queue that did not drain within it).
        let floor = excess.iter().copied().fold(f64::INFINITY, f64::min);
        let standing = median(excess.clone());
        let peak = bins[s..=l]
            .iter()
            .map(|b| ms(b.2.saturating_sub(base)))
            .fold(0.0, f64::max);
        let secs = (end - start).as_secs_f64();
        let summary = match basis {
            Basis::Rtt => format!(
                "for {secs:.1} s the RTT stayed at least {floor:.0} ms above its {:.1} ms minimum (peak RTT {:.0} ms): a standing queue of about {standing:.0} ms",
                ms(base),
                ms(base) + peak,
            ),
            Basis::OneWay => format!(
                "for {secs:.1} s the data's one-way delay (capture clock against the sender's TCP timestamps, 1 ms ticks) stayed at least {floor:.0} ms above its minimum (at most {peak:.0} ms above; handshake RTT {:.1} ms): a standing queue of about {standing:.0} ms between the sender and this receiver-side capture",
                ms(path_rtt),
            ),
        };
        out.push(Diagnosis {
            kind: DiagnosisKind::Bufferbloat,
            frames: Frames::default(),
            dir: Some(dir),
            start,
            end,
            delay_ms: standing,
            summary,
        });
    }
}

/// ecn_bleached: the same connection seen at two vantage points, where one direction's
/// packets were ECT at one point and never at the other (RFC 3168 §18 "ECN bleaching").
/// Returns the diagnosis for the downstream view.
pub(crate) fn bleaching(up: &Connection, down: &Connection) -> Vec<Diagnosis> {
    let mut out = Vec::new();
    for dir in [Dir::AtoB, Dir::BtoA] {
        let u = &up.dir(dir).stats;
        // Match by sender address: the two views may have chosen `a` differently.
        let src = up.dir(dir).src;
        let dd = if down.a2b.src == src {
            &down.a2b.stats
        } else {
            &down.b2a.stats
        };
        let ect_up = u.ect0 + u.ect1 + u.ce;
        let ect_down = dd.ect0 + dd.ect1 + dd.ce;
        if ect_up > 0 && ect_down == 0 && dd.packets > 0 {
            out.push(Diagnosis {
                kind: DiagnosisKind::EcnBleached,
                frames: down.frames,
                dir: Some(if down.a2b.src == src {
                    Dir::AtoB
                } else {
                    Dir::BtoA
                }),
                start: down.first_time.min(up.first_time),
                end: down.last_time.max(up.last_time),
                delay_ms: 0.0,
                summary: format!(
                    "{ect_up} of {} packets from {} were ECN-capable at one capture point, but none of the {} seen at the other: the path clears the ECN field",
                    u.packets,
                    src.map(|s| s.to_string()).unwrap_or_default(),
                    dd.packets
                ),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use crate::model::*;
    use crate::synth::{self, Bulk, Tcp, ACK, PSH, SYN};
    use crate::{analyze_bytes, Analyzer, Options};

    const MS: u64 = 1_000_000;
    const T0: u64 = 1_700_000_000_000_000_000;

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    fn kinds(c: &Connection, k: DiagnosisKind) -> Vec<&Diagnosis> {
        c.diagnoses.iter().filter(|d| d.kind == k).collect()
    }

    fn run(pkts: Vec<(u64, Vec<u8>)>) -> Analysis {
        analyze_bytes("t", &synth::pcap(pkts), Options::default()).unwrap()
    }

    /// A hand-driven connection recorded at the client: `c` sends, `s` answers.
    struct Hand {
        c: SocketAddr,
        s: SocketAddr,
        cseq: u32,
        sseq: u32,
        out: Vec<(u64, Vec<u8>)>,
    }

    impl Hand {
        fn open(t: u64, rtt: u64, mss: u16) -> Hand {
            let (c, s) = (addr("10.0.0.1:40000"), addr("10.0.0.2:80"));
            let mut h = Hand {
                c,
                s,
                cseq: 1000,
                sseq: 9000,
                out: Vec::new(),
            };
            let mut syn = Tcp::new(c, s, h.cseq, 0, SYN);
            syn.options = synth::tcp_option::mss(mss);
            h.out.push((t, syn.build()));
            let mut sa = Tcp::new(s, c, h.sseq, h.cseq + 1, SYN | ACK);
            sa.options = synth::tcp_option::mss(mss);
            h.out.push((t + rtt, sa.build()));
            h.cseq += 1;
            h.sseq += 1;
            h.out
                .push((t + rtt, Tcp::new(c, s, h.cseq, h.sseq, ACK).build()));
            h
        }
        /// Client data of `len` bytes at `t`.
        fn data(&mut self, t: u64, len: usize) {
            let mut p = Tcp::new(self.c, self.s, self.cseq, self.sseq, ACK | PSH);
            p.payload_len = len;
            self.out.push((t, p.build()));
            self.cseq = self.cseq.wrapping_add(len as u32);
        }
        /// Server's pure ACK of everything so far, with a window, arriving at `t`.
        fn ack(&mut self, t: u64, window: u16) {
            let mut p = Tcp::new(self.s, self.c, self.sseq, self.cseq, ACK);
            p.window = window;
            self.out.push((t, p.build()));
        }
        /// Server data (a response) arriving at `t`, acking everything.
        fn reply(&mut self, t: u64, len: usize) {
            let mut p = Tcp::new(self.s, self.c, self.sseq, self.cseq, ACK | PSH);
            p.payload_len = len;
            self.out.push((t, p.build()));
            self.sseq = self.sseq.wrapping_add(len as u32);
        }
    }

    /// A sender that grows its flights to 40 segments (58 kB), idles 2 s, then sends
    /// `after` (segments per round trip) with 100 ms RTT, the capture at the sender.
    fn idle_then(after: &[u64], reply_between: bool) -> Analysis {
        idle_then_with(after, reply_between, 65535, false)
    }

    /// The same, the peer advertising `window` bytes after the idle spell.
    fn idle_then_window(after: &[u64], window: u16) -> Analysis {
        idle_then_with(after, false, window, false)
    }

    /// `stalled`: the silence is the peer's zero window, reopened to `window_after`.
    fn idle_then_with(
        after: &[u64],
        reply_between: bool,
        window_after: u16,
        stalled: bool,
    ) -> Analysis {
        let rtt = 100 * MS;
        let mut h = Hand::open(T0, rtt, 1460);
        let mut t = T0 + rtt + MS;
        let round = |h: &mut Hand, t: &mut u64, segs: u64| {
            for k in 0..segs {
                h.data(*t + k * 100_000, 1448);
            }
            h.ack(*t + rtt + segs * 100_000, 65535);
            *t += rtt + segs * 100_000 + 100_000;
        };
        for segs in [10, 20, 40] {
            round(&mut h, &mut t, segs);
        }
        if stalled {
            h.ack(t + 10 * MS, 0);
        }
        t += 2_000 * MS;
        h.ack(t - MS, window_after);
        for (k, segs) in after.iter().enumerate() {
            if k == 1 && reply_between {
                h.reply(t - MS, 100);
            }
            round(&mut h, &mut t, *segs);
        }
        run(h.out)
    }

    #[test]
    fn a_small_first_flight_after_idle_that_goes_on_a_round_trip_later_is_slow_start_after_idle() {
        let a = idle_then(&[10, 30], false);
        let c = &a.connections[0];
        let d = kinds(c, DiagnosisKind::SlowStartAfterIdle);
        assert_eq!(d.len(), 1, "{:#?}", c.diagnoses);
        assert!(
            d[0].summary
                .contains("first flight was at most 14480 bytes"),
            "{}",
            d[0].summary
        );
        assert!(
            d[0].summary.contains("up to 57920 bytes"),
            "{}",
            d[0].summary
        );
        // One round trip lost: from the flight to the next, 100 ms plus the flight's 1 ms.
        assert!((d[0].delay_ms - 101.0).abs() < 1.0, "{}", d[0].delay_ms);
        assert_eq!(d[0].dir, Some(Dir::AtoB));
    }

    #[test]
    fn a_window_kept_over_idle_or_a_reply_to_new_data_is_not_slow_start_after_idle() {
        // The window kept: the whole 40 segments go in the first flight.
        let a = idle_then(&[40], false);
        assert!(kinds(&a.connections[0], DiagnosisKind::SlowStartAfterIdle).is_empty());
        // A small message, then more after the peer answered: a conversation, not a window.
        let a = idle_then(&[10, 30], true);
        assert!(kinds(&a.connections[0], DiagnosisKind::SlowStartAfterIdle).is_empty());
        // A receive window that reopens small after the reader stopped is no cut-back
        // congestion window either.
        let a = idle_then_window(&[10, 30], 20_000);
        assert!(kinds(&a.connections[0], DiagnosisKind::SlowStartAfterIdle).is_empty());
        // Nor a silence the peer's zero window imposed: that is zero_window_stall.
        let a = idle_then_with(&[10, 30], false, 65535, true);
        assert!(kinds(&a.connections[0], DiagnosisKind::SlowStartAfterIdle).is_empty());
        // A first flight as large as half the earlier ones is no cut-back window.
        let a = idle_then(&[25, 30], false);
        assert!(kinds(&a.connections[0], DiagnosisKind::SlowStartAfterIdle).is_empty());
    }

    #[test]
    fn a_message_split_in_two_writes_waits_for_the_delayed_ack_nagle() {
        // Each 70-byte message is written as 35 + 35 bytes; the second half waits for the ACK
        // of the first, which the server delays by 40 ms; RTT 50 ms.
        let (rtt, delack) = (50 * MS, 40 * MS);
        let mut h = Hand::open(T0, rtt, 1460);
        let mut t = T0 + rtt + MS;
        for _ in 0..5 {
            h.data(t, 35);
            let ack_at = t + rtt + delack;
            h.ack(ack_at, 65535);
            h.data(ack_at + 50_000, 35);
            // The server answers the whole message; the client reads it and waits 100 ms.
            h.reply(ack_at + 50_000 + rtt, 100);
            h.out.push((
                ack_at + 50_000 + rtt + 200_000,
                Tcp::new(h.c, h.s, h.cseq, h.sseq, ACK).build(),
            ));
            t = ack_at + 50_000 + rtt + 100 * MS;
        }
        let a = run(h.out);
        let c = &a.connections[0];
        let n = kinds(c, DiagnosisKind::NagleDelayedAck);
        assert_eq!(n.len(), 1, "{:#?}", c.diagnoses);
        assert_eq!(n[0].dir, Some(Dir::AtoB));
        // Five holds of RTT + delayed-ACK timer each.
        let per = (rtt + delack + 50_000) as f64 / 1e6;
        assert!((n[0].delay_ms - 5.0 * per).abs() < 0.5, "{}", n[0].delay_ms);
        assert!(n[0].summary.starts_with("5 times"), "{}", n[0].summary);
        // The server's replies are not Nagle stalls.
        assert!(n.iter().all(|d| d.dir == Some(Dir::AtoB)));
    }

    #[test]
    fn nagle_holds_of_a_few_ms_in_all_are_not_named() {
        // Holds on a LAN (RTT 2 ms): the peer ACKs each small segment 2.5 ms after it left,
        // and the second write waits that long. Three of them cost 7.7 ms in all, less than
        // one delayed-ACK timeout.
        let (rtt, wait) = (2 * MS, 2 * MS + MS / 2);
        let mut h = Hand::open(T0, rtt, 1460);
        let mut t = T0 + rtt + MS;
        let hold = |h: &mut Hand, t: &mut u64| {
            h.data(*t, 1000);
            h.ack(*t + wait, 65535);
            h.data(*t + wait + 50_000, 1000);
            h.ack(*t + wait + 50_000 + rtt, 65535);
            *t += 20 * MS;
        };
        for _ in 0..3 {
            hold(&mut h, &mut t);
        }
        let a = run(h.out.clone());
        assert!(
            kinds(&a.connections[0], DiagnosisKind::NagleDelayedAck).is_empty(),
            "{:#?}",
            a.connections[0].diagnoses
        );
        // Sixteen cost 40.8 ms: one delayed-ACK timeout's worth, named.
        for _ in 0..13 {
            hold(&mut h, &mut t);
        }
        let a = run(h.out);
        let n = kinds(&a.connections[0], DiagnosisKind::NagleDelayedAck);
        assert_eq!(n.len(), 1, "{:#?}", a.connections[0].diagnoses);
        assert!(n[0].summary.starts_with("16 times"), "{}", n[0].summary);
        assert!(
            (n[0].delay_ms - 16.0 * 2.55).abs() < 0.1,
            "{}",
            n[0].delay_ms
        );
    }

    #[test]
    fn writes_released_by_replies_are_not_nagle() {
        let rtt = 50 * MS;
        let mut h = Hand::open(T0, rtt, 1460);
        let mut t = T0 + rtt + MS;
        for _ in 0..5 {
            h.data(t, 35);
            h.reply(t + rtt, 100);
            h.data(t + rtt + 10_000, 35);
            h.ack(t + 2 * rtt + 10_000, 65535);
            t += 3 * rtt;
        }
        let a = run(h.out);
        assert!(kinds(&a.connections[0], DiagnosisKind::NagleDelayedAck).is_empty());
    }

    #[test]
    fn a_full_window_released_only_by_the_ack_timer_is_delayed_ack_pacing() {
        // Receiver window 4000 bytes (MSS 1460, the sender writes 1000-byte segments): four
        // segments fill it in 1 ms, then the receiver's 40 ms timer sends the ACK; RTT 5 ms.
        let (rtt, timer) = (5 * MS, 40 * MS);
        let mut h = Hand::open(T0, rtt, 1460);
        h.ack(T0 + rtt + 1, 4000);
        let mut t = T0 + rtt + MS;
        let rounds = 8;
        for _ in 0..rounds {
            for k in 0..4 {
                h.data(t + k * 250_000, 1000);
            }
            let ack_at = t + rtt + timer;
            h.ack(ack_at, 4000);
            t = ack_at + 100_000;
        }
        let a = run(h.out);
        let c = &a.connections[0];
        let p = kinds(c, DiagnosisKind::DelayedAckPacing);
        assert_eq!(p.len(), 1, "{:#?}", c.diagnoses);
        assert!(
            p[0].summary.starts_with(&format!("{rounds} times")),
            "{}",
            p[0].summary
        );
        assert!(
            p[0].summary.contains("ACKs came every 45.1 ms"),
            "{}",
            p[0].summary
        );
        // The window was the limit nearly all the time, so rwnd_limited is named too.
        assert_eq!(kinds(c, DiagnosisKind::RwndLimited).len(), 1);
    }

    #[test]
    fn a_timer_ack_of_unread_data_then_a_window_update_on_read_is_not_pacing() {
        // The same rounds, but the receiving application is late: the timer's ACK takes the
        // data with the window still closed (500 bytes, less than a segment), and the window
        // opens 0.1 ms later, when the application reads. The reader, not the deferred ACK.
        let (rtt, timer) = (5 * MS, 40 * MS);
        let mut h = Hand::open(T0, rtt, 1460);
        h.ack(T0 + rtt + 1, 4000);
        let mut t = T0 + rtt + MS;
        for _ in 0..8 {
            for k in 0..4 {
                h.data(t + k * 250_000, 1000);
            }
            let ack_at = t + rtt + timer;
            h.ack(ack_at, 500);
            h.ack(ack_at + 100_000, 4000);
            t = ack_at + 200_000;
        }
        let a = run(h.out);
        let c = &a.connections[0];
        assert!(
            kinds(c, DiagnosisKind::DelayedAckPacing).is_empty(),
            "{:#?}",
            c.diagnoses
        );
        assert_eq!(kinds(c, DiagnosisKind::RwndLimited).len(), 1);
    }

    #[test]
    fn a_few_late_acks_among_many_prompt_rounds_are_not_pacing() {
        // 5 ms RTT, 4000-byte window: 200 rounds released by prompt ACKs, and every 20th
        // round's ACK 25 ms late (a receiving application that was not scheduled).
        let rtt = 5 * MS;
        let mut h = Hand::open(T0, rtt, 1460);
        h.ack(T0 + rtt + 1, 4000);
        let mut t = T0 + rtt + MS;
        for round in 0..200 {
            for k in 0..4 {
                h.data(t + k * 250_000, 1000);
            }
            let late = if round % 20 == 10 { 25 * MS } else { 0 };
            let ack_at = t + rtt + late;
            h.ack(ack_at, 4000);
            t = ack_at + 100_000;
        }
        let a = run(h.out);
        let c = &a.connections[0];
        assert!(
            kinds(c, DiagnosisKind::DelayedAckPacing).is_empty(),
            "{:#?}",
            c.diagnoses
        );
    }

    #[test]
    fn prompt_acks_on_a_full_window_are_rwnd_limited_but_not_pacing() {
        let b = {
            let mut b = Bulk::new(addr("10.0.0.1:40000"), addr("10.0.0.2:5201"));
            b.window_segments = 10;
            b.rate_bytes_per_s = 100_000_000;
            b
        };
        let a = run(b.run());
        let c = &a.connections[0];
        assert_eq!(
            kinds(c, DiagnosisKind::RwndLimited).len(),
            1,
            "{:#?}",
            c.diagnoses
        );
        assert!(kinds(c, DiagnosisKind::DelayedAckPacing).is_empty());
        assert!(kinds(c, DiagnosisKind::Bufferbloat).is_empty());
        assert!(kinds(c, DiagnosisKind::LossBurst).is_empty());
    }

    #[test]
    fn a_window_far_above_the_path_bdp_is_bufferbloat_with_its_standing_queue() {
        // 1 MB/s bottleneck, 20 ms RTT: the path holds 20 kB; a 200-segment window (290 kB)
        // keeps about 270 ms of data queued.
        let mut b = Bulk::new(addr("10.0.0.1:40000"), addr("10.0.0.2:5201"));
        b.window_segments = 200;
        b.rate_bytes_per_s = 1_000_000;
        b.bytes = 3_000_000;
        let a = run(b.run());
        let c = &a.connections[0];
        let bb = kinds(c, DiagnosisKind::Bufferbloat);
        assert_eq!(bb.len(), 1, "{:#?}", c.diagnoses);
        let window_s = 200.0 * 1448.0 / 1e6;
        let expect_ms = (window_s - 0.020) * 1e3;
        assert!(
            (bb[0].delay_ms - expect_ms).abs() < 0.1 * expect_ms,
            "{} vs {expect_ms}",
            bb[0].delay_ms
        );
        assert!((bb[0].end - bb[0].start).as_secs_f64() > 2.0);
    }

    #[test]
    fn a_few_segments_in_flight_on_a_slow_line_are_not_bufferbloat() {
        // 50 kB/s (a DSL uplink), 40 ms RTT: each full segment takes 29 ms to serialize, so the
        // few segments any window keeps in flight look like tens of ms of queue. A sender whose
        // delay is in its own socket buffer shows exactly this on the wire.
        let mut b = Bulk::new(addr("10.0.0.1:40000"), addr("10.0.0.2:5201"));
        b.window_segments = 4;
        b.rate_bytes_per_s = 50_000;
        b.base_rtt_ns = 40_000_000;
        b.bytes = 500_000;
        let a = run(b.run());
        let c = &a.connections[0];
        assert!(
            kinds(c, DiagnosisKind::Bufferbloat).is_empty(),
            "{:#?}",
            c.diagnoses
        );
        // Forty segments on the same line are a real standing queue.
        b.window_segments = 40;
        let a = run(b.run());
        assert_eq!(
            kinds(&a.connections[0], DiagnosisKind::Bufferbloat).len(),
            1,
            "{:#?}",
            a.connections[0].diagnoses
        );
    }

    #[test]
    fn losses_give_loss_burst_and_a_lost_retransmission_gives_rto_stall() {
        let mut b = Bulk::new(addr("10.0.0.1:40000"), addr("10.0.0.2:5201"));
        b.window_segments = 60;
        b.drop_first_tx = [100u64, 101, 102, 103, 300].into_iter().collect();
        b.drop_second_tx = [300u64].into_iter().collect();
        let a = run(b.run());
        let c = &a.connections[0];
        let lb = kinds(c, DiagnosisKind::LossBurst);
        assert_eq!(lb.len(), 1, "{:#?}", c.diagnoses);
        assert!(
            lb[0].summary.starts_with("4 segments (5792 bytes)"),
            "{}",
            lb[0].summary
        );
        let rto = kinds(c, DiagnosisKind::RtoStall);
        assert_eq!(rto.len(), 1);
        assert!(
            rto[0].delay_ms >= b.rto_ns as f64 / 1e6 * 0.9,
            "{}",
            rto[0].delay_ms
        );
        assert!(
            rto[0].summary.contains(&format!("byte {}", 300 * 1448 + 1)),
            "{}",
            rto[0].summary
        );
    }

    #[test]
    fn a_retransmitted_syn_is_named_with_the_time_it_cost() {
        let (c, s) = (addr("[fd00::1]:40000"), addr("[fd00::2]:443"));
        let pk = vec![
            (T0, Tcp::new(c, s, 7, 0, SYN).build()),
            (T0 + 1000 * MS, Tcp::new(c, s, 7, 0, SYN).build()),
            (T0 + 1010 * MS, Tcp::new(s, c, 70, 8, SYN | ACK).build()),
            (T0 + 1010 * MS + 10, Tcp::new(c, s, 8, 71, ACK).build()),
        ];
        let a = run(pk);
        let conn = &a.connections[0];
        let d = kinds(conn, DiagnosisKind::SynRetransmit);
        assert_eq!(d.len(), 1);
        assert!((d[0].delay_ms - 1000.0).abs() < 1e-6);
        assert_eq!(conn.handshake.syn_count, 2);
        assert_eq!(
            conn.handshake.syn_rtt, None,
            "Karn: no RTT from a retransmitted SYN"
        );
        let hs = conn.handshake.duration.unwrap().as_secs_f64() * 1e3;
        assert!((hs - 1010.0).abs() < 0.01);
    }

    #[test]
    fn ecn_negotiated_but_never_marked_is_ecn_unused() {
        let mut b = Bulk::new(addr("10.0.0.1:40000"), addr("10.0.0.2:5201"));
        b.ecn = true;
        let a = run(b.run());
        assert_eq!(kinds(&a.connections[0], DiagnosisKind::EcnUnused).len(), 1);
        b.ecn = false;
        let a = run(b.run());
        assert!(kinds(&a.connections[0], DiagnosisKind::EcnUnused).is_empty());
    }

    #[test]
    fn ect_cleared_between_two_captures_is_ecn_bleached() {
        let mut b = Bulk::new(addr("10.0.0.1:40000"), addr("10.0.0.2:5201"));
        b.ecn = true;
        b.bleach = true;
        let sender = synth::pcap(b.run());
        b.vantage = synth::Vantage::Receiver;
        let receiver = synth::pcap(b.run());
        let mut an = Analyzer::new(Options::default());
        an.add_capture("client.pcap", &sender[..]).unwrap();
        an.add_capture("server.pcap", &receiver[..]).unwrap();
        let a = an.finish();
        assert_eq!(a.connections.len(), 2);
        let bleached: Vec<&Connection> = a
            .connections
            .iter()
            .filter(|c| !kinds(c, DiagnosisKind::EcnBleached).is_empty())
            .collect();
        assert_eq!(bleached.len(), 1);
        assert_eq!(
            bleached[0].vantage.capture, 1,
            "named at the downstream capture"
        );
        // Without bleaching, the same pair of captures is clean.
        b.bleach = false;
        let mut an = Analyzer::new(Options::default());
        b.vantage = synth::Vantage::Sender;
        an.add_capture("client.pcap", &synth::pcap(b.run())[..])
            .unwrap();
        b.vantage = synth::Vantage::Receiver;
        an.add_capture("server.pcap", &synth::pcap(b.run())[..])
            .unwrap();
        let a = an.finish();
        assert!(a
            .connections
            .iter()
            .all(|c| kinds(c, DiagnosisKind::EcnBleached).is_empty()));
    }

    fn bloated(vantage: synth::Vantage, timestamps: bool) -> Bulk {
        // 1 MB/s bottleneck, 20 ms RTT, a 200-segment window: about 270 ms of standing queue.
        let mut b = Bulk::new(addr("10.0.0.1:40000"), addr("10.0.0.2:5201"));
        b.window_segments = 200;
        b.rate_bytes_per_s = 1_000_000;
        b.bytes = 3_000_000;
        b.vantage = vantage;
        b.timestamps = timestamps;
        b
    }

    #[test]
    fn a_capture_at_the_receiver_of_a_bulk_transfer_is_not_app_limited() {
        // At the receiver every arriving segment is ACKed at once, so nothing ever looks in
        // flight; the sender was network-limited throughout.
        let a = run(bloated(synth::Vantage::Receiver, false).run());
        let c = &a.connections[0];
        assert_eq!(c.a2b.capture_point, CapturePoint::Receiver);
        assert_eq!(c.b2a.capture_point, CapturePoint::Sender);
        assert!(
            kinds(c, DiagnosisKind::AppLimited).is_empty(),
            "{:#?}",
            c.diagnoses
        );
        assert!(kinds(c, DiagnosisKind::RwndLimited).is_empty());
        // Without timestamps the queue cannot be seen from here, and the analysis says so.
        assert!(kinds(c, DiagnosisKind::Bufferbloat).is_empty());
        for k in [DiagnosisKind::AppLimited, DiagnosisKind::Bufferbloat] {
            assert!(c.a2b.not_judged.contains(&k), "{:?}", c.a2b.not_judged);
        }
        // The same transfer at the sender is judged in full.
        let a = run(bloated(synth::Vantage::Sender, false).run());
        let c = &a.connections[0];
        assert_eq!(c.a2b.capture_point, CapturePoint::Sender);
        assert!(c.a2b.not_judged.is_empty());
        assert_eq!(kinds(c, DiagnosisKind::Bufferbloat).len(), 1);
    }

    #[test]
    fn at_the_receiver_bufferbloat_is_the_growth_of_one_way_delay_from_tcp_timestamps() {
        let b = bloated(synth::Vantage::Receiver, true);
        let a = run(b.run());
        let c = &a.connections[0];
        assert_eq!(c.a2b.capture_point, CapturePoint::Receiver);
        assert!(!c.a2b.not_judged.contains(&DiagnosisKind::Bufferbloat));
        let bb = kinds(c, DiagnosisKind::Bufferbloat);
        assert_eq!(bb.len(), 1, "{:#?}", c.diagnoses);
        // The queue the sender's RTT shows, seen from the other end (1 ms timestamp ticks).
        let at_sender = run(bloated(synth::Vantage::Sender, true).run());
        let want = kinds(&at_sender.connections[0], DiagnosisKind::Bufferbloat)[0].delay_ms;
        assert!(
            (bb[0].delay_ms - want).abs() < 0.05 * want,
            "{} vs {want}",
            bb[0].delay_ms
        );
        assert!(bb[0].summary.contains("one-way delay"), "{}", bb[0].summary);
        // An unbloated transfer (window about the path's BDP) shows no one-way queue.
        let mut small = b.clone();
        small.window_segments = 14;
        let a = run(small.run());
        assert!(kinds(&a.connections[0], DiagnosisKind::Bufferbloat).is_empty());
    }

    #[test]
    fn an_idle_sender_with_nothing_in_flight_is_app_limited() {
        let rtt = 10 * MS;
        let mut h = Hand::open(T0, rtt, 1460);
        let mut t = T0 + rtt + MS;
        for _ in 0..5 {
            for k in 0..3 {
                h.data(t + k * 100_000, 1460);
            }
            h.ack(t + rtt + 300_000, 65535);
            t += 500 * MS;
        }
        let a = run(h.out);
        let c = &a.connections[0];
        let d = kinds(c, DiagnosisKind::AppLimited);
        assert_eq!(d.len(), 1, "{:#?}", c.diagnoses);
        assert!(d[0].summary.contains("4 times"), "{}", d[0].summary);
    }

    #[test]
    fn rtt_bins_found_without_dividing_are_the_bins_a_division_gives() {
        // Times that go forward in small and large steps, back now and then, and far enough
        // that the bins merge (twice) beyond MAX_RTT_BINS.
        let mut bins = super::RttBins::default();
        let mut reference: Vec<(u64, u64)> = Vec::new(); // (time ns, rtt ns)
        let mut t = T0;
        for i in 0..40_000u64 {
            t = match i % 97 {
                0 => t.saturating_sub(25 * MS),
                1 => t + 40 * MS,
                _ => t + (i * 7919 % 3_000_000),
            };
            let rtt = 1000 + i * 31 % 5000;
            bins.add(
                wire::Instant::from_nanos(t),
                wire::Duration::from_nanos(rtt),
            );
            reference.push((t, rtt));
        }
        // Bins count from the first sample's time.
        let first = reference[0].0;
        for r in reference.iter_mut() {
            r.0 = r.0.saturating_sub(first);
        }
        let w = bins.width_ns;
        assert!(w >= 40 * MS, "the bins never merged: width {w}");
        // Rebuilt from scratch at the final width: samples are merged only with the last
        // bin, so consecutive runs of one bin index form one bin.
        let mut want: Vec<(u64, u64, u64, u32)> = Vec::new();
        for &(rel, rtt) in &reference {
            let idx = rel / w;
            match want.last_mut() {
                Some(b) if b.0 == idx => {
                    b.1 = b.1.min(rtt);
                    b.2 = b.2.max(rtt);
                    b.3 += 1;
                }
                _ => want.push((idx, rtt, rtt, 1)),
            }
        }
        let got: Vec<(u64, u64, u64, u32)> =
            bins.bins.iter().map(|b| (b.0, b.1, b.2, b.3)).collect();
        // Merging halves indices of runs built at a smaller width; compare the totals and
        // the extremes per index, which any correct binning keeps.
        let totals = |v: &[(u64, u64, u64, u32)]| {
            let mut m = std::collections::BTreeMap::<u64, (u64, u64, u32)>::new();
            for &(i, lo, hi, n) in v {
                let e = m.entry(i).or_insert((u64::MAX, 0, 0));
                *e = (e.0.min(lo), e.1.max(hi), e.2 + n);
            }
            m
        };
        assert_eq!(totals(&got), totals(&want));
        assert_eq!(bins.min(), wire::Duration::from_nanos(1000));
    }
}
