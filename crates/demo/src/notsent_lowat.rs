//! `latencylab demo notsent-lowat`: screen sharing over a slow DSL uplink, once with the
//! classic sender that writes frames while its socket takes them and once with
//! TCP_NOTSENT_LOWAT and one frame per writable event (experiment E4 of the 2015 talk).
//!
//! The line: the screen's host (the server) sends over 400 kbit/s (50 KB/s) with 20 ms each
//! way (40 ms base RTT); the viewer's clicks go the other way over 4 Mbit/s. The bottleneck
//! runs CoDel so that the network's own queue stays short (the talk's ping was 35 ms while the
//! menu took seconds): what remains is the delay in the sending host. The server's socket
//! send buffer is 120 KB (SO_SNDBUF), its frames 4 KB at up to 30 per second (more than the
//! line carries, as while dragging a window). The viewer clicks about once a second at seeded
//! random moments and times each click until the first complete frame that draws it; a probe
//! pings beside it, to show the network's RTT while the clicks wait.
//!
//! This module runs and presents; it does not judge: the criteria are printed as checks, and
//! the end-to-end test asserts them.

use labnet::run_dir::RunDir;
use std::path::Path;

use analyze::Analysis;
use anyhow::{bail, Result};
use lab::config::{EcnMode, LabConfig};
use report::{Axis, Block, Chart, Rgb, Series};
use serde::Serialize;

use crate::common::{self, Check};
use crate::params::Args;

/// Round-trip propagation delay of the line, ms (20 ms each way).
pub const BASE_RTT_MS: f64 = 40.0;
/// The uplink the frames cross.
pub const UPLINK: &str = "400kbit";
/// The uplink's queue: CoDel with Linux's defaults, so that the line itself does not bloat.
pub const UPLINK_QUEUE: &str = "codel target 5ms interval 100ms";
/// The server's socket send buffer (SO_SNDBUF), as in the talk.
pub const SNDBUF: &str = "120kb";
/// TCP_NOTSENT_LOWAT of the lowat run.
pub const LOWAT: &str = "16kb";

/// A size as the options write it (`120kb`) as the page writes it (`120 KB`).
fn as_text(size: &str) -> String {
    match size.strip_suffix("kb") {
        Some(n) => format!("{n} KB"),
        None => size.to_string(),
    }
}
/// When the viewer and the probe start, s after the lab: the servers listen by then.
const CLIENT_START_S: f64 = 0.5;
/// No clicks in the viewer's first seconds: the send buffer fills meanwhile.
const WARMUP_S: f64 = 2.0;

/// The two runs, each the server's `--mode`, its directory, and its name in the table and
/// the charts (in the colours of [`common::PAIR_COLORS`], in this order).
pub const MODES: [&str; 2] = ["unbounded", "lowat"];

/// One run's numbers, as `results.json` writes them.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct RunMetrics {
    pub click_to_frame_ms_p50: f64,
    pub click_to_frame_ms_p95: f64,
    /// The server's unsent bytes (SIOCOUTQNSD), median of its samples every 100 ms.
    pub unsent_bytes_p50: f64,
    pub clicks: u64,
    /// Clicks whose frame came before the end.
    pub answered: u64,
    pub frames: u64,
    /// The probe's UDP round trips beside the screen sharing.
    pub ping_rtt_ms_p50: f64,
}

/// `results.json`.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Results {
    pub base_rtt_ms: f64,
    pub duration_s: f64,
    pub unbounded: RunMetrics,
    pub lowat: RunMetrics,
}

/// What the demo leaves.
pub type Outcome = common::Outcome<Results>;

struct RunData {
    mode: &'static str,
    color: Rgb,
    metrics: RunMetrics,
    analysis: Analysis,
    /// (s since the viewer started, ms) per answered click.
    clicks: Vec<(f64, f64)>,
    /// (s since the viewer started, KB) per server sample.
    unsent_kb: Vec<(f64, f64)>,
}

/// The lab of one run, its server in `--mode` `mode`.
pub fn lab_config(mode: &str, duration_s: f64, seed: u64) -> LabConfig {
    let ms = (duration_s * 1000.0).round();
    // The lab ends with the viewer; the others then get SIGTERM and write their summaries.
    // `exec`: the lab signals the program itself, which then writes its summary.
    common::two_hosts(
        seed,
        [common::host("viewer", 1, EcnMode::Passive), common::host("server", 2, EcnMode::Passive),],
        ("dsl", common::direction("4mbit", "20ms", UPLINK_QUEUE), common::direction(UPLINK, "20ms", UPLINK_QUEUE)),
        vec![
            common::program(
                "screen-server",
                "server",
                0.0,
                format!(
                    "exec latencylab screen-server --mode {mode} --sndbuf {SNDBUF} --lowat {LOWAT}"
                ),
                false,
            ),
            common::program("probe-server", "server", 0.0, "exec latencylab probe-server".into(), false),
            common::program(
                "screen-viewer",
                "viewer",
                CLIENT_START_S,
                format!(
                    "exec latencylab screen-viewer server --warmup {WARMUP_S}s --seed {seed} --duration {ms}ms"
                ),
                true,
            ),
            common::program(
                "probe-client",
                "viewer",
                CLIENT_START_S,
                format!(
                    "exec latencylab probe-client server --proto udp --interval 200ms --duration {ms}ms"
                ),
                false,
            ),
        ],
    )
}

/// The runs: what [`run`] runs and `--export` writes.
pub fn runs(a: &Args) -> Vec<((&'static str, Rgb), common::Run)> {
    let duration_s = a.seconds("duration");
    MODES
        .into_iter()
        .zip(common::PAIR_COLORS)
        .map(|(mode, color)| {
            let run = common::Run {
                dir: mode.into(),
                msg: format!("{mode}, {duration_s:.0} s"),
                expected_s: duration_s + CLIENT_START_S + 2.0,
                config: lab_config(mode, duration_s, a.seed),
            };
            ((mode, color), run)
        })
        .collect()
}

/// Runs both labs, analyses them and writes `results.json`, the PNGs and `report.html`.
pub fn run(a: &Args) -> Result<Outcome> {
    let (series, runs) =
        common::run_series(a, runs(a), (2.0, 3.0), |key, dir, _| collect(key, dir))?;
    let results = Results {
        base_rtt_ms: BASE_RTT_MS,
        duration_s: a.seconds("duration"),
        unbounded: runs[0].metrics.clone(),
        lowat: runs[1].metrics.clone(),
    };
    let (checks, rows) = (checks(&results), table_rows(&results));
    series.end(results, checks, rows, |r, c| write_outputs(a, r, c, &runs))
}

/// Reads one run's outputs back.
fn collect((mode, color): (&'static str, Rgb), dir: &Path) -> Result<RunData> {
    let viewer = common::program_records(dir, "screen-viewer")?;
    let server = common::program_records(dir, "screen-server")?;
    let probe = common::program_records(dir, "probe-client")?;
    let Some(apps::Record::ScreenSummary {
        frames,
        clicks,
        answered,
        click_to_frame_ms_p50,
        click_to_frame_ms_p95,
        ..
    }) = viewer
        .iter()
        .rev()
        .find(|r| matches!(r, apps::Record::ScreenSummary { .. }))
        .cloned()
    else {
        bail!(
            "{}: the viewer wrote no screen_summary (see programs/screen-viewer.err)",
            dir.display()
        );
    };
    let (Some(p50), Some(p95)) = (click_to_frame_ms_p50, click_to_frame_ms_p95) else {
        bail!(
            "{}: no click was answered by a frame ({clicks} clicks; see programs/screen-viewer.out)",
            dir.display()
        );
    };
    let viewer_t0 = common::monotonic_start(&viewer, dir, "screen-viewer")?;
    let server_t0 = common::monotonic_start(&server, dir, "screen-server")?;
    let shift = server_t0 - viewer_t0;
    let click_points = viewer
        .iter()
        .filter_map(|r| match r {
            apps::Record::Click {
                t_s,
                click_to_frame_ms: Some(ms),
                ..
            } => Some((*t_s, *ms)),
            _ => None,
        })
        .collect();
    let samples: Vec<(f64, u64)> = server
        .iter()
        .filter_map(|r| match r {
            apps::Record::SendQueue {
                t_s, unsent_bytes, ..
            } => Some((t_s + shift, *unsent_bytes)),
            _ => None,
        })
        .collect();
    let unsent: Vec<f64> = samples.iter().map(|s| s.1 as f64).collect();
    let Some(unsent_pct) = apps::Percentiles::of(&unsent) else {
        bail!(
            "{}: the server sampled no send queue (see programs/screen-server.err)",
            dir.display()
        );
    };
    let pings: Vec<f64> = probe
        .iter()
        .filter_map(|r| match r {
            apps::Record::Rtt { rtt_ms, .. } => Some(*rtt_ms),
            _ => None,
        })
        .collect();
    let ping = apps::Percentiles::of(&pings).map_or(f64::NAN, |p| p.p50);
    let analysis = common::analyze_pcap(&RunDir::new(dir).capture("server", "eth0"))?;
    Ok(RunData {
        mode,
        color,
        metrics: RunMetrics {
            click_to_frame_ms_p50: p50,
            click_to_frame_ms_p95: p95,
            unsent_bytes_p50: unsent_pct.p50,
            clicks,
            answered,
            frames,
            ping_rtt_ms_p50: ping,
        },
        analysis,
        clicks: click_points,
        unsent_kb: samples
            .iter()
            .map(|(t, b)| (*t, *b as f64 / 1000.0))
            .collect(),
    })
}

/// The experiment's criteria, on these numbers (the talk: ~2.5 s from click to menu, falling to
/// about the network's RTT).
pub fn checks(r: &Results) -> Vec<Check> {
    let (a, b) = (&r.unbounded, &r.lowat);
    vec![
        Check {
            what: format!(
                "unbounded: click-to-frame p50 {:.0} ms above a second",
                a.click_to_frame_ms_p50
            ),
            passed: a.click_to_frame_ms_p50 > 1000.0,
        },
        Check {
            what: format!(
                "lowat: click-to-frame p50 {:.0} ms at most a quarter of unbounded's ({:.0} ms)",
                b.click_to_frame_ms_p50,
                a.click_to_frame_ms_p50 / 4.0
            ),
            passed: b.click_to_frame_ms_p50 <= a.click_to_frame_ms_p50 / 4.0,
        },
    ]
}

/// The side-by-side table: header and rows.
pub fn table_rows(r: &Results) -> (Vec<String>, Vec<Vec<String>>) {
    let runs = [("unbounded", &r.unbounded), ("lowat", &r.lowat)];
    let (header, row) = common::run_columns(&runs);
    let rows = vec![
        row("click-to-frame p50 (ms)", &|m| {
            format!("{:.0}", m.click_to_frame_ms_p50)
        }),
        row("click-to-frame p95 (ms)", &|m| {
            format!("{:.0}", m.click_to_frame_ms_p95)
        }),
        row("unsent bytes in the sender, p50", &|m| {
            format!("{:.0}", m.unsent_bytes_p50)
        }),
        row("clicks (answered)", &|m| {
            format!("{} ({})", m.clicks, m.answered)
        }),
        row("frames received", &|m| m.frames.to_string()),
        row("ping RTT beside it, p50 (ms)", &|m| {
            format!("{:.1}", m.ping_rtt_ms_p50)
        }),
    ];
    (header, rows)
}

fn write_outputs(a: &Args, r: &Results, checks: &[Check], runs: &[RunData]) -> Result<()> {
    let mut page = common::Report::new(
        "TCP_NOTSENT_LOWAT: stale frames in the sender's socket buffer",
        format!(
            "Screen sharing over a DSL uplink of {UPLINK} (50 KB/s) with a {BASE_RTT_MS:.0} ms \
             base RTT and CoDel at the bottleneck; the server's send buffer is {}, its frames \
             4 KB at up to 30 per second; the viewer clicks about once a second. {:.0} s per \
             run, seed {}. A: the server writes frames while the socket takes them. B: \
             TCP_NOTSENT_LOWAT {}, one frame generated and written per writable event.",
            as_text(SNDBUF),
            r.duration_s,
            a.seed,
            as_text(LOWAT)
        ),
        table_rows(r),
        "Click to frame is timed by the viewer, from sending a click to the \
         first complete frame that draws it; unsent bytes are the server's, \
         sampled from its socket; the ping is a UDP probe beside the screen \
         sharing, over the same line.",
        common::findings(checks),
    );
    let [clicks, unsent, cdf] = charts(r, runs);
    let row = page.row(vec![
        ("click-to-frame", clicks, false),
        ("click-to-frame-cdf", cdf, false),
    ])?;
    page.section("Click to frame", "", vec![row]);
    let unsent = page.figure("unsent-bytes", unsent, false)?;
    page.section("Where the frames wait", "", vec![Block::Figure(unsent)]);
    page.analyzer(
        "Diagnoses of `latencylab analyze` on each run's server capture. A capture \
         shows the network, not the socket buffer: the delay of the unbounded run is \
         not in it.",
        report::findings::analyzer_findings(runs.iter().map(|r| (r.mode, &r.analysis))),
    );
    page.files(&[
        "unbounded/, lowat/: each run's lab output: captures/*.pcap, links/*.log, \
         summary.json, lab.json, programs/*.out (screen-viewer.out has every click, \
         screen-server.out every send-queue sample)",
    ]);
    page.write(&a.out_dir, r)
}

/// The charts: click to frame over time, unsent bytes over time, click to frame's distribution.
fn charts(r: &Results, runs: &[RunData]) -> [Chart; 3] {
    let end = r.duration_s;
    let mut clicks = Chart::new(
        "From click to the frame that draws it",
        Axis::new(
            "time since the viewer connected (when the click happened)",
            "s",
        ),
        Axis::new("click to frame", "ms").from_zero(),
    )
    .size(900, 480)
    .caption(format!(
        "Each dot is a click. Unbounded: {:.1} s from click to frame, the time the line needs to \
         send the frames already waiting in the server's socket buffer. With TCP_NOTSENT_LOWAT \
         and one frame per writable event: {:.0} ms. The grey line is the network's base RTT \
         ({BASE_RTT_MS:.0} ms).",
        r.unbounded.click_to_frame_ms_p50 / 1000.0,
        r.lowat.click_to_frame_ms_p50
    ));
    clicks.extend(
        runs.iter()
            .map(|r| Series::scatter(r.mode, r.color, r.clicks.clone()).keep_in_legend()),
    );
    clicks.push(
        Series::hline(
            format!("base RTT ({BASE_RTT_MS:.0} ms)"),
            Rgb::GREY,
            BASE_RTT_MS,
            (0.0, end),
        )
        .keep_in_legend(),
    );
    let mut unsent = Chart::new(
        "Bytes the server has written but TCP has not yet sent",
        Axis::new("time since the viewer connected", "s"),
        Axis::new("unsent bytes in the socket (SIOCOUTQNSD)", "KB").from_zero(),
    )
    .size(900, 480)
    .caption(format!(
        "Sampled by the server every 100 ms. Unbounded: a median of {:.0} KB of frames wait in \
         the socket, each drawn before the clicks that came while it waited. Lowat: {:.0} KB, \
         under the 16 KB mark (grey): a frame is generated only when the socket falls below it.",
        r.unbounded.unsent_bytes_p50 / 1000.0,
        r.lowat.unsent_bytes_p50 / 1000.0
    ));
    unsent.push(
        Series::hline(
            format!("TCP_NOTSENT_LOWAT ({})", as_text(LOWAT)),
            Rgb::GREY,
            16.0,
            (0.0, end),
        )
        .keep_in_legend(),
    );
    unsent.extend(
        runs.iter()
            .map(|r| Series::line(r.mode, r.color, r.unsent_kb.clone()).keep_in_legend()),
    );
    let mut cdf = Chart::cdf(
        "Click to frame, distribution",
        Axis::new("click to frame", "ms").from_zero(),
        "clicks",
    )
    .caption(
        "A point (x, y) says y % of the clicks were drawn within x ms: the unbounded curve \
         lies seconds to the right of the lowat one.",
    );
    cdf.extend(runs.iter().map(|r| {
        let v: Vec<f64> = r.clicks.iter().map(|p| p.1).collect();
        Series::cdf(r.mode, r.color, &v)
    }));
    [clicks, unsent, cdf]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metrics(p50: f64) -> RunMetrics {
        RunMetrics {
            click_to_frame_ms_p50: p50,
            click_to_frame_ms_p95: p50 * 1.2,
            unsent_bytes_p50: 1000.0,
            clicks: 20,
            answered: 19,
            frames: 300,
            ping_rtt_ms_p50: 45.0,
        }
    }

    #[test]
    fn checks_pass_for_seconds_against_a_fraction_and_fail_otherwise() {
        let r = |a, b| Results {
            base_rtt_ms: BASE_RTT_MS,
            duration_s: 30.0,
            unbounded: metrics(a),
            lowat: metrics(b),
        };
        assert!(checks(&r(2500.0, 300.0)).iter().all(|c| c.passed));
        let failed: Vec<_> = checks(&r(900.0, 300.0))
            .into_iter()
            .filter(|c| !c.passed)
            .collect();
        assert_eq!(failed.len(), 2, "{failed:?}");
    }

    #[test]
    fn the_lowat_lab_sets_the_mode_and_waits_for_the_viewer() {
        let cfg = lab_config("lowat", 12.0, 3);
        cfg.validate().unwrap();
        assert_eq!(cfg.links[0].down.to_json()["capacity"], UPLINK);
        let server = &cfg.programs[0];
        assert!(server.run.contains("--mode lowat"), "{}", server.run);
        let waited: Vec<_> = cfg.programs.iter().filter(|p| p.wait).collect();
        assert_eq!(waited.len(), 1);
        assert!(waited[0].run.contains("--seed 3 --duration 12000ms"));
    }
}
