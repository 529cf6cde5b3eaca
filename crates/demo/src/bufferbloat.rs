//! `latencylab demo bufferbloat`: the same home line twice, once with a FIFO queue of a home
//! gateway's depth and once with CoDel + ECN, a streaming-video transfer and a latency probe
//! in both (experiment E3 of the 2015 talk).
//!
//! The line: 10 Mbit/s down, 1 Mbit/s up, 10 ms each way (20 ms base RTT), the queue
//! discipline on both directions of the gateway. The server streams 8 Mbit/s video with 30 s
//! of read-ahead allowed, so the transfer keeps the downlink full for the whole run (a video
//! server filling the player's buffer); the probe sends a UDP ping and a small TCP request
//! every 100 ms. Run A is the FIFO, run B CoDel (target 5 ms, interval 100 ms) marking ECN,
//! with ECN requested by both hosts' TCP. Same seed, same duration.
//!
//! Measured: the probe's UDP RTT (what a game or a call beside the download would see), the
//! bottleneck's queue delay and drops (link log, `summary.json`), CE marks and the sender's
//! CWR replies (the analyzer on the server's capture, the sender-side view), the stream
//! receiver's goodput, longest gap between in-order deliveries and playback stalls.
//!
//! This module runs and presents; it does not judge: the experiment's criteria are printed as
//! checks, and the end-to-end test asserts them.

use std::path::Path;

use analyze::{Analysis, Connection, Dir};
use anyhow::{bail, Context, Result};
use lab::config::{EcnMode, LabConfig, Side};
use labnet::run_dir::{self, RunDir};
use report::tsg::TimeSequence;
use report::{Axis, Block, Chart, Rgb, Series};
use serde::Serialize;

use crate::common::{self, Check};
use crate::params::Args;

/// Round-trip propagation delay of the line, ms (10 ms each way).
pub const BASE_RTT_MS: f64 = 20.0;
/// The downlink's capacity, Mbit/s.
pub const DOWN_MBPS: f64 = 10.0;
/// Run A's queue. A 300-packet FIFO holds 360 ms at 10 Mbit/s, within the 100-500 ms that
/// home gateways and cable/DSL modems commonly buffer, and CUBIC's sawtooth keeps some
/// 200-300 packets standing in it (the talk's "~200 packets queued"). Linux's default of 1000
/// packets (1.2 s) bloats more, but CUBIC leaves slow start early (HyStart) and needs some 15 s
/// to fill it, so a short run would show no loss at all; 200 packets overflow sooner but make
/// the FIFO's delivery gaps (one bloated RTT) too close to the scheduling hiccups of a busy
/// machine for the comparison with CoDel to be clear.
pub const FIFO_QUEUE: &str = "fifo limit 300";
/// Run B's queue: CoDel with Linux's defaults, marking ECN-capable packets instead of dropping.
pub const CODEL_QUEUE: &str = "codel target 5ms interval 100ms ecn";
/// The stream's port (stream-server's default), to find its connection in the capture.
const STREAM_PORT: u16 = 5203;
/// When the clients start, s after the lab: the servers are listening by then.
const CLIENT_START_S: f64 = 0.5;
/// Queue-delay chart resolution, s.
const QUEUE_BIN_S: f64 = 0.1;
/// The runs: directory, label, queue and the hosts' ECN, the FIFO first.
const RUNS: [(&str, &str, &str, EcnMode); 2] = [
    ("fifo", "FIFO", FIFO_QUEUE, EcnMode::Passive),
    ("codel", "CoDel + ECN", CODEL_QUEUE, EcnMode::On),
];

/// One run's numbers, as `results.json` writes them.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct RunMetrics {
    pub queue: String,
    /// The stream receiver's goodput (bytes read by the application), Mbit/s.
    pub goodput_mbps: f64,
    /// The probe's UDP round-trip times.
    pub rtt_p50_ms: f64,
    pub rtt_p95_ms: f64,
    pub rtt_p99_ms: f64,
    /// UDP probes never answered (within the probe's 1 s timeout).
    pub probe_lost: u64,
    /// Sojourn of packets in the downlink's queue.
    pub queue_delay_p95_ms: f64,
    /// Packets the downlink's queue dropped (tail drops for the FIFO, AQM drops for CoDel).
    pub drops: u64,
    /// Packets the downlink's queue marked CE.
    pub ce_marks: u64,
    /// Stream packets the sender sent with CWR (its replies to the receiver's ECE).
    pub cwr: u64,
    /// Longest time between two reads that returned stream data at the receiver.
    pub longest_gap_ms: f64,
    /// Longest time the receiver's cumulative ACK stood still while stream data was
    /// outstanding, in the sender's capture: in-order delivery held back on the wire. Unlike
    /// `longest_gap_ms` it does not grow when the receiving program is scheduled late, since
    /// the kernel acknowledges without it (after its delayed-ACK timeout at worst).
    pub ack_stall_ms: f64,
    /// Playback stalls of the stream's player model.
    pub stalls: u64,
}

/// `results.json`.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Results {
    pub base_rtt_ms: f64,
    pub duration_s: f64,
    pub fifo: RunMetrics,
    pub codel: RunMetrics,
}

/// What the demo leaves: its results, the terminal table and checks, and where the report is.
pub type Outcome = common::Outcome<Results>;

/// One run's measurements with what the charts need.
struct RunData {
    label: &'static str,
    metrics: RunMetrics,
    analysis: Analysis,
    /// Index of the stream's connection in `analysis.connections`, and the direction of its
    /// data (server to client).
    stream: (usize, Dir),
    /// (s since the lab started, ms)
    probe_rtt: Vec<(f64, f64)>,
    /// (s since the lab started, Mbit/s) per second of the stream receiver.
    stream_mbps: Vec<(f64, f64)>,
    /// (s since the lab started, ms): longest sojourn per bin at the downlink queue.
    queue_delay: Vec<(f64, f64)>,
}

impl RunData {
    fn conn(&self) -> &Connection {
        &self.analysis.connections[self.stream.0]
    }
}

/// The lab of one run.
pub fn lab_config(queue: &str, ecn: EcnMode, duration_s: f64, seed: u64) -> LabConfig {
    // The lab ends when the probe client (the one waited-for program) ends; the others
    // then get SIGTERM and write their summaries.
    // `exec`: the lab signals the program it started; a shell in between would die on
    // SIGTERM at once and the lab would tear down before the client wrote its summary.
    common::two_hosts(
        seed,
        [common::host("client", 1, ecn), common::host("server", 2, ecn),],
        ("path", common::direction("1mbit", "10ms", queue), common::direction("10mbit", "10ms", queue)),
        vec![
            common::program("stream-server", "server", 0.0, "exec latencylab stream-server".into(), false),
            common::program("probe-server", "server", 0.0, "exec latencylab probe-server".into(), false),
            // Twice the run's length of media at 8 Mbit/s is more than the 10 Mbit/s downlink
            // carries in the run, so the sender never runs out: the link stays full.
            common::program(
                "stream-client",
                "client",
                CLIENT_START_S,
                format!(
                    "exec latencylab stream-client server --bitrate 8mbit --ahead 30s --duration {:.0}s",
                    (duration_s * 2.0).ceil()
                ),
                false,
            ),
            common::program(
                "probe-client",
                "client",
                CLIENT_START_S,
                format!(
                    "exec latencylab probe-client server --proto both --interval 100ms --duration {}ms",
                    (duration_s * 1000.0).round()
                ),
                true,
            ),
        ],
    )
}

/// The two runs, each with its label and queue: what [`run`] runs and `--export` writes.
pub fn runs(a: &Args) -> Vec<((&'static str, &'static str), common::Run)> {
    let duration_s = a.seconds("duration");
    RUNS.map(|(name, label, queue, ecn)| {
        let run = common::Run {
            dir: name.into(),
            msg: format!("{label} ({queue}), {duration_s:.0} s"),
            expected_s: duration_s + CLIENT_START_S + 3.0,
            config: lab_config(queue, ecn, duration_s, a.seed),
        };
        ((label, queue), run)
    })
    .into()
}

/// Runs both labs, analyses them and writes `results.json`, the PNGs and `report.html`.
pub fn run(a: &Args) -> Result<Outcome> {
    let (series, runs) = common::run_series(a, runs(a), (4.0, 6.0), |(label, queue), dir, r| {
        collect(label, queue, dir, r)
    })?;
    let [fifo, codel] = runs.as_slice() else {
        unreachable!("two runs")
    };
    let results = Results {
        base_rtt_ms: BASE_RTT_MS,
        duration_s: a.seconds("duration"),
        fifo: fifo.metrics.clone(),
        codel: codel.metrics.clone(),
    };
    let (checks, rows) = (checks(&results), table_rows(&results));
    series.end(results, checks, rows, |r, c| {
        write_outputs(a, r, c, fifo, codel)
    })
}

/// Reads one run's outputs back.
fn collect(
    label: &'static str,
    queue: &str,
    dir: &Path,
    result: &lab::RunResult,
) -> Result<RunData> {
    let down = common::link_summary(result, "path", "down")?;
    let stream = common::program_records(dir, "stream-client")?;
    let probe = common::program_records(dir, "probe-client")?;

    let Some(apps::Record::StreamSummary {
        goodput_mbps,
        longest_gap_ms,
        stalls,
        ..
    }) = stream
        .iter()
        .rev()
        .find(|r| matches!(r, apps::Record::StreamSummary { .. }))
        .cloned()
    else {
        bail!(
            "{}: the stream client wrote no stream_summary (see programs/stream-client.err)",
            dir.display()
        );
    };
    let stream_mbps = stream
        .iter()
        .filter_map(|r| match r {
            // A stream_second line closes its second: it covers [t - 1, t).
            apps::Record::StreamSecond {
                t_s, goodput_mbps, ..
            } => Some((CLIENT_START_S + t_s - 1.0, *goodput_mbps)),
            _ => None,
        })
        .collect();
    let probe_rtt: Vec<(f64, f64)> = probe
        .iter()
        .filter_map(|r| match r {
            apps::Record::Rtt {
                t_s, proto, rtt_ms, ..
            } if proto == "udp" => Some((CLIENT_START_S + t_s, *rtt_ms)),
            _ => None,
        })
        .collect();
    let probe_lost = probe
        .iter()
        .filter(|r| matches!(r, apps::Record::Lost { proto, .. } if proto == "udp"))
        .count() as u64;
    let rtts: Vec<f64> = probe_rtt.iter().map(|p| p.1).collect();
    let Some(rtt) = apps::Percentiles::of(&rtts) else {
        bail!(
            "{}: the probe measured no UDP round trip (see programs/probe-client.err)",
            dir.display()
        );
    };

    let pcap = RunDir::new(dir).capture("server", "eth0");
    let analysis = common::analyze_pcap(&pcap)?;
    let stream_conn = analysis
        .connections
        .iter()
        .enumerate()
        .filter_map(|(i, c)| {
            if c.b.port() == STREAM_PORT {
                Some((i, Dir::BtoA))
            } else if c.a.port() == STREAM_PORT {
                Some((i, Dir::AtoB))
            } else {
                None
            }
        })
        .max_by_key(|(i, d)| analysis.connections[*i].dir(*d).stats.data_bytes)
        .with_context(|| format!("{}: no stream connection in the capture", pcap.display()))?;
    let sent = analysis.connections[stream_conn.0].dir(stream_conn.1);
    let cwr = sent.stats.cwr;
    let ack_stall_ms = longest_ack_stall_ms(
        &sent
            .series
            .segments
            .iter()
            .filter(|g| g.len > 0)
            .map(|g| (g.time.as_nanos(), g.seq + u64::from(g.len)))
            .collect::<Vec<_>>(),
        &sent
            .series
            .acks
            .iter()
            .map(|a| (a.time.as_nanos(), a.seq))
            .collect::<Vec<_>>(),
    );

    let log = RunDir::new(dir).link_log("path", Side::Down);
    let queue_delay = run_dir::queue_delay_series(
        &log.display().to_string(),
        common::open_link_log(&log)?,
        QUEUE_BIN_S,
    )?;
    Ok(RunData {
        label,
        metrics: RunMetrics {
            queue: queue.into(),
            goodput_mbps,
            rtt_p50_ms: rtt.p50,
            rtt_p95_ms: rtt.p95,
            rtt_p99_ms: rtt.p99,
            probe_lost,
            queue_delay_p95_ms: down.queue_delay_ms.p95,
            drops: down.drops.values().sum(),
            ce_marks: down.ce_marks,
            cwr,
            longest_gap_ms: longest_gap_ms.unwrap_or(0.0),
            ack_stall_ms,
            stalls,
        },
        analysis,
        stream: stream_conn,
        probe_rtt,
        stream_mbps,
        queue_delay,
    })
}

/// The CE marks a caption can speak of. The capture is the sender's, taken before the
/// bottleneck sets CE, so it sees none; the bottleneck's own log counts them.
fn ce_words(ce_in_capture: u64, ce_at_bottleneck: u64) -> String {
    if ce_in_capture == 0 && ce_at_bottleneck > 0 {
        format!(
            "{ce_at_bottleneck} CE-marked at the bottleneck (after this sender-side capture, so not drawn)"
        )
    } else {
        format!("{ce_in_capture} CE-marked")
    }
}

/// The longest time, in ms, between two advances of the receiver's cumulative ACK that began
/// with data outstanding (sent beyond the ACK): how long in-order delivery stood still on the
/// wire. `segments` are (time ns, end sequence number) of the data sent, `acks` (time ns,
/// cumulative ACK) at each change, both in capture order. A stall with nothing outstanding is
/// the sender with nothing to send, not delivery held back, and does not count.
pub fn longest_ack_stall_ms(segments: &[(u64, u64)], acks: &[(u64, u64)]) -> f64 {
    let mut sent = segments.iter().peekable();
    let mut highest_end = 0;
    let mut longest_ns = 0;
    for w in acks.windows(2) {
        let ((t0, ack0), (t1, _)) = (w[0], w[1]);
        while let Some(&&(t, end)) = sent.peek() {
            if t > t0 {
                break;
            }
            highest_end = highest_end.max(end);
            sent.next();
        }
        if highest_end > ack0 {
            longest_ns = longest_ns.max(t1 - t0);
        }
    }
    longest_ns as f64 / 1e6
}

/// The expectations, on these numbers.
pub fn checks(r: &Results) -> Vec<Check> {
    let (a, b) = (&r.fifo, &r.codel);
    let base = r.base_rtt_ms;
    let c = |what: String, passed: bool| Check { what, passed };
    vec![
        c(
            format!(
                "FIFO: probe RTT p95 {:.0} ms ≥ {:.0} ms (5 × the {:.0} ms base RTT)",
                a.rtt_p95_ms,
                5.0 * base,
                base
            ),
            a.rtt_p95_ms >= 5.0 * base,
        ),
        c(
            format!("FIFO: the queue dropped packets ({})", a.drops),
            a.drops > 0,
        ),
        c(
            format!(
                "FIFO: in-order delivery held back {:.0} ms at longest ≥ 4 × CoDel's {:.0} ms \
                 (the receiver's cumulative ACK standing still, in the sender's capture)",
                a.ack_stall_ms, b.ack_stall_ms
            ),
            a.ack_stall_ms >= 4.0 * b.ack_stall_ms,
        ),
        c(
            format!(
                "CoDel: CE marks ({}) answered by CWR ({})",
                b.ce_marks, b.cwr
            ),
            b.ce_marks > 0 && b.cwr > 0,
        ),
        c(
            format!("CoDel: AQM drops 0 or nearly ({})", b.drops),
            b.drops <= NEARLY_NO_DROPS,
        ),
        c(
            format!(
                "CoDel: probe RTT p95 {:.1} ms < base + 30 ms ({:.0} ms)",
                b.rtt_p95_ms,
                base + 30.0
            ),
            b.rtt_p95_ms < base + 30.0,
        ),
        c(
            format!(
                "goodput ≥ 90 % of {DOWN_MBPS:.0} Mbit/s in both ({:.2} and {:.2} Mbit/s)",
                a.goodput_mbps, b.goodput_mbps
            ),
            a.goodput_mbps >= 0.9 * DOWN_MBPS && b.goodput_mbps >= 0.9 * DOWN_MBPS,
        ),
    ]
}

/// "Nearly no drops": CoDel drops the packets that cannot carry a mark (the probe's Not-ECT
/// UDP pings, SYNs) when they meet a standing queue; a handful per run is that, not loss of
/// the stream.
pub const NEARLY_NO_DROPS: u64 = 5;

/// The side-by-side table: header and rows, for the terminal and the page alike.
pub fn table_rows(r: &Results) -> (Vec<String>, Vec<Vec<String>>) {
    let fifo = format!("FIFO ({})", r.fifo.queue);
    let runs = [(fifo.as_str(), &r.fifo), ("CoDel + ECN", &r.codel)];
    let (header, row) = common::run_columns(&runs);
    let fixed = |decimals: usize, x: f64| format!("{x:.decimals$}");
    let rows = vec![
        row("stream goodput (Mbit/s)", &|m| fixed(2, m.goodput_mbps)),
        row("probe RTT p50 (ms)", &|m| fixed(1, m.rtt_p50_ms)),
        row("probe RTT p95 (ms)", &|m| fixed(1, m.rtt_p95_ms)),
        row("probe RTT p99 (ms)", &|m| fixed(1, m.rtt_p99_ms)),
        row("queue delay p95 (ms)", &|m| fixed(1, m.queue_delay_p95_ms)),
        row("drops at the bottleneck", &|m| m.drops.to_string()),
        row("CE marks", &|m| m.ce_marks.to_string()),
        row("CWR (sender's replies)", &|m| m.cwr.to_string()),
        row("longest ACK stall on the wire (ms)", &|m| {
            fixed(0, m.ack_stall_ms)
        }),
        row("longest gap between the player's reads (ms)", &|m| {
            fixed(0, m.longest_gap_ms)
        }),
        row("playback stalls", &|m| m.stalls.to_string()),
    ];
    (header, rows)
}

const FIFO_COLOR: Rgb = common::PAIR_COLORS[0];
const CODEL_COLOR: Rgb = common::PAIR_COLORS[1];

fn write_outputs(
    a: &Args,
    r: &Results,
    checks: &[Check],
    fifo: &RunData,
    codel: &RunData,
) -> Result<()> {
    let mut page = common::Report::new(
        "Bufferbloat: a FIFO against CoDel + ECN on a home line",
        format!(
            "10 Mbit/s down, 1 Mbit/s up, {BASE_RTT_MS:.0} ms base RTT; an 8 Mbit/s video stream \
             with 30 s read-ahead fills the downlink while a probe pings every 100 ms; {:.0} s per \
             run, seed {}. Run A queues in a FIFO ({}), run B in CoDel marking ECN ({}), with ECN \
             on in both hosts.",
            r.duration_s, a.seed, r.fifo.queue, r.codel.queue
        ),
        table_rows(r),
        "Goodput is what the video player read; RTTs are the probe's UDP pings; \
         queue delay, drops and CE marks are the downlink queue's; CWR counts \
         the sender's replies to congestion echoes, in the server's capture.",
        common::findings(checks),
    );
    let ts = [fifo, codel].map(time_sequence);
    // The PNGs keep more of each graph than the page, which holds both inline.
    let [png_a, png_b] = tsg_charts(fifo, codel, &ts, 30_000, 4_000);
    let [page_a, page_b] = tsg_charts(fifo, codel, &ts, 8_000, 2_400);
    page.section(
        "The stream's time-sequence graphs",
        "The same picture as tcptrace draws, from each run's capture at the server (the \
         sender). Time runs to the right, the byte position in the stream up; the slope \
         is the rate. Both graphs are at the same scale. Scroll to zoom, drag to pan.",
        vec![Block::Row(vec![
            common::figure("tsg-fifo", &page_a, true)?,
            common::figure("tsg-codel", &page_b, true)?,
        ])],
    );
    let [za, zb] = zoom_charts(&ts[0], &ts[1]);
    let zoom = page.row(vec![("zoom-fifo", za, true), ("zoom-codel", zb, true)])?;
    page.section("A loss episode up close", "", vec![zoom]);
    let [da, db] = delay_charts(fifo, codel);
    let delay = page.row(vec![("delay-fifo", da, false), ("delay-codel", db, false)])?;
    let both = page.figure("rtt-over-time", rtt_chart(fifo, codel), false)?;
    page.section("Delay over time", "", vec![delay, Block::Figure(both)]);
    let more = page.row(vec![
        ("throughput", throughput_chart(fifo, codel), false),
        ("rtt-cdf", rtt_cdf(fifo, codel), false),
    ])?;
    page.section(
        "Throughput and the probe's RTT distribution",
        "",
        vec![more],
    );
    page.analyzer(
        "Diagnoses of `latencylab analyze` on each run's server capture (run it yourself \
         on fifo/captures/server-eth0.pcap for the whole analysis).",
        Block::Findings([fifo, codel].iter().flat_map(|r| diagnoses(r)).collect()),
    );
    page.files(&[
        "fifo/, codel/: each run's lab output: captures/*.pcap (tcpdump, Wireshark, \
         latencylab analyze), links/*.log (every packet's queue events), summary.json, lab.json, \
         programs/*.out (the programs' JSON lines)",
    ]);
    page.write(&a.out_dir, r)?;
    for (id, chart) in [("tsg-fifo", png_a), ("tsg-codel", png_b)] {
        let p = RunDir::new(&a.out_dir).chart_png(id);
        chart
            .write_png(&p)
            .with_context(|| format!("writing {}", p.display()))?;
    }
    Ok(())
}

/// The analyzer's diagnoses of every connection of a run, one line each, or one line saying
/// there was none.
fn diagnoses(r: &RunData) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = r
        .analysis
        .connections
        .iter()
        .flat_map(|c| {
            c.diagnoses.iter().map(move |d| {
                (
                    format!("{}: {}", r.label, d.kind.name()),
                    format!("{} → {}: {}", c.a, c.b, d.summary),
                )
            })
        })
        .collect();
    if out.is_empty() {
        out.push((
            format!("{}: nothing", r.label),
            "the analyzer named no cause of delay".into(),
        ));
    }
    out
}

/// The stream's time-sequence graph of a run, as its server sent it.
fn time_sequence(r: &RunData) -> TimeSequence {
    let mut t = report::analysis::time_sequence(&r.analysis, r.conn(), r.stream.1);
    t.title = format!(
        "Stream, {}: server → client, as the server sent it",
        r.label
    );
    t
}

/// Both runs' time-sequence graphs, thinned alike (at most `max` segments in `columns`
/// slices), on one scale.
fn tsg_charts(
    fifo: &RunData,
    codel: &RunData,
    ts: &[TimeSequence; 2],
    max: usize,
    columns: usize,
) -> [Chart; 2] {
    let caption = |r: &RunData, more: &str| {
        let st = &r.conn().dir(r.stream.1).stats;
        format!(
            "{}: {} packets sent, {} retransmitted (red R), {}, {} with CWR; {more}",
            r.label,
            st.data_packets,
            st.retransmitted_packets,
            ce_words(st.ce, r.metrics.ce_marks),
            st.cwr
        )
    };
    let captions = [
        caption(
            fifo,
            "the green ACK line trails the black data by the queue's delay, and each \
             tail-drop loss stalls it.",
        ),
        caption(
            codel,
            "the ACK line hugs the data (one short RTT behind) and CE marks replace the \
             losses.",
        ),
    ];
    let mut c = [0, 1].map(|i| {
        ts[i]
            .thinned(max, columns)
            .chart()
            .caption(captions[i].clone())
    });
    report::same_scale(&mut c);
    c
}

/// Both runs' probe RTT in one picture (the README's).
fn rtt_chart(fifo: &RunData, codel: &RunData) -> Chart {
    Chart::new(
        "A ping every 100 ms beside a video download",
        Axis::new("time since the lab started", "s"),
        Axis::new("probe round-trip time", "ms").from_zero(),
    )
    .size(900, 480)
    .caption(format!(
        "Same line, same download: behind the FIFO ({}) the pings wait in a queue of \
         video; CoDel marking ECN keeps them within a few ms of the {BASE_RTT_MS:.0} ms base.",
        fifo.metrics.queue
    ))
    .with(Series::scatter(fifo.label, FIFO_COLOR, fifo.probe_rtt.clone()).keep_in_legend())
    .with(Series::scatter(codel.label, CODEL_COLOR, codel.probe_rtt.clone()).keep_in_legend())
}

fn rtt_cdf(fifo: &RunData, codel: &RunData) -> Chart {
    let rtts = |r: &RunData| r.probe_rtt.iter().map(|p| p.1).collect::<Vec<_>>();
    Chart::cdf(
        "Probe round-trip time, distribution",
        Axis::new("UDP ping round-trip time", "ms").from_zero(),
        "probes",
    )
    .caption(format!(
        "A point (x, y) says y % of the pings took at most x ms: with CoDel the curve rises \
         just right of the {BASE_RTT_MS:.0} ms base RTT, with the FIFO it lies hundreds of \
         ms further right."
    ))
    .with(Series::cdf(fifo.label, FIFO_COLOR, &rtts(fifo)))
    .with(Series::cdf(codel.label, CODEL_COLOR, &rtts(codel)))
}

/// The first loss episode of the FIFO run and the same span of the CoDel run, at the same
/// bytes-per-pixel scale.
fn zoom_charts(a: &TimeSequence, b: &TimeSequence) -> [Chart; 2] {
    let first_retransmit = a.segments.iter().find(|s| s.retransmit).map(|s| s.time_s);
    let (x0, x1, found) = match first_retransmit {
        Some(t) => (t - 0.8, t + 0.7, true),
        None => {
            // No loss: zoom on the middle of the run so that the pair still compares.
            let end = a.segments.last().map_or(1.0, |s| s.time_s);
            (end / 2.0 - 0.75, end / 2.0 + 0.75, false)
        }
    };
    let [za, zb] = TimeSequence::zoomed_alike([a, b], x0, x1);
    let chart = |mut z: TimeSequence, label: &str, caption: &str| {
        z.title = format!("{label}: {x0:.1} s to {x1:.1} s up close");
        z.chart().caption(caption)
    };
    let cap_a = if found {
        "A tail drop: the green ACK line goes flat while purple SACK bars stack above it, until \
         the red retransmission (R) fills the hole a full, bloated RTT later."
    } else {
        "No loss happened in this FIFO run; this is the middle of the run."
    };
    [
        chart(za, "FIFO", cap_a),
        chart(
            zb,
            "CoDel + ECN",
            "The same span with CoDel: the data climbs without a pause and the ACKs follow one \
             short RTT behind; CE marks (orange) slow the sender instead of losses.",
        ),
    ]
}

fn delay_charts(fifo: &RunData, codel: &RunData) -> [Chart; 2] {
    let end = fifo
        .probe_rtt
        .iter()
        .chain(codel.probe_rtt.iter())
        .map(|p| p.0)
        .fold(0.0, f64::max);
    let one = |r: &RunData, caption: &str| {
        Chart::new(
            format!("Delay over time, {}", r.label),
            Axis::new("time since the lab started", "s"),
            Axis::new("delay", "ms").from_zero(),
        )
        .caption(caption.to_string())
        .with(
            Series::line(
                "queue delay at the bottleneck (longest per 100 ms)",
                Rgb::nth(2),
                r.queue_delay.clone(),
            )
            .keep_in_legend(),
        )
        .with(
            Series::scatter("probe RTT (UDP ping)", Rgb::nth(0), r.probe_rtt.clone())
                .keep_in_legend(),
        )
        .with(
            Series::hline(
                format!("base RTT ({BASE_RTT_MS:.0} ms)"),
                Rgb::GREY,
                BASE_RTT_MS,
                (0.0, end),
            )
            .keep_in_legend(),
        )
    };
    let mut c = [
        one(
            fifo,
            "The FIFO fills until it overflows, so every ping waits behind hundreds of \
             milliseconds of queued video: the probe's RTT is the base RTT plus the queue.",
        ),
        one(
            codel,
            "CoDel keeps the queue near its 5 ms target by marking, so the pings stay within a \
             few milliseconds of the base RTT (same scale as the FIFO run).",
        ),
    ];
    report::same_scale(&mut c);
    c
}

fn throughput_chart(fifo: &RunData, codel: &RunData) -> Chart {
    let end = fifo
        .stream_mbps
        .iter()
        .chain(codel.stream_mbps.iter())
        .map(|p| p.0 + 1.0)
        .fold(0.0, f64::max);
    Chart::new(
        "Stream goodput per second",
        Axis::new("time since the lab started", "s"),
        Axis::new("goodput", "Mbit/s").from_zero(),
    )
    .caption(format!(
        "Both runs move the same amount of video ({:.2} and {:.2} Mbit/s on average): the FIFO's \
         huge queue buys no throughput, only delay.",
        fifo.metrics.goodput_mbps, codel.metrics.goodput_mbps
    ))
    .with(Series::intervals(fifo.label, FIFO_COLOR, &fifo.stream_mbps, 1.0).keep_in_legend())
    .with(Series::intervals(codel.label, CODEL_COLOR, &codel.stream_mbps, 1.0).keep_in_legend())
    .with(
        Series::hline(
            format!("link capacity ({DOWN_MBPS:.0} Mbit/s)"),
            Rgb::GREY,
            DOWN_MBPS,
            (0.0, end),
        )
        .keep_in_legend(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metrics(rtt_p95_ms: f64, drops: u64, gap: f64, ce: u64, cwr: u64) -> RunMetrics {
        RunMetrics {
            queue: "q".into(),
            goodput_mbps: 9.5,
            rtt_p50_ms: rtt_p95_ms / 2.0,
            rtt_p95_ms,
            rtt_p99_ms: rtt_p95_ms,
            probe_lost: 0,
            queue_delay_p95_ms: 1.0,
            drops,
            ce_marks: ce,
            cwr,
            longest_gap_ms: gap,
            ack_stall_ms: gap,
            stalls: 0,
        }
    }

    #[test]
    fn checks_pass_for_a_bloated_fifo_against_a_marking_codel() {
        let r = Results {
            base_rtt_ms: 20.0,
            duration_s: 30.0,
            fifo: metrics(250.0, 40, 300.0, 0, 0),
            codel: metrics(30.0, 1, 20.0, 80, 70),
        };
        assert!(checks(&r).iter().all(|c| c.passed), "{:?}", checks(&r));
    }

    #[test]
    fn captions_and_checks_say_what_a_sender_side_capture_and_the_base_rtt_are() {
        assert_eq!(ce_words(0, 0), "0 CE-marked");
        assert!(ce_words(0, 67).starts_with("67 CE-marked at the bottleneck"));
        let r = Results {
            fifo: metrics(370.0, 20, 378.0, 0, 0),
            codel: metrics(33.0, 1, 35.0, 25, 25),
            base_rtt_ms: 20.0,
            duration_s: 30.0,
        };
        let first = &checks(&r)[0].what;
        assert!(
            first.contains("≥ 100 ms (5 × the 20 ms base RTT)"),
            "{first}"
        );
    }

    #[test]
    fn checks_fail_when_codel_only_drops_or_the_fifo_never_overflows() {
        let r = Results {
            base_rtt_ms: 20.0,
            duration_s: 30.0,
            fifo: metrics(250.0, 0, 300.0, 0, 0),
            codel: metrics(30.0, 60, 20.0, 0, 0),
        };
        let failed: Vec<_> = checks(&r).into_iter().filter(|c| !c.passed).collect();
        assert_eq!(failed.len(), 3, "{failed:?}");
    }

    #[test]
    fn an_ack_stall_counts_only_while_data_is_outstanding() {
        let ms = 1_000_000;
        // Data up to 3000 sent by 5 ms; the ACK stands at 1000 from 10 to 300 ms (a hole),
        // then the sender is idle with everything acknowledged from 300 to 900 ms.
        let segments = [(0, 1000), (2 * ms, 2000), (5 * ms, 3000), (950 * ms, 4000)];
        let acks = [
            (ms, 500),
            (10 * ms, 1000),
            (300 * ms, 3000),
            (900 * ms, 3000),
            (960 * ms, 4000),
        ];
        assert_eq!(longest_ack_stall_ms(&segments, &acks), 290.0);
        assert_eq!(longest_ack_stall_ms(&segments, &acks[..1]), 0.0);
    }

    #[test]
    fn the_fifo_lab_puts_the_queue_on_both_directions_and_waits_for_the_probe() {
        let cfg = lab_config(FIFO_QUEUE, EcnMode::Passive, 12.0, 1);
        cfg.validate().unwrap();
        assert_eq!(cfg.links[0].down.queue.to_string(), FIFO_QUEUE);
        assert_eq!(cfg.links[0].up.to_json()["capacity"], "1mbit");
        let waited: Vec<_> = cfg.programs.iter().filter(|p| p.wait).collect();
        assert_eq!(waited.len(), 1);
        assert!(waited[0].run.contains("--duration 12000ms"));
    }
}
