//! `latencylab demo cwnd-reuse`: which idle persistent connection should a click take?
//! (experiment E13 of "Firefox Idle Connection Selection via CWND").
//!
//! A photo page (`examples/pages/gallery.toml`: a 2 MB photo and eight 3 kB thumbnails on one
//! host name) loads over six HTTP/1.1 connections at 250 ms RTT; the user then clicks three
//! links to 25 kB photos in turn, each after the connections have been idle a few seconds.
//! Each click takes one idle connection, chosen by `page-load --idle-choice`:
//!
//! - `oldest`: idle longest (a FIFO, Firefox 4's default): a thumbnail's connection, whose
//!   congestion window never grew past the initial 10 segments, so 25 kB takes two flights.
//! - `largest-burst`: the one that moved the most in one response, the talk's proxy for the
//!   server's congestion window: the 2 MB photo's, whose window holds the 25 kB in one flight.
//!
//! The server keeps its window across idle spells (`tcp_slow_start_after_idle=0`, as many web
//! servers are set); the same two runs with Linux's default (1), where a window decays by half
//! for every RTO of idleness down to the initial window (RFC 2861 section 3, Linux's
//! `tcp_cwnd_restart`), show when the choice stops mattering.
//!
//! The fetch times come from `page-load`'s own lines (request sent to last byte); the flights
//! from the server's capture, through the analyzer.

use labnet::run_dir::RunDir;
use std::path::Path;

use anyhow::{bail, Context, Result};
use lab::config::LabConfig;
use report::{Axis, Block, Chart, Marks, Rgb, Series};
use serde::Serialize;
use web::WebRecord;

use crate::common::{self, Check};
use crate::params::Args;
use crate::web_common::{analyzer_section, page_load_records, web_lab, Line};

/// The page, shipped in `examples/pages/`.
pub const GALLERY: &str = include_str!("../../../examples/pages/gallery.toml");
/// The page's host name, an alias of the lab's one server.
pub const HOST: &str = "www";
/// The links the user clicks, in turn (the page's `linked` photos).
pub const CLICKS: [&str; 3] = ["/photo/1.jpg", "/photo/2.jpg", "/photo/3.jpg"];
/// The line is fast enough that the 2 MB photo is bound by round trips more than by bytes,
/// as the talk assumes of web transfers.
pub const DOWN: &str = "20mbit";
pub const UP: &str = "5mbit";
const QUEUE: &str = "fifo limit 1000";
/// Connections per host name, as browsers allow.
pub const PER_HOST: u16 = 6;
/// The talk's 793 ms → 363 ms: the choice at most about 60 % of FIFO's fetch time.
const SEED_OLDEST_MS: f64 = 793.0;
const SEED_LARGEST_MS: f64 = 363.0;
const MAX_RATIO: f64 = 0.6;
/// With the window reset after idle, "no real gain": within 15 % of each other.
const SAME_RATIO: f64 = 0.85;
/// Linux's initial window (RFC 6928), in segments.
const INITIAL_WINDOW: u64 = 10;

/// One run's numbers, as `results.json` writes them.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct RunMetrics {
    pub idle_choice: String,
    /// The server's `net.ipv4.tcp_slow_start_after_idle`.
    pub server_ssai: u8,
    pub rtt_ms: f64,
    pub idle_s: f64,
    /// Each click's 25 kB fetch, request sent to last byte, ms.
    pub fetch_ms: Vec<f64>,
    pub fetch_ms_p50: f64,
    /// Each click's first flight: response bytes the server sent before the first ACK of
    /// them could come back (half an RTT), from its capture.
    pub first_flight_bytes: Vec<u64>,
    /// The largest response, bytes, that each click's connection had moved before it.
    pub picked_burst_bytes: Vec<u64>,
    pub connections: u64,
    pub page_load_s: f64,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Results {
    pub oldest: RunMetrics,
    pub largest_burst: RunMetrics,
    /// The control runs, with the server's `tcp_slow_start_after_idle=1`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oldest_ssai: Option<RunMetrics>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub largest_burst_ssai: Option<RunMetrics>,
}

impl Results {
    fn runs(&self) -> Vec<(&'static str, &RunMetrics)> {
        let mut v = vec![
            ("oldest", &self.oldest),
            ("largest-burst", &self.largest_burst),
        ];
        if let (Some(o), Some(l)) = (&self.oldest_ssai, &self.largest_burst_ssai) {
            v.push(("oldest, ssai=1", o));
            v.push(("largest-burst, ssai=1", l));
        }
        v
    }
}

/// What the demo leaves: its results, the terminal table and checks, and where the report is.
pub type Outcome = common::Outcome<Results>;

/// A run: its directory, `--idle-choice`, the server's `tcp_slow_start_after_idle`.
type Spec = (&'static str, &'static str, bool);

/// The runs, the control runs (`tcp_slow_start_after_idle` = 1) last.
const RUNS: [Spec; 4] = [
    ("oldest", "oldest", false),
    ("largest-burst", "largest-burst", false),
    ("oldest-ssai1", "oldest", true),
    ("largest-burst-ssai1", "largest-burst", true),
];

/// The lab of one run: client and server (also named [`HOST`]), one link, the server with
/// `slow_start_after_idle` as given, and the page load that then clicks `clicks` links, each
/// after `idle_s` of idleness, its idle connection picked by `choice`.
pub fn lab_config(
    rtt_ms: f64,
    choice: &str,
    slow_start_after_idle: bool,
    clicks: usize,
    idle_s: f64,
    page_file: &Path,
    seed: u64,
) -> LabConfig {
    let line = Line {
        down: DOWN,
        up: UP,
        rtt_ms,
        queue: QUEUE,
    };
    let follow: String = CLICKS[..clicks]
        .iter()
        .map(|p| format!(" --follow http://{HOST}{p}"))
        .collect();
    let load = format!(
        "exec latencylab page-load http://{HOST}/ --per-host {PER_HOST} --conn-manager pool \
         --idle-choice {choice}{follow} --follow-after {}ms",
        (idle_s * 1e3).round()
    );
    let mut cfg = web_lab(&line, &[HOST], page_file, ("page-load", load), seed);
    for h in cfg.hosts.iter_mut().filter(|h| h.name == "server") {
        h.settings.slow_start_after_idle = slow_start_after_idle;
    }
    cfg
}

/// What one run left: its numbers and what the charts draw.
struct RunData {
    label: &'static str,
    metrics: RunMetrics,
    /// Per response: (connection, sent s, last byte s, bytes, a click).
    responses: Vec<(u64, f64, f64, u64, bool)>,
    /// Each click's response as the server sent it, a staircase from (0, 0): (ms since its
    /// first byte, kB sent by then) at each segment.
    clicks_sent: Vec<Vec<(f64, f64)>>,
}

/// `--clicks`.
fn clicks_of(a: &Args) -> usize {
    a.count("clicks") as usize
}

/// The runs (without the control runs under `--no-control`): what [`run`] runs and
/// `--export` writes. The page file they serve is written into the output directory.
pub fn runs(a: &Args) -> Result<Vec<(Spec, common::Run)>> {
    // The page: a few round trips of slow start for the photo; then each click.
    let rtt_s = a.ms("rtt") / 1e3;
    let expect = 2.5 + 12.0 * rtt_s + clicks_of(a) as f64 * (a.seconds("idle") + 3.0 * rtt_s);
    let page_file = common::page_file(&a.out_dir, "gallery.toml", GALLERY)?;
    Ok(RUNS
        .into_iter()
        .filter(|&(_, _, ssai)| !(ssai && a.flag("no-control")))
        .map(|(dir, choice, ssai)| {
            let config = lab_config(
                a.ms("rtt"),
                choice,
                ssai,
                clicks_of(a),
                a.seconds("idle"),
                &page_file,
                a.seed,
            );
            let msg = format!(
                "{choice}, server tcp_slow_start_after_idle={} ({:.0} ms RTT)",
                u8::from(ssai),
                a.ms("rtt")
            );
            let run = common::Run {
                dir: dir.into(),
                msg,
                expected_s: expect,
                config,
            };
            ((dir, choice, ssai), run)
        })
        .collect())
}

pub fn run(a: &Args) -> Result<Outcome> {
    let (series, data) = common::run_series(a, runs(a)?, (0.0, 4.0), |spec, dir, _| {
        collect(spec, a, dir)
    })?;
    let take = |name: &str| {
        data.iter()
            .find(|d| d.label == name)
            .map(|d| d.metrics.clone())
    };
    let results = Results {
        oldest: take("oldest").context("the oldest run")?,
        largest_burst: take("largest-burst").context("the largest-burst run")?,
        oldest_ssai: take("oldest-ssai1"),
        largest_burst_ssai: take("largest-burst-ssai1"),
    };
    let (checks, rows) = (checks(&results), table_rows(&results));
    series.end(results, checks, rows, |r, c| {
        write_outputs(&a.out_dir, r, c, &data)
    })
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.partial_cmp(b).expect("finite"));
    match s.len() {
        0 => 0.0,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

fn collect((label, choice, ssai): Spec, a: &Args, dir: &Path) -> Result<RunData> {
    let (path, recs) = page_load_records(dir)?;
    let clicks: Vec<String> = CLICKS[..clicks_of(a)]
        .iter()
        .map(|p| format!("http://{HOST}{p}"))
        .collect();
    let mut responses = Vec::new();
    let mut connections = 0;
    for r in &recs {
        match r {
            WebRecord::Resource {
                url,
                conn,
                bytes,
                sent_ms,
                last_byte_ms,
                ..
            } => responses.push((
                *conn,
                sent_ms / 1e3,
                last_byte_ms / 1e3,
                *bytes,
                clicks.contains(url),
            )),
            WebRecord::Page { connections: c, .. } => connections = *c,
            _ => {}
        }
    }
    responses.sort_by(|a, b| a.1.partial_cmp(&b.1).expect("finite"));
    let page_load_s = responses
        .iter()
        .filter(|r| !r.4)
        .map(|r| r.2)
        .fold(0.0, f64::max);
    let mut fetch_ms = Vec::new();
    let mut picked_burst_bytes = Vec::new();
    for (i, r) in responses.iter().enumerate().filter(|(_, r)| r.4) {
        fetch_ms.push((r.2 - r.1) * 1e3);
        // The client's own measure: the largest response on that connection before the click.
        let burst = responses[..i]
            .iter()
            .filter(|p| p.0 == r.0)
            .map(|p| p.3)
            .max()
            .unwrap_or(0);
        picked_burst_bytes.push(burst);
    }
    if fetch_ms.len() != clicks_of(a) {
        bail!(
            "{}: {} of the {} clicks were answered (see programs/page-load.err)",
            path.display(),
            fetch_ms.len(),
            clicks_of(a)
        );
    }
    let pcap = RunDir::new(dir).capture("server", "eth0");
    let bursts = click_bursts(&pcap, clicks_of(a), a.seconds("idle"))?;
    let half_rtt_s = a.ms("rtt") / 2e3;
    let first_flight_bytes = bursts
        .iter()
        .map(|b| {
            b.iter()
                .filter(|(t, _)| *t - b[0].0 < half_rtt_s)
                .map(|(_, len)| *len)
                .sum()
        })
        .collect();
    let clicks_sent = bursts
        .iter()
        .map(|b| {
            let mut sent = 0u64;
            let pts = b.iter().map(|(t, len)| {
                sent += len;
                ((t - b[0].0) * 1e3, sent as f64 / 1e3)
            });
            std::iter::once((0.0, 0.0)).chain(pts).collect()
        })
        .collect();
    Ok(RunData {
        label,
        metrics: RunMetrics {
            idle_choice: choice.into(),
            server_ssai: u8::from(ssai),
            rtt_ms: a.ms("rtt"),
            idle_s: a.seconds("idle"),
            fetch_ms_p50: median(&fetch_ms),
            fetch_ms,
            first_flight_bytes,
            picked_burst_bytes,
            connections,
            page_load_s,
        },
        responses,
        clicks_sent,
    })
}

/// The server's data segments of each click's response, from its capture: every connection
/// to port 80 split into bursts at pauses longer than half the idle time, and the last
/// `clicks` bursts to start, in order (the clicks come after the whole page). Each burst is
/// its segments as (capture time s, payload bytes).
fn click_bursts(pcap: &Path, clicks: usize, idle_s: f64) -> Result<Vec<Vec<(f64, u64)>>> {
    let analysis = common::analyze_pcap(pcap)?;
    let mut bursts: Vec<Vec<(f64, u64)>> = Vec::new();
    for c in &analysis.connections {
        let Some(d) = [&c.a2b, &c.b2a]
            .into_iter()
            .find(|d| d.src.is_some_and(|s| s.port() == 80))
        else {
            continue;
        };
        let mut cur: Vec<(f64, u64)> = Vec::new();
        for s in d.series.segments.iter().filter(|s| s.len > 0) {
            let t = s.time.as_secs_f64();
            if cur.last().is_some_and(|(last, _)| t - last > idle_s / 2.0) {
                bursts.push(std::mem::take(&mut cur));
            }
            cur.push((t, u64::from(s.len)));
        }
        if !cur.is_empty() {
            bursts.push(cur);
        }
    }
    bursts.sort_by(|a, b| a[0].0.partial_cmp(&b[0].0).expect("finite"));
    if bursts.len() < clicks {
        bail!(
            "{}: {} bursts of data from port 80, fewer than the {clicks} clicks",
            pcap.display(),
            bursts.len()
        );
    }
    Ok(bursts.split_off(bursts.len() - clicks))
}

/// The expectations for E13: with the window kept after idle, `largest-burst` takes at
/// most about 60 % of `oldest`'s fetch time (the seed: 793 → 363 ms) because its first flight
/// holds the whole photo; with Linux's default, no real gain.
pub fn checks(r: &Results) -> Vec<Check> {
    let c = |what: String, passed: bool| Check { what, passed };
    let (o, l) = (&r.oldest, &r.largest_burst);
    let ratio = l.fetch_ms_p50 / o.fetch_ms_p50.max(1e-9);
    let one_flight = |m: &RunMetrics| median_u64(&m.first_flight_bytes);
    let mut v = vec![
        c(
            format!(
                "ssai=0: largest-burst fetches the 25 kB photo in {:.0} ms, {:.0} % of oldest's \
                 {:.0} ms, at most about {:.0} % (seed: {SEED_OLDEST_MS:.0} → {SEED_LARGEST_MS:.0} \
                 ms, {:.0} %)",
                l.fetch_ms_p50,
                100.0 * ratio,
                o.fetch_ms_p50,
                100.0 * MAX_RATIO,
                100.0 * SEED_LARGEST_MS / SEED_OLDEST_MS
            ),
            ratio <= MAX_RATIO,
        ),
        c(
            format!(
                "ssai=0: largest-burst's connection sends {:.1} kB in its first flight, \
                 oldest's {:.1} kB (the initial window is {INITIAL_WINDOW} segments, 14.3 kB)",
                one_flight(l) as f64 / 1e3,
                one_flight(o) as f64 / 1e3
            ),
            one_flight(l) > one_flight(o),
        ),
    ];
    if let (Some(o1), Some(l1)) = (&r.oldest_ssai, &r.largest_burst_ssai) {
        let ratio1 = l1.fetch_ms_p50 / o1.fetch_ms_p50.max(1e-9);
        v.push(c(
            format!(
                "ssai=1 (Linux's default): no real gain, largest-burst {:.0} ms against oldest's \
                 {:.0} ms ({:.0} %, at least {:.0} %)",
                l1.fetch_ms_p50,
                o1.fetch_ms_p50,
                100.0 * ratio1,
                100.0 * SAME_RATIO
            ),
            ratio1 >= SAME_RATIO,
        ));
    }
    v
}

fn median_u64(v: &[u64]) -> u64 {
    median(&v.iter().map(|&b| b as f64).collect::<Vec<_>>()) as u64
}

pub fn table_rows(r: &Results) -> (Vec<String>, Vec<Vec<String>>) {
    let runs = r.runs();
    let (mut header, run_row) = common::run_columns(&runs);
    header.push("seed (FF 4)".into());
    let row = |name: &str, seed: &str, f: &dyn Fn(&RunMetrics) -> String| {
        let mut v = run_row(name, f);
        v.push(seed.into());
        v
    };
    // A number per click.
    let each = |v: &[f64]| {
        v.iter()
            .map(|x| format!("{x:.0}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let kb = |v: &[u64]| each(&v.iter().map(|b| *b as f64 / 1e3).collect::<Vec<_>>());
    let rows = vec![
        row("server tcp_slow_start_after_idle", "0", &|m| {
            m.server_ssai.to_string()
        }),
        row("RTT (ms)", "250", &|m| format!("{:.0}", m.rtt_ms)),
        row("idle before each click (s)", "", &|m| {
            format!("{}", m.idle_s)
        }),
        row("picked: its largest response (kB)", "small / 2000+", &|m| {
            kb(&m.picked_burst_bytes)
        }),
        row("first flight of the 25 kB (kB)", "", &|m| {
            kb(&m.first_flight_bytes)
        }),
        row("fetch, each click (ms)", "", &|m| each(&m.fetch_ms)),
        row("fetch p50 (ms)", "793 / 363", &|m| {
            format!("{:.0}", m.fetch_ms_p50)
        }),
        row("page load (s)", "", &|m| format!("{:.2}", m.page_load_s)),
    ];
    (header, rows)
}

const OLDEST: Rgb = common::PAIR_COLORS[0];
const LARGEST: Rgb = common::PAIR_COLORS[1];
const PAGE: Rgb = Rgb(160, 160, 160);
const SEED: Rgb = Rgb(90, 90, 90);

fn color(m: &RunMetrics) -> Rgb {
    if m.idle_choice == "oldest" {
        OLDEST
    } else {
        LARGEST
    }
}

/// One run's connections over time: a row per connection, a bar per response from request
/// sent to last byte; the clicks in the run's colour.
fn connections_chart(run: &RunData) -> Chart {
    let m = &run.metrics;
    let seg = |click: bool| -> Vec<((f64, f64), (f64, f64))> {
        run.responses
            .iter()
            .filter(|r| r.4 == click)
            .map(|r| ((r.1, r.0 as f64), (r.2, r.0 as f64)))
            .collect()
    };
    let labels: Vec<(f64, f64, String)> = run
        .responses
        .iter()
        .filter(|r| r.3 >= 100_000 || r.4)
        .map(|r| {
            let text = if r.4 {
                format!("{:.0} ms", (r.2 - r.1) * 1e3)
            } else {
                format!("{:.1} MB", r.3 as f64 / 1e6)
            };
            ((r.1 + r.2) / 2.0, r.0 as f64 + 0.15, text)
        })
        .collect();
    let picked = if m.idle_choice == "oldest" {
        "Each click takes the connection idle longest: one that carried only thumbnails, so \
         its 25 kB takes two round trips."
    } else {
        "Each click takes the connection that moved the 2 MB photo: its window, kept over the \
         idle spell, sends the 25 kB in one round trip."
    };
    let conns = run.responses.iter().map(|r| r.0).max().unwrap_or(1) as f64;
    Chart::new(
        format!("{}: which connection each click took", m.idle_choice),
        Axis::new("time since the page load started", "s").from_zero(),
        Axis::new("connection", "n").with_range(0.5, conns + 0.6),
    )
    .size(900, 380)
    .caption(format!(
        "Server tcp_slow_start_after_idle={}. A row per connection, a bar per response from \
         request to last byte: grey the page (the long one the 2 MB photo), coloured the \
         clicks on 25 kB photos, each after {} s of idleness. {picked}",
        m.server_ssai, m.idle_s
    ))
    .with(Series::new("page", PAGE, Marks::Segments(seg(false))).stroke(6))
    .with(Series::new("click (25 kB)", color(m), Marks::Segments(seg(true))).stroke(6))
    .with(Series::new("", Rgb(0, 0, 0), Marks::Labels(labels)))
}

/// Every click's response as the server sent it, `oldest` against `largest-burst`, for the
/// runs with the server's `tcp_slow_start_after_idle` = `ssai`.
fn flight_chart(runs: &[RunData], ssai: u8, rtt_ms: f64) -> Chart {
    let runs: Vec<&RunData> = runs
        .iter()
        .filter(|r| r.metrics.server_ssai == ssai)
        .collect();
    let x_max = runs
        .iter()
        .flat_map(|r| r.clicks_sent.iter().flatten().map(|p| p.0))
        .fold(rtt_ms, f64::max)
        * 1.05;
    let what = if ssai == 0 {
        "With the window kept (ssai=0), the 2 MB photo's connection sends all 25 kB at once; a \
         thumbnail's sends its initial window, 14.3 kB, and the rest a round trip later."
    } else {
        "With Linux's default (ssai=1), the 2 MB photo's window is halved for every RTO of \
         idleness, down to the initial 14.3 kB: a click may still find 25 kB of it, the next \
         ones do not."
    };
    let mut chart = Chart::new(
        format!("Each click's 25 kB leaving the server, ssai={ssai}"),
        Axis::new("time since its first byte left the server", "ms")
            .with_range(-0.03 * x_max, x_max),
        Axis::new("response bytes sent", "kB").from_zero(),
    )
    .size(800, 480)
    .caption(format!(
        "From the server's capture, a line per click. A vertical jump is a flight sent at \
         once; the next waits a round trip ({rtt_ms:.0} ms) for ACKs. {what}"
    ));
    for r in runs {
        for (k, pts) in r.clicks_sent.iter().enumerate() {
            let name = if k == 0 {
                r.metrics.idle_choice.clone()
            } else {
                String::new()
            };
            // Oldest wide and under, so that a line the two share shows both colours.
            let width = if r.metrics.idle_choice == "oldest" {
                7
            } else {
                3
            };
            chart.push(Series::step(name, color(&r.metrics), pts.clone()).stroke(width));
        }
    }
    chart
}

/// Each run's fetch times as a horizontal bar to the median with a dot per click, one and two
/// round trips marked, and the talk's two times.
fn fetch_chart(runs: &[RunData], rtt_ms: f64) -> Chart {
    let n = runs.len() as f64;
    let y = |i: usize| n - i as f64;
    let x_max = runs
        .iter()
        .flat_map(|r| r.metrics.fetch_ms.iter().copied())
        .fold(SEED_OLDEST_MS, f64::max)
        * 1.1;
    let mut chart = Chart::new(
        "Fetch time of a 25 kB photo after a click",
        Axis::new("request sent → last byte", "ms").with_range(0.0, x_max),
        Axis::new("run", "n").with_range(0.4, n + 0.8),
    )
    .size(900, 120 + 70 * runs.len() as u32)
    .caption(format!(
        "A bar per run to its median fetch time (labelled), a dot per click; grey lines at one \
         and two round trips ({rtt_ms:.0} and {:.0} ms). The seed's times (grey) are for \
         2011's initial window of 3 or 4 segments, where FIFO took three round trips; today's \
         10 segments leave it two.",
        2.0 * rtt_ms
    ));
    for k in [1.0, 2.0] {
        chart.push(Series::vline("", PAGE, k * rtt_ms, (0.4, n + 0.8)));
    }
    let mut labels = Vec::new();
    let mut seeds = Vec::new();
    for (i, r) in runs.iter().enumerate() {
        let m = &r.metrics;
        let c = color(m);
        let bar = Series::hline("", c, y(i), (0.0, m.fetch_ms_p50));
        chart.push(bar.stroke(if m.server_ssai == 0 { 14 } else { 6 }));
        chart.push(Series::scatter(
            "",
            Rgb(0, 0, 0),
            m.fetch_ms.iter().map(|f| (*f, y(i))).collect(),
        ));
        labels.push((
            m.fetch_ms_p50,
            y(i) + 0.22,
            format!(
                "{}, ssai={}: {:.0} ms",
                m.idle_choice, m.server_ssai, m.fetch_ms_p50
            ),
        ));
        if m.server_ssai == 0 {
            let seed = if m.idle_choice == "oldest" {
                SEED_OLDEST_MS
            } else {
                SEED_LARGEST_MS
            };
            seeds.push((seed, y(i), format!("seed: {seed:.0} ms")));
        }
    }
    chart.push(Series::new("", Rgb(0, 0, 0), Marks::Labels(labels)));
    chart.push(Series::new("", SEED, Marks::Text(seeds)));
    chart
}

fn write_outputs(dir: &Path, results: &Results, checks: &[Check], runs: &[RunData]) -> Result<()> {
    let rtt_ms = results.oldest.rtt_ms;
    let mut page = common::Report::new(
        "Connection choice: a click on the idle connection with the biggest window",
        format!(
            "A photo page (examples/pages/gallery.toml: a 2 MB photo and 8 thumbnails on one \
             host name, {PER_HOST} connections), {DOWN} down / {UP} up, {rtt_ms:.0} ms RTT; then \
             clicks on links to 25 kB photos, each after {} s idle, on the idle connection picked \
             `oldest` or `largest-burst`. The server runs with tcp_slow_start_after_idle=0, as \
             many web servers do, so an idle connection keeps its congestion window{}.",
            results.oldest.idle_s,
            if results.oldest_ssai.is_some() {
                "; the control runs use Linux's default, 1"
            } else {
                ""
            }
        ),
        table_rows(results),
        "'ssai': the server's net.ipv4.tcp_slow_start_after_idle. 'Picked': the \
         largest response the chosen connection had carried before each click \
         (the client's proxy for the server's window). 'First flight': what \
         the server sent of the 25 kB before any ACK could return, from its \
         capture.",
        common::findings(checks),
    );
    let mut conns = [connections_chart(&runs[0]), connections_chart(&runs[1])];
    report::same_scale(&mut conns);
    let [oldest, largest] = conns;
    let row = page.row(vec![
        ("connections-oldest", oldest, true),
        ("connections-largest-burst", largest, true),
    ])?;
    page.section("Which connection each click took", "", vec![row]);
    let mut flights = vec![flight_chart(runs, 0, rtt_ms)];
    if results.oldest_ssai.is_some() {
        flights.push(flight_chart(runs, 1, rtt_ms));
    }
    report::same_scale(&mut flights);
    let ids = ["flights", "flights-ssai1"];
    let row = page.row(
        ids.into_iter()
            .zip(flights)
            .map(|(id, c)| (id, c, true))
            .collect(),
    )?;
    page.section("Why: the window each connection brings", "", vec![row]);
    let fetch = page.figure("fetch-ms", fetch_chart(runs, rtt_ms), true)?;
    page.section("Fetch times", "", vec![Block::Figure(fetch)]);
    let labels: Vec<&str> = runs.iter().map(|r| r.label).collect();
    page.push(
        analyzer_section(dir, &labels)?.with(Block::Paragraph(
            "The analyzer has no diagnosis for a response sent in flights of the initial window \
         after an idle spell (slow start restarting): what it names here is the setup, \
         connections that sat idle between clicks. The flights above are read from each run's \
         server capture (RUN/captures/server-eth0.pcap) through the same analyzer."
                .into(),
        )),
    );
    page.files(&[&format!(
        "{}: each run's lab output: captures/*.pcap, programs/page-load.out (a JSON line per \
         connection and per response, the clicks' too)",
        labels.join("/, ") + "/"
    )]);
    page.write(dir, results)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(choice: &str, ssai: u8, fetch: f64, flight: u64) -> RunMetrics {
        RunMetrics {
            idle_choice: choice.into(),
            server_ssai: ssai,
            rtt_ms: 250.0,
            idle_s: 3.0,
            fetch_ms: vec![fetch; 3],
            fetch_ms_p50: fetch,
            first_flight_bytes: vec![flight; 3],
            picked_burst_bytes: vec![3000; 3],
            connections: 6,
            page_load_s: 3.0,
        }
    }

    #[test]
    fn checks_want_the_big_window_to_halve_the_fetch_only_while_the_server_keeps_it() {
        let good = Results {
            oldest: m("oldest", 0, 510.0, 14_480),
            largest_burst: m("largest-burst", 0, 262.0, 25_200),
            oldest_ssai: Some(m("oldest", 1, 510.0, 14_480)),
            largest_burst_ssai: Some(m("largest-burst", 1, 505.0, 14_480)),
        };
        assert!(checks(&good).iter().all(|c| c.passed));
        let bad = Results {
            oldest: m("oldest", 0, 510.0, 14_480),
            largest_burst: m("largest-burst", 0, 400.0, 14_480),
            oldest_ssai: Some(m("oldest", 1, 510.0, 14_480)),
            largest_burst_ssai: Some(m("largest-burst", 1, 262.0, 25_200)),
        };
        assert_eq!(checks(&bad).iter().filter(|c| !c.passed).count(), 3);
        let no_control = Results {
            oldest_ssai: None,
            largest_burst_ssai: None,
            ..good
        };
        assert_eq!(checks(&no_control).len(), 2);
    }

    #[test]
    fn the_lab_keeps_the_servers_window_only_when_asked_and_clicks_the_links() {
        let page = web::page::Page::parse(GALLERY).unwrap();
        assert_eq!(page.hosts(), [HOST]);
        let linked: Vec<&str> = page
            .resources
            .iter()
            .filter(|r| r.linked)
            .map(|r| r.path.as_str())
            .collect();
        assert_eq!(linked, CLICKS);
        for ssai in [false, true] {
            let cfg = lab_config(
                250.0,
                "largest-burst",
                ssai,
                2,
                3.0,
                Path::new("/p.toml"),
                1,
            );
            cfg.validate().unwrap();
            let server = cfg.hosts.iter().find(|h| h.name == "server").unwrap();
            let client = cfg.hosts.iter().find(|h| h.name == "client").unwrap();
            assert_eq!(server.settings.slow_start_after_idle, ssai);
            assert!(client.settings.slow_start_after_idle);
            assert_eq!(cfg.links[0].down.to_json()["delay"], "125ms");
            let load = &cfg.programs.iter().find(|p| p.wait).unwrap().run;
            assert!(load.contains("--idle-choice largest-burst"), "{load}");
            assert_eq!(
                load.matches("--follow http://www/photo/").count(),
                2,
                "{load}"
            );
            assert!(load.contains("--follow-after 3000ms"), "{load}");
        }
    }

    #[test]
    fn the_median_of_an_even_count_is_the_mean_of_the_middle_two() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(&[]), 0.0);
    }
}
