//! Diagnoses: naming what held a connection back, with a time span and the evidence.
//!
//! [`crate::tcp`] records compact evidence while it rebuilds a connection ([`Evidence`]:
//! a few events per stall, aggregate counters, RTT minima in time bins whose width doubles
//! to stay under a fixed count); [`diagnose`] turns it into [`Diagnosis`] values once the
//! connection's minimum RTT is known. [`bleaching`] compares one connection seen at two
//! vantage points. Thresholds are constants here, each with its reason; the definitions are
//! written out for users in `docs/analyze.md`. Nothing here reads packets.

use wire::{Duration, Instant};

use crate::model::*;

/// Most events kept per kind and direction; counts beyond it are still exact.
const MAX_EVENTS: usize = 4096;
/// Most diagnoses of one kind per direction listed separately (the rest are summed up in the
/// last one).
const MAX_LISTED: usize = 10;
/// RTT bins kept per direction before their width doubles.
const MAX_RTT_BINS: usize = 2048;

/// A sub-MSS segment sent right after the ACK of the previous one.
#[derive(Copy, Clone, Debug)]
pub(crate) struct NagleEvent {
    pub prev_time: Instant,
    pub prev_len: u32,
    pub ack_time: Instant,
    pub time: Instant,
    pub len: u32,
}

/// The receive window was full from `since`; the last segment went at `last_send`; an ACK
/// reopened it at `reopen`.
#[derive(Copy, Clone, Debug)]
pub(crate) struct Stall {
    pub since: Instant,
    pub last_send: Instant,
    pub reopen: Instant,
    pub window: u64,
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
}

/// Minimum and maximum RTT per time bin.
#[derive(Clone, Debug, Default)]
pub(crate) struct RttBins {
    t0: Option<Instant>,
    width_ns: u64,
    /// (bin index, min, max, samples)
    bins: Vec<(u64, Duration, Duration, u32)>,
    min: Option<Duration>,
}

impl RttBins {
    pub fn add(&mut self, t: Instant, rtt: Duration) {
        let t0 = *self.t0.get_or_insert(t);
        if self.width_ns == 0 {
            self.width_ns = 10_000_000;
        }
        self.min = Some(self.min.map_or(rtt, |m| m.min(rtt)));
        let idx = (t - t0).as_nanos() as u64 / self.width_ns;
        match self.bins.last_mut() {
            Some(b) if b.0 == idx => {
                b.1 = b.1.min(rtt);
                b.2 = b.2.max(rtt);
                b.3 += 1;
            }
            _ => self.bins.push((idx, rtt, rtt, 1)),
        }
        if self.bins.len() > MAX_RTT_BINS {
            self.width_ns *= 2;
            let mut merged: Vec<(u64, Duration, Duration, u32)> = Vec::new();
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
    }

    /// Smallest RTT so far (zero before the first sample).
    pub fn min(&self) -> Duration {
        self.min.unwrap_or(Duration::ZERO)
    }
}

/// What [`crate::tcp`] records about one direction's data for the diagnoses.
#[derive(Clone, Debug, Default)]
pub(crate) struct Evidence {
    pub rtt: RttBins,
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
}

impl Evidence {
    pub fn window_full(
        &mut self,
        since: Instant,
        last_send: Instant,
        reopen: Instant,
        window: u64,
    ) {
        self.window_full_ns += (reopen - since).as_nanos() as u64;
        self.window_full_count += 1;
        if self.stalls.len() < MAX_EVENTS {
            self.stalls.push(Stall {
                since,
                last_send,
                reopen,
                window,
            });
        }
    }

    pub fn app_idle(&mut self, from: Instant, to: Instant) {
        self.app_idle_ns += (to - from).as_nanos() as u64;
        self.app_gaps += 1;
        self.app_first.get_or_insert(from);
        self.app_last = to;
    }
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

/// All diagnoses of one connection, ordered by start time.
pub(crate) fn diagnose(
    c: &Connection,
    ev: [&Evidence; 2],
    last_syn: Option<Instant>,
    last_synack: Option<Instant>,
) -> Vec<Diagnosis> {
    let mut out = Vec::new();
    let dur_ns = (c.last_time - c.first_time).as_nanos() as f64;
    for (i, dir) in [Dir::AtoB, Dir::BtoA].into_iter().enumerate() {
        let d = c.dir(dir);
        let e = ev[i];
        let rtt_min = e.rtt.min();
        nagle(&mut out, dir, d, c.dir(dir.other()).options.mss, e);
        pacing(&mut out, dir, e, rtt_min);
        bufferbloat(&mut out, dir, e, rtt_min);
        // rwnd_limited: the window was the limit for a fifth of the connection or more.
        if e.window_full_count >= 2 && dur_ns > 0.0 && e.window_full_ns as f64 >= 0.2 * dur_ns {
            let (first, last) = (e.stalls.first(), e.stalls.last());
            if let (Some(f), Some(l)) = (first, last) {
                let wmax = e.stalls.iter().map(|s| s.window).max().unwrap_or(0);
                let frac = e.window_full_ns as f64 / dur_ns * 100.0;
                out.push(Diagnosis {
                    kind: DiagnosisKind::RwndLimited,
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
        if e.app_gaps >= 1 && dur_ns > 0.0 && e.app_idle_ns as f64 >= 0.2 * dur_ns {
            if let Some(first) = e.app_first {
                out.push(Diagnosis {
                    kind: DiagnosisKind::AppLimited,
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
        // loss_burst: three or more segments retransmitted in one recovery episode.
        let bursts: Vec<&Recovery> = e.recoveries.iter().filter(|r| r.packets >= 3).collect();
        for (k, r) in bursts.iter().enumerate() {
            if k == MAX_LISTED {
                let rest = bursts.len() - MAX_LISTED;
                let pk: u64 = bursts[MAX_LISTED..].iter().map(|r| r.packets).sum();
                out.push(Diagnosis {
                    kind: DiagnosisKind::LossBurst,
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
                dir: Some(dir),
                start: r.start,
                end: r.end,
                delay_ms: ms(r.end - r.start),
                summary: format!(
                    "{} segments ({} bytes) were retransmitted in one loss episode; recovery took {:.1} ms",
                    r.packets,
                    r.bytes,
                    ms(r.end - r.start)
                ),
            });
        }
        for (k, r) in e.rto.iter().enumerate() {
            if k == MAX_LISTED {
                let rest = &e.rto[MAX_LISTED..];
                out.push(Diagnosis {
                    kind: DiagnosisKind::RtoStall,
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
    if c.handshake.syn_count >= 2 {
        if let (Some(f), Some(l)) = (c.handshake.syn_time, last_syn) {
            out.push(Diagnosis {
                kind: DiagnosisKind::SynRetransmit,
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
    out
}

/// nagle_delayed_ack: sub-MSS segments that each left only when the ACK of the previous
/// sub-MSS segment came back (RFC 896; RFC 9293 §3.7.4).
fn nagle(out: &mut Vec<Diagnosis>, dir: Dir, d: &Direction, peer_mss: Option<u16>, e: &Evidence) {
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
        .collect();
    let (Some(f), Some(l)) = (evs.first(), evs.last()) else {
        return;
    };
    let waits: Vec<f64> = evs.iter().map(|n| ms(n.time - n.prev_time)).collect();
    let total: f64 = waits.iter().sum();
    out.push(Diagnosis {
        kind: DiagnosisKind::NagleDelayedAck,
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

/// delayed_ack_pacing: the window was full and the sender idle until an ACK that came much
/// later than one RTT: the receiver's delayed-ACK timer set the pace (RFC 9293 §3.8.6.3).
fn pacing(out: &mut Vec<Diagnosis>, dir: Dir, e: &Evidence, rtt_min: Duration) {
    // An ACK held at least 10 ms (and half an RTT) beyond the RTT is a timer, not the path.
    let extra_min = Duration::from_millis(10).max(rtt_min / 2);
    let held: Vec<&Stall> = e
        .stalls
        .iter()
        .filter(|s| (s.reopen - s.last_send).saturating_sub(rtt_min) >= extra_min)
        .collect();
    if held.len() < 3 {
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

/// bufferbloat: RTT far above the minimum (at least double it and 5 ms more) in every bin
/// for at least 500 ms and 4 minimum RTTs; the standing queue is the smallest excess over
/// that span (the queue never drained below it).
fn bufferbloat(out: &mut Vec<Diagnosis>, dir: Dir, e: &Evidence, rtt_min: Duration) {
    let Some(t0) = e.rtt.t0 else { return };
    let w = e.rtt.width_ns;
    let thresh = rtt_min.max(Duration::from_millis(5));
    let sustained = Duration::from_millis(500).max(rtt_min * 4);
    let gap_ok_bins = (1_000_000_000 / w.max(1)).max(1);
    let mut runs: Vec<(usize, usize)> = Vec::new();
    let mut cur: Option<(usize, usize)> = None;
    for (k, b) in e.rtt.bins.iter().enumerate() {
        let high = b.1.saturating_sub(rtt_min) >= thresh;
        cur = match (cur, high) {
            (Some((s, last)), true) if b.0 - e.rtt.bins[last].0 <= gap_ok_bins => Some((s, k)),
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
        let (bs, bl) = (&e.rtt.bins[s], &e.rtt.bins[l]);
        let start = at(bs.0);
        let end = at(bl.0 + 1);
        if end - start < sustained || l - s + 1 < 3 {
            continue;
        }
        let excess: Vec<f64> = e.rtt.bins[s..=l]
            .iter()
            .map(|b| ms(b.1.saturating_sub(rtt_min)))
            .collect();
        let standing = excess.iter().copied().fold(f64::INFINITY, f64::min);
        let peak = e.rtt.bins[s..=l]
            .iter()
            .map(|b| ms(b.2))
            .fold(0.0, f64::max);
        out.push(Diagnosis {
            kind: DiagnosisKind::Bufferbloat,
            dir: Some(dir),
            start,
            end,
            delay_ms: standing,
            summary: format!(
                "for {:.1} s the RTT stayed at least {standing:.0} ms above its {:.1} ms minimum (median excess {:.0} ms, peak RTT {peak:.0} ms): a standing queue of {standing:.0} ms",
                (end - start).as_secs_f64(),
                ms(rtt_min),
                median(excess.clone()),
            ),
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
