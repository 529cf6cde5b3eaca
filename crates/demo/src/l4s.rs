//! `latencylab demo l4s`: a video call on a home line that other devices keep busy, three
//! times: behind a FIFO with the call in classic mode (a legacy real-time sender: WebRTC's
//! Google Congestion Control), behind DualPI2 with the call in L4S mode,
//! and behind DualPI2 on a path that bleaches ECN (experiment E6 of the L4S talk).
//!
//! The network: the caller and "other devices" on a home LAN (router `home`), the line to the
//! far side 10 Mbit/s each way with 10 ms each way (20 ms base RTT), the queue discipline on
//! both directions of the line. The far host `remote` answers the call and serves the other
//! devices' downloads: [`DOWNLOADS`] bulk TCP flows (CUBIC, Not-ECT, as most of today's
//! traffic), started before the call so that the line is busy when it begins. Same seed and
//! duration in every run.
//!
//! Measured: the video the caller receives (remote → caller, the direction that shares the
//! downlink's queue with the downloads): per-packet RTT and loss as its sender sees them,
//! frames received per second and stalls at the caller; the downloads' goodput while the call
//! runs; each direction's queue delay, for DualPI2 per queue (summary.json, link logs); the
//! ECN validation's fallback time in the bleached run.
//!
//! This module runs and presents; it does not judge: the experiment's criteria are printed as
//! checks, and the end-to-end test asserts them.

use std::fs;
use std::path::Path;

use anyhow::{bail, Context, Result};
use lab::config::{EcnMode, LabConfig, Side};
use labnet::run_dir::{self, RunDir};
use report::{Axis, Block, Chart, Marks, Rgb, Series};
use serde::Serialize;
use wire::Ecn;

use crate::common::{self, Check};
use crate::params::Args;

/// Round-trip propagation delay of the line, ms (10 ms each way).
pub const BASE_RTT_MS: f64 = 20.0;
/// The line's capacity each way, Mbit/s (the talk's throttled bottleneck).
pub const LINE_MBPS: f64 = 10.0;
/// Run A's queue. The talk's legacy call saw at most 45 ms at a 20 ms base RTT: its bottleneck
/// held at most some 25 ms, which at 10 Mbit/s is about 20 full-size packets. That is the
/// shallow end of home routers (a driver ring and a short transmit queue, no AQM), the kind
/// the talk's "loss above 40 %" comes from: CUBIC flows overflow such a queue every few RTTs
/// and a call's packets are dropped with theirs. A deeper FIFO (the bufferbloat demo's 300
/// packets) would show hundreds of ms of delay and little loss, a different story (E3).
pub const FIFO_QUEUE: &str = "fifo limit 20";
/// Runs B and C: DualPI2 with Linux's defaults (target 15 ms, step threshold 1 ms, k = 2).
pub const DUALQ_QUEUE: &str = "dualpi2";
/// How many bulk downloads the other devices run.
pub const DOWNLOADS: usize = 3;
/// The call's highest bitrate: a 1080p call. The call is alone on the uplink (the downloads
/// only send ACKs there), so it would climb to any cap; 4 Mbit/s leaves the uplink's queue to
/// what the downloads' ACKs and the call's feedback need.
pub const CALL_MAX_RATE: &str = "4mbit";
/// The call's UDP port.
const CALL_PORT: u16 = 6000;
/// When the downloads start, s after the lab.
const DOWNLOADS_START_S: f64 = 0.5;
/// When the caller calls, s after the lab: the downloads have left slow start by then.
pub const CALL_START_S: f64 = 3.0;
/// Queue-delay chart resolution, s.
const QUEUE_BIN_S: f64 = 0.1;
/// "Validation triggers within 3 s".
pub const FALLBACK_LIMIT_S: f64 = 3.0;
/// What the talk allows the L4S call's worst-case RTT on top of its minimum, ms. The talk's
/// test network "has a minimum round-trip time of 20 ms", a figure measured on the call's
/// own packets (so with their serialisation in it); with L4S "the worst-case delay fell
/// below 25 ms": 5 ms above that minimum. The check compares the call's p99 with the call's
/// own measured minimum plus this, the talk's comparison, not with the lab's propagation
/// delay ([`BASE_RTT_MS`]) plus this: at 10 Mbit/s a media packet and its feedback take
/// about 1 ms to serialise, which the propagation delay leaves out and the talk's minimum
/// does not.
pub const SEED_TAIL_ALLOWANCE_MS: f64 = 5.0;
/// "Tens of percent" lost in the classic call's worst second: the talk's legacy call lost
/// more than 40 %.
pub const CLASSIC_WORST_LOSS_PCT: f64 = 20.0;

/// One of the three runs: what its lab, its table column and its charts need.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Variant {
    /// The run's directory and key in `results.json`.
    pub name: &'static str,
    label: &'static str,
    queue: &'static str,
    call_mode: &'static str,
    /// The caller's access hop clears the ECN field both ways.
    bleach: bool,
    color: Rgb,
    /// What the chart of its downlink's queues shows.
    delay_caption: &'static str,
}

pub const CLASSIC: Variant = Variant {
    name: "classic",
    label: "A: classic (FIFO)",
    queue: FIFO_QUEUE,
    call_mode: "classic",
    bleach: false,
    color: common::PAIR_COLORS[0],
    delay_caption: "One FIFO for everything: the call's packets wait behind the downloads' \
                    and are dropped with them when it overflows.",
};
pub const L4S: Variant = Variant {
    name: "l4s",
    label: "B: L4S (DualPI2)",
    queue: DUALQ_QUEUE,
    call_mode: "l4s",
    bleach: false,
    color: common::PAIR_COLORS[1],
    delay_caption: "The call's ECT(1) packets use the L queue, marked from 1 ms of sojourn, \
                    so they wait 2-3 ms at most (a full-size packet already on the wire, \
                    then their own frame's packets ahead of them, 1.2 ms each at 10 Mbit/s); \
                    DualPI2 holds the downloads' C queue about its 15 ms target, so the \
                    longest sojourn of each 100 ms, drawn here, rides above it.",
};
pub const BLEACHED: Variant = Variant {
    name: "bleached",
    label: "C: bleached (DualPI2)",
    bleach: true,
    color: Rgb(0, 158, 115),
    delay_caption: "The access hop clears ECN, so the call's packets arrive as Not-ECT: after \
                    the fallback they share the C queue with the downloads (classic \
                    behaviour, but still DualPI2's short queue).",
    ..L4S
};
/// The runs, in the order of the table's columns.
pub const VARIANTS: [Variant; 3] = [CLASSIC, L4S, BLEACHED];

/// One run's numbers, as `results.json` writes them.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct RunMetrics {
    pub queue: String,
    pub call_mode: String,
    /// Per-packet RTT of the video the caller receives (its sender's samples): the smallest,
    /// the talk's "minimum RTT", which the L4S check adds its allowance to.
    pub call_rtt_min_ms: f64,
    pub call_rtt_p50_ms: f64,
    pub call_rtt_p99_ms: f64,
    /// The same round trips through the network alone, from the captures: the media packet
    /// from the remote's interface to the caller's, and the feedback echoing it back, without
    /// the time either `call` process took to read it (a process waiting for a CPU).
    pub path_rtt_min_ms: f64,
    pub path_rtt_p50_ms: f64,
    pub path_rtt_p99_ms: f64,
    /// Packets of that video lost on the way, as its sender counts them.
    pub call_loss_pct: f64,
    /// The same, in the worst second of the call (its sender's `call_second` lines).
    pub loss_pct_max_per_s: f64,
    /// Share of the call's seconds in which the caller's decoder showed at least 25 frames.
    pub fps_ge25_pct: f64,
    /// Frames the caller's decoder showed in its worst second (0: a whole second frozen).
    pub fps_min: f64,
    /// Gaps of more than 200 ms between complete frames at the caller.
    pub stalls: u64,
    /// Share of the call's time the caller's video was stalled.
    pub stall_pct: f64,
    /// Freezes of the caller's picture (webrtc-stats' `freezeCount`: a gap between shown
    /// frames of at least 3 × their mean gap and 150 ms more than it) and their total length.
    pub freezes: u64,
    pub freeze_s_total: f64,
    /// Of the seconds in which the video's sender saw packets lost, the share beside which (the
    /// caller's second before, the same or the next) the caller's picture froze or showed at
    /// most [`NEAR_ZERO_FPS`] frames; `None` without such seconds.
    pub loss_seconds_frozen_pct: Option<f64>,
    /// Picture-loss indications the caller sent, and keyframes the remote made.
    pub plis: u64,
    pub keyframes: u64,
    /// The downloads' goodput while the call ran, as a share of the line's capacity.
    pub competing_share_pct: f64,
    /// The video's mean received rate, Mbit/s.
    pub call_mbps: f64,
    /// Share of the video's packets that arrived CE-marked.
    pub call_ce_pct: f64,
    /// Queue delay p99 on the downlink and uplink, all packets.
    pub down_queue_delay_p99_ms: f64,
    pub up_queue_delay_p99_ms: f64,
    /// DualPI2 only: the L and C queues' delay p99 on the downlink and uplink.
    pub down_l_delay_p99_ms: Option<f64>,
    pub down_c_delay_p99_ms: Option<f64>,
    pub up_l_delay_p99_ms: Option<f64>,
    pub up_c_delay_p99_ms: Option<f64>,
    /// How far behind schedule the lab's engine delivered packets, p99.
    pub delivery_lateness_p99_ms: f64,
    /// Seconds from the call's start until both endpoints' ECN validation had failed and
    /// they fell back (the later of the two); `None` when either never did.
    pub fallback_s: Option<f64>,
    /// Every second after the fallback brought the caller complete frames (or: no fallback
    /// and every second did).
    pub kept_running: bool,
}

/// `results.json`.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Results {
    pub base_rtt_ms: f64,
    pub duration_s: f64,
    pub classic: RunMetrics,
    pub l4s: RunMetrics,
    pub bleached: RunMetrics,
}

/// What the demo leaves: its results, the terminal table and checks, and where the report is.
pub type Outcome = common::Outcome<Results>;

/// One run's measurements with what the charts need. Times are s since the call started.
struct RunData {
    variant: Variant,
    metrics: RunMetrics,
    /// Per-packet RTT of the received video, ms.
    rtt_ms: Vec<f64>,
    /// (s, frames shown in the second ending at s) at the caller.
    fps: Vec<(f64, f64)>,
    /// The caller's freezes: (start, end), s.
    freezes: Vec<(f64, f64)>,
    /// (s, loss % of the video in the second ending at s), the sender's view.
    loss: Vec<(f64, f64)>,
    /// (s, the downloads' goodput in Mbit/s, all together, per second).
    competing_mbps: Vec<(f64, f64)>,
    /// (s, ms): longest sojourn per bin at the downlink, L side (ECT(1) and CE) and C side.
    down_l_delay: Vec<(f64, f64)>,
    down_c_delay: Vec<(f64, f64)>,
}

/// The lab of one run.
pub fn lab_config(v: Variant, duration_s: f64, seed: u64) -> LabConfig {
    let queue = v.queue;
    let lan = |name: &str, host: &str, bleach: bool| {
        // The home LAN is fast and short: the line is the only bottleneck.
        let mut up = common::direction("1gbit", "0ms", "fifo limit 1000");
        up.params.bleach_ecn = bleach;
        common::link(name, (host, "home"), up.clone(), up)
    };
    let call = |end: &str, mode: &str, duration_s: f64| {
        format!(
            "exec latencylab call {end} --mode {mode} --max-rate {CALL_MAX_RATE} --duration {:.0}ms --rtt-samples",
            duration_s * 1000.0
        )
    };
    let mut programs = vec![
        common::program(
            "bulk-server",
            "remote",
            0.0,
            "exec latencylab bulk-server".into(),
            false,
        ),
        // The listener outlives the caller; the caller's bye ends it.
        common::program(
            "call-remote",
            "remote",
            0.0,
            call(
                &format!("--listen {CALL_PORT}"),
                v.call_mode,
                duration_s + CALL_START_S + 10.0,
            ),
            false,
        ),
        common::program(
            "call-caller",
            "caller",
            CALL_START_S,
            call(
                &format!("--connect remote:{CALL_PORT}"),
                v.call_mode,
                duration_s,
            ),
            true,
        ),
    ];
    for i in 1..=DOWNLOADS {
        // Longer than the call: the line stays busy until the caller hangs up.
        programs.push(common::program(
            &format!("download-{i}"),
            "others",
            DOWNLOADS_START_S,
            format!(
                "exec latencylab bulk-client remote --direction download --duration {:.0}ms",
                (duration_s + CALL_START_S + 2.0) * 1000.0
            ),
            false,
        ));
    }
    let line = |queue: &str| common::direction(&format!("{LINE_MBPS:.0}mbit"), "10ms", queue);
    common::lab(
        seed,
        vec![
            common::host("caller", 1, EcnMode::Passive),
            common::host("others", 2, EcnMode::Passive),
            common::host("remote", 3, EcnMode::Passive),
        ],
        &["home"],
        vec![
            // Run C: the caller's access hop clears the ECN field both ways (an old access
            // point or home router rewriting the TOS byte), before the line on the way out
            // and after it on the way in.
            lan("wifi", "caller", v.bleach),
            lan("lan", "others", false),
            common::link("line", ("home", "remote"), line(queue), line(queue)),
        ],
        programs,
    )
}

/// The three runs: what [`run`] runs and `--export` writes.
pub fn runs(a: &Args) -> Vec<(Variant, common::Run)> {
    let duration_s = a.seconds("duration");
    VARIANTS
        .map(|v| {
            let run = common::Run {
                dir: v.name.into(),
                msg: format!(
                    "{} ({}, call in {} mode), {duration_s:.0} s",
                    v.label, v.queue, v.call_mode
                ),
                expected_s: duration_s + CALL_START_S + 3.0,
                config: lab_config(v, duration_s, a.seed),
            };
            (v, run)
        })
        .into()
}

/// Runs the three labs, reads them back and writes `results.json`, the PNGs and
/// `report.html`.
pub fn run(a: &Args) -> Result<Outcome> {
    let (series, runs) = common::run_series(a, runs(a), (1.0, 4.0), collect)?;
    let results = Results {
        base_rtt_ms: BASE_RTT_MS,
        duration_s: a.seconds("duration"),
        classic: runs[0].metrics.clone(),
        l4s: runs[1].metrics.clone(),
        bleached: runs[2].metrics.clone(),
    };
    let (checks, rows) = (checks(&results), table_rows(&results));
    series.end(results, checks, rows, |r, c| write_outputs(a, r, c, &runs))
}

/// A call endpoint's summary line.
fn call_summary(recs: &[apps::Record], dir: &Path, program: &str) -> Result<apps::Record> {
    recs.iter()
        .rev()
        .find(|r| matches!(r, apps::Record::CallSummary { .. }))
        .cloned()
        .with_context(|| {
            format!(
                "{}: {program} wrote no call_summary (see programs/{program}.err)",
                dir.display()
            )
        })
}

/// Reads one run's outputs back.
fn collect(v: Variant, dir: &Path, result: &lab::RunResult) -> Result<RunData> {
    let caller = common::program_records(dir, "call-caller")?;
    let remote = common::program_records(dir, "call-remote")?;
    let t0 = common::monotonic_start(&caller, dir, "call-caller")?;
    // The remote's clock started before the call: shift its times onto the caller's.
    let remote_shift = common::monotonic_start(&remote, dir, "call-remote")? - t0;

    let apps::Record::CallSummary {
        fps_ge25_pct,
        stalls,
        freezes: freeze_count,
        freeze_s_total,
        plis_sent,
        duration_s: call_s,
        fallback_s: caller_fallback_s,
        ..
    } = call_summary(&caller, dir, "call-caller")?
    else {
        unreachable!("call_summary finds only those");
    };
    let apps::Record::CallSummary {
        loss_pct,
        ce_pct,
        keyframes_sent,
        fallback_s: remote_fallback_s,
        ..
    } = call_summary(&remote, dir, "call-remote")?
    else {
        unreachable!("call_summary finds only those");
    };

    let rtt_ms: Vec<f64> = remote
        .iter()
        .filter_map(|r| match r {
            apps::Record::CallRtt { rtt_ms, .. } => Some(*rtt_ms),
            _ => None,
        })
        .collect();
    let Some(rtt) = apps::Percentiles::of(&rtt_ms) else {
        bail!(
            "{}: the remote end measured no RTT (see programs/call-remote.err)",
            dir.display()
        );
    };

    let mut fps = Vec::new();
    let mut complete = Vec::new();
    let mut frozen_ms = Vec::new();
    let mut call_mbps = Vec::new();
    let mut stall_ms = 0.0;
    for r in &caller {
        if let apps::Record::CallSecond {
            t_s,
            fps_received,
            fps_shown,
            recv_kbps,
            stall_ms: s,
            freeze_ms,
            ..
        } = r
        {
            fps.push((*t_s, *fps_shown as f64));
            complete.push((*t_s, *fps_received as f64));
            frozen_ms.push((*t_s, *freeze_ms, *fps_shown));
            call_mbps.push((*t_s, recv_kbps / 1e3));
            stall_ms += s;
        }
    }
    let freezes: Vec<(f64, f64)> = caller
        .iter()
        .filter_map(|r| match r {
            apps::Record::CallFreeze { t_s, duration_ms } => Some((*t_s, t_s + duration_ms / 1e3)),
            _ => None,
        })
        .collect();
    let loss: Vec<(f64, f64)> = remote
        .iter()
        .filter_map(|r| match r {
            apps::Record::CallSecond { t_s, loss_pct, .. } => {
                let t = t_s + remote_shift;
                (t > 0.0).then_some((t, *loss_pct))
            }
            _ => None,
        })
        .collect();

    // Fallback, on the caller's clock: both ends must have noticed.
    let fallback_s = caller_fallback_s
        .zip(remote_fallback_s)
        .map(|(a, b)| a.max(b + remote_shift));
    let loss_pct_max_per_s = loss.iter().map(|p| p.1).fold(0.0, f64::max);
    let fps_min = fps.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
    let fps_min = if fps_min.is_finite() { fps_min } else { 0.0 };
    let loss_seconds_frozen_pct = loss_seconds_frozen_pct(&loss, &frozen_ms);
    // The call runs while complete frames arrive, whatever the decoder makes of them.
    let after = fallback_s.unwrap_or(0.0);
    let kept_running = complete
        .iter()
        .filter(|(t, _)| *t > after + 1.0)
        .all(|(_, f)| *f > 0.0)
        && complete.iter().any(|(t, _)| *t > after + 1.0);

    let (competing_mbps, competing_share_pct) = competing(dir, t0, call_s)?;
    let path = path_rtts_ms(dir)?;
    let Some(path_rtt) = apps::Percentiles::of(&path) else {
        bail!(
            "{}: no round trip of the call found in the captures",
            dir.display()
        );
    };

    let down = common::link_summary(result, "line", "down")?;
    let up = common::link_summary(result, "line", "up")?;
    let sub = |l: &lab::output::LinkSummary, q: &str| {
        l.queues
            .as_ref()
            .and_then(|m| m.get(q))
            .map(|s| s.queue_delay_ms.p99)
    };
    let down_log = RunDir::new(dir).link_log("line", Side::Down);
    // The L queue's packets (ECT(1) and CE, `l` true) or the C queue's, on the call's clock.
    let delay_series = |l: bool| -> Result<Vec<(f64, f64)>> {
        let log = common::open_link_log(&down_log)?;
        let in_queue = |ecn: Ecn| matches!(ecn, Ecn::Ect1 | Ecn::Ce) == l;
        let name = down_log.display().to_string();
        let s = run_dir::queue_delay_series_of(&name, log, QUEUE_BIN_S, in_queue)?;
        Ok(s.into_iter()
            .map(|(t, y)| (t - CALL_START_S, y))
            .filter(|(t, _)| *t >= -CALL_START_S)
            .collect())
    };
    let call_mean_mbps = if call_mbps.is_empty() {
        0.0
    } else {
        call_mbps.iter().map(|p| p.1).sum::<f64>() / call_mbps.len() as f64
    };

    Ok(RunData {
        variant: v,
        metrics: RunMetrics {
            queue: v.queue.into(),
            call_mode: v.call_mode.into(),
            call_rtt_min_ms: min_of(&rtt_ms),
            call_rtt_p50_ms: rtt.p50,
            call_rtt_p99_ms: rtt.p99,
            path_rtt_min_ms: min_of(&path),
            path_rtt_p50_ms: path_rtt.p50,
            path_rtt_p99_ms: path_rtt.p99,
            call_loss_pct: loss_pct,
            loss_pct_max_per_s,
            fps_ge25_pct,
            fps_min,
            stalls,
            stall_pct: if call_s > 0.0 {
                stall_ms / (call_s * 1e3) * 100.0
            } else {
                0.0
            },
            freezes: freeze_count,
            freeze_s_total,
            loss_seconds_frozen_pct,
            plis: plis_sent,
            keyframes: keyframes_sent,
            competing_share_pct,
            call_mbps: call_mean_mbps,
            call_ce_pct: ce_pct,
            down_queue_delay_p99_ms: down.queue_delay_ms.p99,
            up_queue_delay_p99_ms: up.queue_delay_ms.p99,
            down_l_delay_p99_ms: sub(down, "l"),
            down_c_delay_p99_ms: sub(down, "c"),
            up_l_delay_p99_ms: sub(up, "l"),
            up_c_delay_p99_ms: sub(up, "c"),
            delivery_lateness_p99_ms: result.summary.engine.delivery_lateness_ms.p99,
            fallback_s,
            kept_running,
        },
        rtt_ms,
        fps,
        freezes,
        loss,
        competing_mbps,
        down_l_delay: delay_series(true)?,
        down_c_delay: delay_series(false)?,
    })
}

/// At most this many frames shown in a second is "at or near 0 fps": a frozen second, though
/// a freeze is not counted yet (the picture had not shown five frames since the call began).
pub const NEAR_ZERO_FPS: u64 = 5;

/// Of the seconds in which the sender saw losses (`loss`: (end s, %)), the share with the
/// caller's picture frozen (`frozen`: (end s, freeze ms, frames shown)), by freeze time or by
/// at most [`NEAR_ZERO_FPS`] frames shown, in the second before, the same or the next: the
/// sender learns of a loss a round trip or more after it, and the two programs' seconds do not
/// line up. `None` without a second with losses.
fn loss_seconds_frozen_pct(loss: &[(f64, f64)], frozen: &[(f64, f64, u64)]) -> Option<f64> {
    let lossy: Vec<f64> = loss.iter().filter(|p| p.1 > 0.0).map(|p| p.0).collect();
    if lossy.is_empty() {
        return None;
    }
    let frozen_near = |t: f64| {
        frozen.iter().any(|&(end, ms, shown)| {
            (ms > 0.0 || shown <= NEAR_ZERO_FPS) && end > t - 1.5 && end < t + 1.5
        })
    };
    let hit = lossy.iter().filter(|t| frozen_near(**t)).count();
    Some(100.0 * hit as f64 / lossy.len() as f64)
}

/// The smallest of samples that [`apps::Percentiles::of`] found some in.
fn min_of(samples: &[f64]) -> f64 {
    samples.iter().copied().fold(f64::INFINITY, f64::min)
}

/// The call's UDP payload in a captured IP packet, with whether it goes to the call's port
/// (`true`) or comes from it.
fn call_payload(ip: &[u8]) -> Option<(bool, &[u8])> {
    let udp = wire::packet::udp_datagram(ip)?;
    if udp.dst_port == CALL_PORT {
        Some((true, udp.payload))
    } else if udp.src_port == CALL_PORT {
        Some((false, udp.payload))
    } else {
        None
    }
}

/// The call's datagrams in one host's capture: media sent by the remote (by sequence number:
/// capture time and send_ns), and feedback sent by the caller (by feedback number: capture
/// time and the echoed send_ns values).
type Media = std::collections::HashMap<u64, (u64, u64)>;
type Feedback = std::collections::HashMap<u64, (u64, Vec<u64>)>;

fn call_datagrams(pcap: &Path) -> Result<(Media, Feedback)> {
    use apps::call::packet::Packet;
    let file = fs::File::open(pcap).with_context(|| format!("opening {}", pcap.display()))?;
    let mut reader = analyze::capture::CaptureReader::new(file)
        .with_context(|| format!("reading {}", pcap.display()))?;
    let (mut media, mut feedback) = (Media::new(), Feedback::new());
    while let Some(p) = reader
        .next_packet()
        .with_context(|| format!("reading {}", pcap.display()))?
    {
        let Some((to_call_port, payload)) = call_payload(p.data) else {
            continue;
        };
        let t_ns = p.time.as_nanos();
        match Packet::parse(payload) {
            Ok(Packet::Media(m)) if !to_call_port => {
                media.insert(m.seq, (t_ns, m.send_ns));
            }
            Ok(Packet::Feedback(f)) if to_call_port => {
                feedback.insert(
                    f.fb_seq,
                    (t_ns, f.echoes.iter().map(|e| e.send_ns).collect()),
                );
            }
            _ => {}
        }
    }
    Ok((media, feedback))
}

/// Round trips of the video the caller receives through the network alone, ms: for every
/// media packet a feedback echoed, (arrival at the caller − departure from the remote) +
/// (arrival of the feedback at the remote − its departure from the caller). Both captures
/// are stamped by the lab's one clock.
fn path_rtts_ms(dir: &Path) -> Result<Vec<f64>> {
    let run_dir = RunDir::new(dir);
    let (remote_media, remote_fb) = call_datagrams(&run_dir.capture("remote", "eth0"))?;
    let (caller_media, caller_fb) = call_datagrams(&run_dir.capture("caller", "eth0"))?;
    let by_send: std::collections::HashMap<u64, (u64, u64)> = remote_media
        .iter()
        .map(|(seq, (t, send_ns))| (*send_ns, (*seq, *t)))
        .collect();
    let mut out = Vec::new();
    for (fb_seq, (fb_out, echoes)) in &caller_fb {
        let Some((fb_in, _)) = remote_fb.get(fb_seq) else {
            continue;
        };
        for send_ns in echoes {
            let Some((seq, media_out)) = by_send.get(send_ns) else {
                continue;
            };
            let Some((media_in, _)) = caller_media.get(seq) else {
                continue;
            };
            let down = media_in.saturating_sub(*media_out);
            let up = fb_in.saturating_sub(*fb_out);
            out.push((down + up) as f64 / 1e6);
        }
    }
    Ok(out)
}

/// The downloads' goodput while the call ran: per second (all downloads together, binned by
/// the end of each receiver interval on the caller's clock) and as a share of the line.
/// Only intervals wholly inside `[0, call_s]` count, each download over its own covered time.
fn competing(dir: &Path, t0: f64, call_s: f64) -> Result<(Vec<(f64, f64)>, f64)> {
    let mut per_second: Vec<f64> = Vec::new();
    let mut share_mbps = 0.0;
    for i in 1..=DOWNLOADS {
        let name = format!("download-{i}");
        let recs = common::program_records(dir, &name)?;
        let shift = common::monotonic_start(&recs, dir, &name)? - t0;
        let (mut bytes, mut covered_s) = (0u64, 0.0);
        for r in &recs {
            let apps::Record::Interval {
                t_s,
                role,
                interval_s,
                bytes: b,
                ..
            } = r
            else {
                continue;
            };
            if role != "receiver" {
                continue;
            }
            let end = t_s + shift;
            if end - interval_s < 0.0 || end > call_s {
                continue;
            }
            bytes += b;
            covered_s += interval_s;
            let bin = end.ceil().max(1.0) as usize - 1;
            if per_second.len() <= bin {
                per_second.resize(bin + 1, 0.0);
            }
            per_second[bin] += *b as f64 * 8.0 / 1e6 / interval_s;
        }
        if covered_s > 0.0 {
            share_mbps += bytes as f64 * 8.0 / 1e6 / covered_s;
        }
    }
    let series = per_second
        .iter()
        .enumerate()
        .map(|(i, m)| ((i + 1) as f64, *m))
        .collect();
    Ok((series, share_mbps / LINE_MBPS * 100.0))
}

/// The expectations, on these numbers.
pub fn checks(r: &Results) -> Vec<Check> {
    let (a, b, c) = (&r.classic, &r.l4s, &r.bleached);
    let allow = SEED_TAIL_ALLOWANCE_MS;
    let ck = |what: String, passed: bool| Check { what, passed };
    vec![
        ck(
            format!(
                "L4S: call RTT p99 {:.1} ms < its minimum {:.1} ms + {allow:.0} ms (seed: \
                 minimum 20 ms, worst case under 25 ms)",
                b.call_rtt_p99_ms, b.call_rtt_min_ms
            ),
            b.call_rtt_p99_ms < b.call_rtt_min_ms + allow,
        ),
        ck(
            format!(
                "L4S: the path's RTT p99 for the call {:.1} ms < its minimum {:.1} ms + \
                 {allow:.0} ms (from the captures, without the endpoints' scheduling)",
                b.path_rtt_p99_ms, b.path_rtt_min_ms
            ),
            b.path_rtt_p99_ms < b.path_rtt_min_ms + allow,
        ),
        ck(
            format!("L4S: call loss {:.2} % < 1 %", b.call_loss_pct),
            b.call_loss_pct < 1.0,
        ),
        ck(
            format!(
                "L4S: ≥ 25 fps shown in {:.0} % of seconds (≥ 95 %)",
                b.fps_ge25_pct
            ),
            b.fps_ge25_pct >= 95.0,
        ),
        ck(format!("L4S: no stall ({})", b.stalls), b.stalls == 0),
        ck(
            format!(
                "L4S: the picture never freezes ({} freezes, {:.1} s)",
                b.freezes, b.freeze_s_total
            ),
            b.freezes == 0,
        ),
        ck(
            format!(
                "L4S: the downloads keep {:.0} % of the line (≥ 40 %)",
                b.competing_share_pct
            ),
            b.competing_share_pct >= 40.0,
        ),
        ck(
            format!(
                "classic: call RTT p99 {:.1} ms markedly worse than L4S's {:.1} ms (≥ 10 ms more)",
                a.call_rtt_p99_ms, b.call_rtt_p99_ms
            ),
            a.call_rtt_p99_ms >= b.call_rtt_p99_ms + 10.0,
        ),
        ck(
            format!(
                "classic: loss ({:.2} %) or stalls ({}) appear",
                a.call_loss_pct, a.stalls
            ),
            a.call_loss_pct >= 1.0 || a.stalls > 0,
        ),
        ck(
            format!(
                "classic: the worst second loses tens of percent of the call's packets, as the \
                 seed's legacy call (over 40 %): {:.1} % (≥ {CLASSIC_WORST_LOSS_PCT:.0} %)",
                a.loss_pct_max_per_s
            ),
            a.loss_pct_max_per_s >= CLASSIC_WORST_LOSS_PCT,
        ),
        ck(
            format!(
                "classic: the picture freezes when losses hit its frames: {} freezes, {:.1} s in \
                 all; {} of the seconds with losses froze or showed at most {NEAR_ZERO_FPS} \
                 frames (≥ 90 %)",
                a.freezes,
                a.freeze_s_total,
                a.loss_seconds_frozen_pct
                    .map_or("none".to_string(), |p| format!("{p:.0} %"))
            ),
            a.freezes > 0 && a.loss_seconds_frozen_pct.is_some_and(|p| p >= 90.0),
        ),
        ck(
            format!(
                "classic: the received video freezes for a whole second (0 fps) at times, as the \
                 seed's: fewest frames shown in a second {:.0}",
                a.fps_min
            ),
            a.fps_min == 0.0,
        ),
        ck(
            format!(
                "bleached: ECN validation failed and both ends fell back within {FALLBACK_LIMIT_S:.0} s ({})",
                c.fallback_s
                    .map_or("never".to_string(), |s| format!("after {s:.2} s"))
            ),
            c.fallback_s.is_some_and(|s| s <= FALLBACK_LIMIT_S),
        ),
        ck(
            "bleached: the call kept running (frames every second after the fallback)".into(),
            c.kept_running,
        ),
    ]
}

/// What the page says of run A against the talk's legacy call.
fn classic_note(a: &RunMetrics) -> String {
    let mut note = format!(
        "Run A's call follows WebRTC's Google Congestion Control (draft-ietf-rmcat-gcc), a \
         legacy real-time sender: it keeps its rate through up to 10 % loss. Its worst second \
         lost {:.1} % of its packets. Each frame needs the one before it, so a lost packet \
         freezes the picture until a keyframe: the caller asked for one {} times, its picture \
         froze {} times, {:.1} s in all, and its worst second showed {:.0} frames.",
        a.loss_pct_max_per_s, a.plis, a.freezes, a.freeze_s_total, a.fps_min
    );
    if a.loss_pct_max_per_s < CLASSIC_WORST_LOSS_PCT {
        note.push_str(
            " The seed's legacy call lost over 40 % at times. Here the FIFO drops what the \
             CUBIC downloads make it drop, a few percent, whatever the call does; tens of \
             percent need a bottleneck offered far more than it carries for seconds \
             (unresponsive traffic, many flows in slow start, a link that slows down), which \
             this lab does not have. docs/demos.md says more.",
        );
    }
    note
}

/// B's delivery lateness p99 from which the page says the engine, not the network, made B's
/// tail: a fifth of the talk's 5 ms allowance, on at least 1 % of the packets.
const LATE_ENGINE_P99_MS: f64 = 1.0;

/// What the page says when run B's path tail is over the talk's bound while the lab's engine
/// was late: the machine could not run the lab on time, and the queue's own delay says so.
fn late_engine_note(b: &RunMetrics) -> Option<String> {
    let over = b.path_rtt_p99_ms >= b.path_rtt_min_ms + SEED_TAIL_ALLOWANCE_MS;
    (over && b.delivery_lateness_p99_ms >= LATE_ENGINE_P99_MS).then(|| {
        format!(
            "Run B's path RTT p99 ({:.1} ms) is over its bound while the lab's engine wrote 1 % \
             of all packets into their hosts {:.1} ms or more after their time (its L queue's \
             own p99 on the downlink: {}). The lab could not get a CPU on time: another load \
             on this machine's cores, not the queue, made that tail (docs/demos.md, \"Was B's \
             engine late because of DualPI2?\"). Run it again on a quieter machine.",
            b.path_rtt_p99_ms,
            b.delivery_lateness_p99_ms,
            b.down_l_delay_p99_ms
                .map_or("not measured".into(), |d| format!("{d:.1} ms"))
        )
    })
}

/// The side-by-side table: header and rows, for the terminal and the page alike.
pub fn table_rows(r: &Results) -> (Vec<String>, Vec<Vec<String>>) {
    let runs = [
        (CLASSIC.label, &r.classic),
        (L4S.label, &r.l4s),
        (BLEACHED.label, &r.bleached),
    ];
    let (header, row) = common::run_columns(&runs);
    let opt = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.1}"));
    let fixed = |decimals: usize, x: f64| format!("{x:.decimals$}");
    let rows = vec![
        row("call RTT min (ms)", &|m| fixed(1, m.call_rtt_min_ms)),
        row("call RTT p50 (ms)", &|m| fixed(1, m.call_rtt_p50_ms)),
        row("call RTT p99 (ms)", &|m| fixed(1, m.call_rtt_p99_ms)),
        row("  the path alone, min (ms)", &|m| {
            fixed(1, m.path_rtt_min_ms)
        }),
        row("  the path alone, p50 (ms)", &|m| {
            fixed(1, m.path_rtt_p50_ms)
        }),
        row("  the path alone, p99 (ms)", &|m| {
            fixed(1, m.path_rtt_p99_ms)
        }),
        row("call loss (%)", &|m| fixed(2, m.call_loss_pct)),
        row("  in the worst second (%)", &|m| {
            fixed(1, m.loss_pct_max_per_s)
        }),
        row("seconds with ≥ 25 fps shown (%)", &|m| {
            fixed(0, m.fps_ge25_pct)
        }),
        row("fewest frames shown in a second", &|m| fixed(0, m.fps_min)),
        row("freezes of the picture", &|m| m.freezes.to_string()),
        row("  time frozen (s)", &|m| fixed(1, m.freeze_s_total)),
        row("  keyframe requests (PLI)", &|m| m.plis.to_string()),
        row("stalls (no complete frame)", &|m| m.stalls.to_string()),
        row("time stalled (%)", &|m| pct_words(m.stall_pct)),
        row("call video received (Mbit/s)", &|m| fixed(2, m.call_mbps)),
        row("call packets CE-marked (%)", &|m| fixed(1, m.call_ce_pct)),
        row("downloads' share of the line (%)", &|m| {
            fixed(0, m.competing_share_pct)
        }),
        row("downlink queue delay p99 (ms)", &|m| {
            fixed(1, m.down_queue_delay_p99_ms)
        }),
        row("  L queue p99 (ms)", &|m| opt(m.down_l_delay_p99_ms)),
        row("  C queue p99 (ms)", &|m| opt(m.down_c_delay_p99_ms)),
        row("uplink queue delay p99 (ms)", &|m| {
            fixed(1, m.up_queue_delay_p99_ms)
        }),
        row("  L queue p99 (ms)", &|m| opt(m.up_l_delay_p99_ms)),
        row("lab delivery lateness p99 (ms)", &|m| {
            fixed(2, m.delivery_lateness_p99_ms)
        }),
        row("ECN fallback after (s)", &|m| opt(m.fallback_s)),
    ];
    (header, rows)
}

fn write_outputs(a: &Args, r: &Results, checks: &[Check], runs: &[RunData]) -> Result<()> {
    let mut page = common::Report::new(
        "L4S: a video call beside busy downloads",
        format!(
            "A {LINE_MBPS:.0} Mbit/s line each way with a {BASE_RTT_MS:.0} ms base RTT; a two-way \
             video call (30 fps, up to {CALL_MAX_RATE}) while {DOWNLOADS} CUBIC downloads from other \
             devices share the line; {:.0} s of call per run, seed {}. A: FIFO ({FIFO_QUEUE}), call \
             in classic mode (ECT(0), a legacy rate controller: WebRTC's GCC, which holds its rate \
             through up to 10 % loss). B: DualPI2, call in L4S mode (ECT(1), scalable congestion control). \
             C: as B, but the caller's access hop clears the ECN field.",
            r.duration_s, a.seed
        ),
        table_rows(r),
        "The call's numbers are about the video the caller receives (it crosses the downlink \
         with the downloads): RTT and loss as its sender measures them, each packet timed when \
         it reached the socket (not when the call process got a CPU to read it), frames and \
         stalls at the caller. The path alone is the same round trips timed in the captures, \
         at the hosts' interfaces. Queue delays are the line's, from summary.json.",
        common::findings(checks),
    );
    for n in std::iter::once(classic_note(&r.classic)).chain(late_engine_note(&r.l4s)) {
        page.note(n);
    }
    let row = page.row(vec![
        ("rtt-cdf", rtt_cdf(runs), false),
        ("loss", loss_chart(runs), false),
    ])?;
    page.section("Round-trip time and loss", "", vec![row]);
    let fps = page.figure("fps", fps_chart(runs), false)?;
    page.section("What the caller saw", "", vec![Block::Figure(fps)]);
    let ids: Vec<String> = runs
        .iter()
        .map(|r| format!("delay-{}", r.variant.name))
        .collect();
    let delay = ids.iter().zip(delay_charts(runs));
    let row = page.row(delay.map(|(id, c)| (id.as_str(), c, false)).collect())?;
    page.section("The bottleneck's queues", "", vec![row]);
    let share = page.figure("share", share_chart(runs), false)?;
    page.section("The other devices' share", "", vec![Block::Figure(share)]);
    page.files(&[
        "classic/, l4s/, bleached/: each run's lab output: captures/*.pcap, links/*.log (every \
         packet's queue events, with its ECN field), summary.json, lab.json, programs/*.out \
         (the call's and the downloads' JSON lines; call-remote.out has every RTT sample)",
    ]);
    page.write(&a.out_dir, r)
}

/// A per-second series drawn as steps over each second `[t − 1, t)`.
fn seconds_steps(v: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut s: Vec<(f64, f64)> = v.iter().map(|&(t, y)| (t - 1.0, y)).collect();
    if let Some(&(t, y)) = v.last() {
        s.push((t, y));
    }
    s
}

/// One per-second series of every run (`series`) as steps, under `title`, up the axis `y`.
fn per_second_chart(
    runs: &[RunData],
    title: &str,
    y: Axis,
    caption: impl Into<String>,
    series: impl Fn(&RunData) -> &[(f64, f64)],
) -> Chart {
    let x = Axis::new("time since the call started", "s");
    let mut c = Chart::new(title, x, y.from_zero()).caption(caption);
    for r in runs {
        let steps = seconds_steps(series(r));
        c.push(Series::step(r.variant.label, r.variant.color, steps).keep_in_legend());
    }
    c
}

/// The end of the longest call, s.
fn call_end_s(runs: &[RunData]) -> f64 {
    runs.iter()
        .flat_map(|r| r.fps.iter().map(|p| p.0))
        .fold(1.0, f64::max)
}

fn rtt_cdf(runs: &[RunData]) -> Chart {
    let mut cdf = Chart::cdf(
        "Round-trip time of the call's packets, distribution",
        Axis::new("per-packet round-trip time", "ms").from_zero(),
        "packets",
    )
    .caption(format!(
        "A point (x, y) says y % of the received video's packets took at most x ms there \
         and back. The line's base RTT is {BASE_RTT_MS:.0} ms: with L4S the curve rises \
         just right of it, behind the FIFO it spreads over the queue the downloads keep. \
         The black line is the seed's bound on the L4S call's worst case: its own minimum \
         RTT plus {SEED_TAIL_ALLOWANCE_MS:.0} ms (the seed: minimum 20 ms, worst case \
         under 25 ms); B's curve should reach 99 % left of it."
    ));
    for r in runs {
        cdf.push(Series::cdf(r.variant.label, r.variant.color, &r.rtt_ms));
    }
    let base = format!("base RTT ({BASE_RTT_MS:.0} ms)");
    cdf.push(Series::vline(base, Rgb::GREY, BASE_RTT_MS, (0.0, 100.0)).keep_in_legend());
    if let Some(b) = runs.iter().find(|r| r.variant == L4S) {
        let x = b.metrics.call_rtt_min_ms + SEED_TAIL_ALLOWANCE_MS;
        let name = format!(
            "B's minimum + {SEED_TAIL_ALLOWANCE_MS:.0} ms ({x:.1} ms): the seed's worst case"
        );
        cdf.push(Series::vline(name, Rgb::BLACK, x, (0.0, 100.0)).keep_in_legend());
    }
    cdf
}

fn loss_chart(runs: &[RunData]) -> Chart {
    per_second_chart(
        runs,
        "Loss of the call's packets per second",
        Axis::new("packets lost", "%"),
        "As the video's sender learns it from the receiver's feedback: the FIFO drops the \
         call's packets with the downloads' (the classic call's GCC rides through a few \
         percent without slowing down); DualPI2 marks them instead.",
        |r| &r.loss,
    )
}

fn fps_chart(runs: &[RunData]) -> Chart {
    let mut fps = per_second_chart(
        runs,
        "Frames the caller's decoder showed per second",
        Axis::new("frames shown", "fps"),
        "The video is sent at 30 fps; a frame is shown when all its packets arrived and so \
         did every frame it depends on back to a keyframe. The bars above the curves are \
         the freezes of each run's picture (a gap between shown frames of at least 3 times \
         the mean gap and 150 ms more): behind the FIFO each lost packet freezes the \
         picture until the keyframe the caller asks for; with L4S the rate stays at the \
         top and the picture runs.",
        |r| &r.fps,
    );
    let end = call_end_s(runs);
    fps.push(Series::hline("25 fps", Rgb::GREY, 25.0, (0.0, end)).keep_in_legend());
    // One band per run above the curves, one bar per freeze.
    for (i, r) in runs.iter().enumerate() {
        let y = 33.0 + 1.5 * i as f64;
        let bars = r.freezes.iter().map(|&(a, b)| ((a, y), (b, y))).collect();
        let name = format!("{}: frozen", r.variant.label);
        let s = Series::new(name, r.variant.color, Marks::Segments(bars));
        fps.push(s.stroke(5).keep_in_legend());
    }
    fps
}

fn share_chart(runs: &[RunData]) -> Chart {
    let mut share = per_second_chart(
        runs,
        "The other devices' downloads while the call runs",
        Axis::new("goodput of all downloads", "Mbit/s"),
        format!(
            "{DOWNLOADS} CUBIC downloads together, per second. The call takes its part of the \
             {LINE_MBPS:.0} Mbit/s line in every run; the downloads keep the rest."
        ),
        |r| &r.competing_mbps,
    );
    let (y, end) = (0.4 * LINE_MBPS, call_end_s(runs));
    share.push(Series::hline("40 % of the line", Rgb::GREY, y, (0.0, end)).keep_in_legend());
    share
}

/// Each run's downlink queues, L and C, on one scale.
fn delay_charts(runs: &[RunData]) -> Vec<Chart> {
    let mut delay: Vec<Chart> = runs
        .iter()
        .map(|r| {
            let line = |name: &str, color, points: &[(f64, f64)]| {
                Series::line(name, color, points.to_vec()).keep_in_legend()
            };
            Chart::new(
                format!("Downlink queue delay, {}", r.variant.label),
                Axis::new("time since the call started", "s"),
                Axis::new("longest sojourn per 100 ms", "ms").from_zero(),
            )
            .caption(r.variant.delay_caption)
            .with(line("L queue (ECT(1), CE)", Rgb::nth(0), &r.down_l_delay))
            .with(line(
                "C queue (Not-ECT, ECT(0))",
                Rgb::nth(1),
                &r.down_c_delay,
            ))
        })
        .collect();
    report::same_scale(&mut delay);
    delay
}

/// A share in per cent for the table: one decimal, but a stall that happened never shows as
/// `0.0` beside a count of one.
fn pct_words(pct: f64) -> String {
    if pct > 0.0 && pct < 0.05 {
        "< 0.1".into()
    } else {
        format!("{pct:.1}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_payload_tells_the_direction_by_the_call_port_and_skips_other_udp() {
        let v4 = wire::build::Ip::v4([10, 0, 0, 1].into(), [10, 0, 0, 2].into());
        let v6 = wire::build::Ip::v6("fd00::1".parse().unwrap(), "fd00::2".parse().unwrap());
        for ip in [v4, v6] {
            let to_call = ip.udp(40000, CALL_PORT, b"F1");
            assert_eq!(call_payload(&to_call), Some((true, &b"F1"[..])));
            let from_call = ip.udp(CALL_PORT, 40000, b"M1");
            assert_eq!(call_payload(&from_call), Some((false, &b"M1"[..])));
            assert_eq!(call_payload(&ip.udp(40000, 53, b"dns")), None);
        }
    }

    #[test]
    fn a_second_with_losses_counts_as_frozen_when_a_freeze_is_next_to_it() {
        let loss = [(1.0, 0.0), (2.0, 3.0), (3.0, 0.0), (5.0, 1.0), (9.0, 2.0)];
        // Caller's seconds: frozen in the one ending at 2.9 (beside 2.0) and 6.1 (beside 5.0);
        // 8.9 and 9.9 showed frames and froze nothing.
        let frozen = [
            (1.9, 0.0, 30),
            (2.9, 250.0, 20),
            (6.1, 40.0, 28),
            (8.9, 0.0, 24),
            (9.9, 0.0, 30),
        ];
        let p = loss_seconds_frozen_pct(&loss, &frozen).unwrap();
        assert!((p - 200.0 / 3.0).abs() < 1e-9, "{p}");
        // A second at 2 fps is frozen too, freeze or not.
        let mut near_zero = frozen;
        near_zero[3].2 = 2;
        assert_eq!(loss_seconds_frozen_pct(&loss, &near_zero), Some(100.0));
        assert_eq!(loss_seconds_frozen_pct(&[(1.0, 0.0)], &frozen), None);
    }

    #[test]
    fn a_short_stall_is_not_printed_as_no_time_stalled() {
        assert_eq!(pct_words(0.0), "0.0");
        assert_eq!(pct_words(0.02), "< 0.1");
        assert_eq!(pct_words(1.26), "1.3");
    }

    fn metrics(rtt_p99: f64, loss: f64, stalls: u64, share: f64) -> RunMetrics {
        RunMetrics {
            queue: "q".into(),
            call_mode: "l4s".into(),
            call_rtt_min_ms: 21.0,
            call_rtt_p50_ms: 21.0,
            call_rtt_p99_ms: rtt_p99,
            path_rtt_min_ms: 21.0,
            path_rtt_p50_ms: 21.0,
            path_rtt_p99_ms: rtt_p99,
            call_loss_pct: loss,
            loss_pct_max_per_s: 2.0 * loss,
            fps_ge25_pct: 100.0,
            fps_min: 28.0,
            stalls,
            stall_pct: 0.0,
            freezes: 0,
            freeze_s_total: 0.0,
            loss_seconds_frozen_pct: None,
            plis: 0,
            keyframes: 1,
            competing_share_pct: share,
            call_mbps: 3.0,
            call_ce_pct: 5.0,
            down_queue_delay_p99_ms: 1.0,
            up_queue_delay_p99_ms: 1.0,
            down_l_delay_p99_ms: None,
            down_c_delay_p99_ms: None,
            up_l_delay_p99_ms: None,
            up_c_delay_p99_ms: None,
            delivery_lateness_p99_ms: 0.1,
            fallback_s: None,
            kept_running: true,
        }
    }

    #[test]
    fn checks_pass_when_l4s_keeps_the_call_near_the_base_rtt_and_the_fallback_is_quick() {
        let mut c = metrics(30.0, 0.5, 0, 60.0);
        c.fallback_s = Some(0.4);
        let mut a = metrics(45.0, 12.0, 2, 60.0);
        a.loss_pct_max_per_s = 41.0;
        a.fps_min = 0.0;
        (a.freezes, a.loss_seconds_frozen_pct) = (3, Some(100.0));
        let r = Results {
            base_rtt_ms: 20.0,
            duration_s: 30.0,
            classic: a,
            l4s: metrics(23.0, 0.0, 0, 55.0),
            bleached: c,
        };
        assert!(checks(&r).iter().all(|c| c.passed), "{:?}", checks(&r));
    }

    #[test]
    fn the_page_explains_a_classic_run_short_of_the_seed_and_only_then() {
        let mut a = metrics(45.0, 2.0, 0, 60.0);
        a.loss_pct_max_per_s = 3.4;
        (a.plis, a.freezes, a.freeze_s_total, a.fps_min) = (9, 7, 4.25, 0.0);
        let note = classic_note(&a);
        assert!(
            note.contains("lost 3.4 %")
                && note.contains("asked for one 9 times, its picture froze 7 times, 4.2 s")
                && note.contains("showed 0 frames"),
            "{note}"
        );
        assert!(note.contains("over 40 %"), "{note}");
        a.loss_pct_max_per_s = 45.0;
        assert!(!classic_note(&a).contains("over 40 %"));
    }

    #[test]
    fn the_page_blames_the_machine_for_b_s_tail_only_when_the_engine_was_late() {
        let mut b = metrics(30.0, 0.0, 0, 60.0);
        b.path_rtt_min_ms = 21.0;
        b.path_rtt_p99_ms = 29.7;
        b.down_l_delay_p99_ms = Some(2.8);
        b.delivery_lateness_p99_ms = 3.4;
        let note = late_engine_note(&b).expect("a note");
        assert!(
            note.contains("(29.7 ms)") && note.contains("3.4 ms") && note.contains("2.8 ms"),
            "{note}"
        );
        // An engine on time: the tail is the network's, and no excuse is printed.
        b.delivery_lateness_p99_ms = 0.06;
        assert_eq!(late_engine_note(&b), None);
        // A tail within the bound needs no note, however late the engine.
        b.delivery_lateness_p99_ms = 3.4;
        b.path_rtt_p99_ms = 25.9;
        assert_eq!(late_engine_note(&b), None);
    }

    #[test]
    fn checks_fail_on_a_slow_l4s_tail_a_lossless_classic_run_and_no_fallback() {
        let r = Results {
            base_rtt_ms: 20.0,
            duration_s: 30.0,
            classic: metrics(45.0, 0.0, 0, 60.0),
            l4s: metrics(36.0, 0.0, 0, 55.0),
            bleached: metrics(30.0, 0.0, 0, 60.0),
        };
        let failed: Vec<_> = checks(&r).into_iter().filter(|c| !c.passed).collect();
        // RTT p99 over min + 5 ms (measured and the path's), classic not 10 ms worse, classic
        // without loss or stall, no bad second in it, no freeze, no fallback.
        assert_eq!(failed.len(), 8, "{failed:?}");
    }

    #[test]
    fn the_l4s_tail_is_judged_against_the_calls_own_minimum_not_the_propagation_delay() {
        let mut a = metrics(45.0, 12.0, 2, 60.0);
        (a.loss_pct_max_per_s, a.fps_min) = (41.0, 0.0);
        (a.freezes, a.loss_seconds_frozen_pct) = (3, Some(100.0));
        let mut c = metrics(30.0, 0.5, 0, 60.0);
        c.fallback_s = Some(0.4);
        // 25.4 ms over a 20 ms line: 1 ms of it is serialisation, in every sample.
        let mut b = metrics(25.4, 0.0, 0, 55.0);
        (b.call_rtt_min_ms, b.path_rtt_min_ms) = (21.1, 21.0);
        let mut r = Results {
            base_rtt_ms: 20.0,
            duration_s: 30.0,
            classic: a,
            l4s: b,
            bleached: c,
        };
        assert!(checks(&r).iter().all(|c| c.passed), "{:?}", checks(&r));
        // The same tail over a minimum of 20.3 ms is 5.1 ms of queueing: both RTT checks fail.
        (r.l4s.call_rtt_min_ms, r.l4s.path_rtt_min_ms) = (20.3, 20.3);
        let failed: Vec<_> = checks(&r).into_iter().filter(|c| !c.passed).collect();
        assert_eq!(failed.len(), 2, "{failed:?}");
        assert!(failed
            .iter()
            .all(|c| c.what.contains("< its minimum 20.3 ms + 5 ms")));
    }

    #[test]
    fn the_bleached_lab_clears_ecn_only_on_the_callers_hop_and_waits_for_the_caller() {
        let cfg = lab_config(BLEACHED, 12.0, 1);
        cfg.validate().unwrap();
        let bleached: Vec<_> = cfg
            .links
            .iter()
            .filter(|l| l.up.params.bleach_ecn || l.down.params.bleach_ecn)
            .map(|l| l.name.as_str())
            .collect();
        assert_eq!(bleached, ["wifi"]);
        let line = cfg.links.iter().find(|l| l.name == "line").unwrap();
        let dualq = common::direction("1mbit", "0ms", DUALQ_QUEUE).queue;
        assert_eq!((&line.up.queue, &line.down.queue), (&dualq, &dualq));
        let waited: Vec<_> = cfg.programs.iter().filter(|p| p.wait).collect();
        assert_eq!(waited.len(), 1);
        assert!(waited[0].run.contains("--connect remote:6000 --mode l4s"));
        assert!(waited[0].run.contains("--duration 12000ms"));
        let classic = lab_config(CLASSIC, 12.0, 1);
        assert!(classic
            .links
            .iter()
            .all(|l| !l.up.params.bleach_ecn && !l.down.params.bleach_ecn));
        assert!(classic
            .programs
            .iter()
            .any(|p| p.run.contains("--mode classic")));
    }
}
