//! `latencylab demo responsiveness`: responsiveness under working conditions (RPM,
//! draft-ietf-ippm-responsiveness-09) on the bufferbloat demo's home line under five queue
//! disciplines, with where each test's round trips went, queue by queue.
//!
//! The line: 10 Mbit/s down, 1 Mbit/s up, 10 ms each way (the bufferbloat demo's), the same
//! queue discipline on both directions of the gateway: the bufferbloat demo's 300-packet FIFO,
//! CoDel (RFC 8289), FQ-CoDel (RFC 8290), PIE (RFC 8033) and DualPI2 (RFC 9332), the AQMs with
//! Linux's defaults and marking ECN, which both hosts ask for in every run. `rpm-server` runs
//! in the server, `rpm` in the client with Flent's RRUL load (four flows each way, [`FLOWS`]);
//! same seed, same time limit.
//!
//! Measured: the test's RPM and its confidence, foreign and self probes' round trips (the
//! client's JSON report), and the loaded round trip `60000 / RPM` taken apart from the link
//! logs ([`rpm::attribution`]): the time the probes sat in each queue, the base RTT, and what
//! the hosts held: in the client (a self probe's request in its own send buffer, a foreign
//! probe's TLS and HTTP work), in the server (a self probe's answer behind the download's
//! data, a foreign probe's replies), each measured from the probe's own packets.
//!
//! This module runs and presents; it does not judge: the expectations are printed as checks,
//! and the end-to-end test asserts them.

use std::fs;
use std::path::Path;

use anyhow::{Context, Result};
use lab::config::{EcnMode, LabConfig};
use labnet::rpm_lab::{RpmInLab, RPM_PROGRAM, RPM_SERVER_PROGRAM};
use labnet::run_dir::RunDir;
use report::{Axis, Block, Chart, Marks, Rgb, Series};
use rpm::attribution::{Attribution, Part};
use rpm::report::RpmReport;
use serde::Serialize;

use crate::bufferbloat;
use crate::common::{self, Check};
use crate::params::Args;

/// When the client starts, s after the lab: the server listens by then.
const CLIENT_START_S: f64 = 0.5;
/// Load-generating connections each way, from the start: Flent's RRUL load (four TCP flows
/// up, four down). The draft's own ramp (one more each interval, up to 16) does not settle on
/// this line: sixteen uploads share 1 Mbit/s at under two packets per round trip each, a
/// load no queue discipline can keep short, and the test ends with Low confidence.
pub const FLOWS: u16 = 4;
/// Round-trip propagation delay of the line, ms (10 ms each way).
pub const BASE_RTT_MS: f64 = bufferbloat::BASE_RTT_MS;

/// The runs: directory, label and queue spec, FIFO first.
pub const QUEUES: [(&str, &str, &str); 5] = [
    ("fifo", "FIFO", bufferbloat::FIFO_QUEUE),
    ("codel", "CoDel", bufferbloat::CODEL_QUEUE),
    ("fq-codel", "FQ-CoDel", "fq_codel"),
    ("pie", "PIE", "pie ecn"),
    ("dualpi2", "DualPI2", "dualpi2"),
];

/// One run's numbers, as `results.json` writes them.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct RunMetrics {
    pub label: String,
    pub queue: String,
    /// `None` when no foreign or no self probe completed in the test's last intervals (the
    /// path let none through in time).
    pub rpm: Option<f64>,
    pub confidence: String,
    /// Foreign and self probes completed in the whole test.
    pub foreign_probes: usize,
    pub self_probes: usize,
    pub flows_down: usize,
    pub flows_up: usize,
    pub down_mbps: f64,
    pub up_mbps: f64,
    /// The idle latency: the median round trip of the foreign probes run before the load, ms.
    pub idle_rtt_ms: Option<f64>,
    /// The loaded round trip `60000 / RPM` taken apart (with the RPM).
    pub attribution: Option<Attribution>,
}

impl RunMetrics {
    /// The foreign probes' time in the path's queues, per round trip, ms.
    /// (NaN without an RPM, so that no comparison holds.)
    pub fn foreign_queue_ms(&self) -> f64 {
        self.attribution
            .as_ref()
            .map_or(f64::NAN, |a| a.foreign.queues_ms.iter().sum())
    }
    /// The loaded round trip's time in the path's queues, ms (NaN without an RPM).
    pub fn queue_ms(&self) -> f64 {
        self.attribution
            .as_ref()
            .map_or(f64::NAN, |a| a.queues.iter().map(|q| q.ms).sum())
    }
    /// The RPM, 0 without one: a path that let no probe through in time is the least
    /// responsive.
    pub fn rpm_or_zero(&self) -> f64 {
        self.rpm.unwrap_or(0.0)
    }
    /// How far the attribution's named parts are from the loaded round trip, as a share of
    /// it (NaN without an RPM).
    pub fn unexplained_share(&self) -> f64 {
        self.attribution
            .as_ref()
            .map_or(f64::NAN, |a| 1.0 - a.named_share())
    }
}

/// `results.json`.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Results {
    pub base_rtt_ms: f64,
    pub duration_s: f64,
    /// In the order of [`QUEUES`].
    pub runs: Vec<RunMetrics>,
}

impl Results {
    fn run(&self, label: &str) -> Option<&RunMetrics> {
        self.runs.iter().find(|r| r.label == label)
    }
}

/// What the demo leaves.
pub type Outcome = common::Outcome<Results>;

/// The lab of one run.
pub fn lab_config(queue: &str, duration_s: f64, seed: u64) -> LabConfig {
    // Between `shell`'s two hosts, as a run file's `[rpm]` starts it; the client writes its
    // report into the run directory. The lab ends with the client.
    let test = RpmInLab {
        flows: Some(FLOWS),
        max_duration: Some(wire::Duration::from_secs_f64(duration_s)),
        seed: Some(seed),
        ..RpmInLab::default()
    };
    common::two_hosts(
        seed,
        [
            common::host("client", 1, EcnMode::On),
            common::host("server", 2, EcnMode::On),
        ],
        (
            "path",
            common::direction("1mbit", "10ms", queue),
            common::direction("10mbit", "10ms", queue),
        ),
        vec![
            common::program(
                RPM_SERVER_PROGRAM,
                "server",
                0.0,
                test.server_line("latencylab"),
                false,
            ),
            common::program(
                RPM_PROGRAM,
                "client",
                CLIENT_START_S,
                test.client_line("latencylab"),
                true,
            ),
        ],
    )
}

/// The runs: what [`run`] runs and `--export` writes.
pub fn runs(a: &Args) -> Vec<((&'static str, &'static str), common::Run)> {
    QUEUES
        .iter()
        .map(|&(dir, label, queue)| {
            let run = common::Run {
                dir: dir.into(),
                msg: format!("{label} ({queue}), at most {:.0} s", a.seconds("duration")),
                expected_s: a.seconds("duration") + CLIENT_START_S + 1.5,
                config: lab_config(queue, a.seconds("duration"), a.seed),
            };
            ((label, queue), run)
        })
        .collect()
}

/// Runs the labs, reads them back and writes `results.json`, the PNG and `report.html`.
pub fn run(a: &Args) -> Result<Outcome> {
    let (series, runs) = common::run_series(a, runs(a), (1.0, 2.0), |(label, queue), dir, r| {
        collect(label, queue, dir, r)
    })?;
    let results = Results {
        base_rtt_ms: BASE_RTT_MS,
        duration_s: a.seconds("duration"),
        runs,
    };
    let (checks, rows) = (checks(&results), table_rows(&results));
    series.end(results, checks, rows, |r, c| write_outputs(a, r, c))
}

/// Reads one run back: the client's report and the attribution from the link logs.
fn collect(label: &str, queue: &str, dir: &Path, result: &lab::RunResult) -> Result<RunMetrics> {
    let rd = RunDir::new(dir);
    let out = rd.rpm_json();
    let text = fs::read_to_string(&out)
        .with_context(|| format!("reading {} (see programs/{RPM_PROGRAM}.err)", out.display()))?;
    let report: RpmReport = serde_json::from_str(&text).with_context(|| {
        format!(
            "{}: not the client's JSON report (see programs/{RPM_PROGRAM}.err)",
            out.display()
        )
    })?;
    let attribution = match report.rpm {
        Some(_) => Some(
            rpm::run::attribution_of(dir, &report, &result.summary)?.with_context(|| {
                format!("{}: no probe left packets in the link logs", dir.display())
            })?,
        ),
        None => None,
    };
    Ok(RunMetrics {
        label: label.into(),
        queue: queue.into(),
        rpm: report.rpm,
        confidence: report.rpm_confidence.name().into(),
        foreign_probes: report.foreign.total,
        self_probes: report.self_probes.total,
        flows_down: report.flows_down,
        flows_up: report.flows_up,
        down_mbps: report.down_bps / 1e6,
        up_mbps: report.up_bps / 1e6,
        idle_rtt_ms: report.idle.round_trip_ms,
        attribution,
    })
}

/// How far the named parts of a loaded round trip may be from the whole.
pub const ADDS_UP_WITHIN: f64 = 0.05;

/// The expectations, on these numbers.
pub fn checks(r: &Results) -> Vec<Check> {
    let c = |what: String, passed: bool| Check { what, passed };
    let mut v = Vec::new();
    let (Some(fifo), Some(codel), Some(fq), Some(pie), Some(dualpi2)) = (
        r.run("FIFO"),
        r.run("CoDel"),
        r.run("FQ-CoDel"),
        r.run("PIE"),
        r.run("DualPI2"),
    ) else {
        return vec![c("all five runs measured an RPM".into(), false)];
    };
    let aqms = [codel, fq, pie, dualpi2];
    let lowest = aqms
        .iter()
        .min_by(|a, b| a.rpm_or_zero().total_cmp(&b.rpm_or_zero()))
        .expect("four AQMs");
    v.push(c(
        format!(
            "FIFO's RPM {} is the lowest of the five (next: {}'s {}): bufferbloat is what the \
             test measures (draft section 1)",
            rpm_text(fifo),
            lowest.label,
            rpm_text(lowest)
        ),
        fifo.rpm.is_some() && aqms.iter().all(|a| fifo.rpm_or_zero() < a.rpm_or_zero()),
    ));
    // The AQM whose queues held the probes longest, or the first that measured nothing.
    let most = aqms
        .iter()
        .max_by(|a, b| {
            let key = |m: &RunMetrics| {
                if m.queue_ms().is_finite() {
                    m.queue_ms()
                } else {
                    f64::INFINITY
                }
            };
            key(a).total_cmp(&key(b))
        })
        .expect("four AQMs");
    v.push(c(
        format!(
            "the probes spent at least 4 × longer in the FIFO's queues ({} ms of the loaded \
             round trip) than in any AQM's (most: {}'s {} ms): the 300-packet FIFO fills, \
             each AQM holds its queue near its target (RFC 8289 §4.4, RFC 8290 §4.2, RFC 8033 \
             §4.2, RFC 9332 Appendix A)",
            ms_text(fifo.queue_ms(), 0),
            most.label,
            ms_text(most.queue_ms(), 0)
        ),
        aqms.iter().all(|a| fifo.queue_ms() >= 4.0 * a.queue_ms()),
    ));
    v.push(c(
        format!(
            "FQ-CoDel: foreign probes hardly queue ({:.1} ms per round trip in the queues, \
             less than the {:.0} ms base RTT): a new connection is a new flow, served first \
             (RFC 8290 §4.2)",
            fq.foreign_queue_ms(),
            r.base_rtt_ms
        ),
        fq.foreign_queue_ms() < r.base_rtt_ms,
    ));
    v.push(c(
        format!(
            "FQ-CoDel's RPM {} ≥ CoDel's {}: the same control law, and flow queueing \
             keeps the foreign probes out of the load's queue (RFC 8290 §4.2)",
            rpm_text(fq),
            rpm_text(codel)
        ),
        fq.rpm.is_some() && fq.rpm_or_zero() >= codel.rpm_or_zero(),
    ));
    v.push(c(
        format!(
            "foreign probes queue less under CoDel ({} ms per round trip) than under PIE \
             ({} ms) and DualPI2 ({} ms): a 5 ms target against 15 ms (RFC 8289 §4.4, \
             RFC 8033 §4.2, RFC 9332 Appendix A)",
            ms_text(codel.foreign_queue_ms(), 1),
            ms_text(pie.foreign_queue_ms(), 1),
            ms_text(dualpi2.foreign_queue_ms(), 1)
        ),
        codel.foreign_queue_ms() < pie.foreign_queue_ms()
            && codel.foreign_queue_ms() < dualpi2.foreign_queue_ms(),
    ));
    // The run furthest from adding up, or the first without an RPM to take apart.
    let worst = r
        .runs
        .iter()
        .max_by(|a, b| {
            let d = |m: &RunMetrics| {
                let x = m.unexplained_share().abs();
                if x.is_finite() {
                    x
                } else {
                    f64::INFINITY
                }
            };
            d(a).total_cmp(&d(b))
        })
        .expect("five runs");
    let furthest = match worst.attribution {
        Some(_) => format!(
            "{} at {:.1} %",
            worst.label,
            (1.0 - worst.unexplained_share()) * 100.0
        ),
        None => format!("{}, which measured no RPM", worst.label),
    };
    v.push(c(
        format!(
            "the attribution adds up: queues, base RTT, transmission, loss recovery, the client \
             and the server make each run's loaded round trip within {:.0} % \
             (furthest: {furthest})",
            ADDS_UP_WITHIN * 100.0,
        ),
        r.runs
            .iter()
            .all(|m| m.unexplained_share().abs() <= ADDS_UP_WITHIN),
    ));
    v
}

/// "16.9" with `decimals`, or "none" for a figure a test without an RPM does not have.
fn ms_text(ms: f64, decimals: usize) -> String {
    if ms.is_finite() {
        format!("{ms:.decimals$}")
    } else {
        "none".into()
    }
}

/// "727", or "none" for a test that measured no RPM.
fn rpm_text(m: &RunMetrics) -> String {
    m.rpm.map_or_else(|| "none".into(), |x| format!("{x:.0}"))
}

/// The side-by-side table: header and rows.
pub fn table_rows(r: &Results) -> (Vec<String>, Vec<Vec<String>>) {
    let runs: Vec<(&str, &RunMetrics)> = r.runs.iter().map(|m| (m.label.as_str(), m)).collect();
    let (header, row) = common::run_columns(&runs);
    // A cell of the attribution, "-" for a test without an RPM.
    fn att(m: &RunMetrics, f: impl Fn(&Attribution) -> String) -> String {
        m.attribution.as_ref().map_or_else(|| "-".into(), f)
    }
    fn part(m: &RunMetrics, get: fn(&Attribution) -> f64) -> String {
        att(m, |a| {
            let ms = get(a);
            format!("{ms:.0} ms ({:.0} %)", ms / a.loaded_rtt_ms * 100.0)
        })
    }
    fn queue(m: &RunMetrics, side: &str) -> String {
        att(m, |a| {
            let ms = a
                .queues
                .iter()
                .filter(|q| q.side == side)
                .map(|q| q.ms)
                .sum::<f64>();
            format!("{ms:.0} ms ({:.0} %)", ms / a.loaded_rtt_ms * 100.0)
        })
    }
    let rows = vec![
        row("RPM", &|m| format!("{} ({})", rpm_text(m), m.confidence)),
        row("foreign probes' round trip (ms)", &|m| {
            att(m, |a| format!("{:.0}", a.foreign.round_trip_ms))
        }),
        row("self probes' round trip (ms)", &|m| {
            att(m, |a| format!("{:.0}", a.self_probes.round_trip_ms))
        }),
        row("idle round trip, before the load (ms)", &|m| {
            m.idle_rtt_ms
                .map_or_else(|| "-".into(), |ms| format!("{ms:.0}"))
        }),
        row("loaded round trip, 60000 / RPM (ms)", &|m| {
            att(m, |a| format!("{:.0}", a.loaded_rtt_ms))
        }),
        row("  in the up queue", &|m| queue(m, "up")),
        row("  in the down queue", &|m| queue(m, "down")),
        row("  base RTT", &|m| part(m, |a| a.base_rtt_ms)),
        row("  transmission", &|m| part(m, |a| a.transmission_ms)),
        row("  in the client", &|m| part(m, |a| a.client_send_ms)),
        row("  in the server", &|m| part(m, |a| a.server_ms)),
        row("  loss recovery", &|m| part(m, |a| a.loss_recovery_ms)),
        row("  unexplained (hosts)", &|m| part(m, |a| a.hosts_ms)),
        row("foreign probes' time in queues (ms)", &|m| {
            att(m, |_| format!("{:.1}", m.foreign_queue_ms()))
        }),
        row("probes completed, foreign / self", &|m| {
            format!("{} / {}", m.foreign_probes, m.self_probes)
        }),
        row("load flows down / up", &|m| {
            format!("{} / {}", m.flows_down, m.flows_up)
        }),
        row("goodput down / up (Mbit/s)", &|m| {
            format!("{:.1} / {:.2}", m.down_mbps, m.up_mbps)
        }),
    ];
    (header, rows)
}

/// A part's colour wherever a loaded round trip is drawn cut into its parts (this demo's bars
/// and `latencylab report`'s `rpm.png`): the queues in warm colours, the `nth_queue`-th queue
/// drawn taking the `nth_queue`-th (here the up queue is the first and the down queue the
/// second), the other parts one colour each.
pub fn part_color(part: &Part, nth_queue: usize) -> Rgb {
    const QUEUES: [Rgb; 4] = [
        Rgb(213, 94, 0),
        Rgb(230, 159, 0),
        Rgb(160, 60, 30),
        Rgb(240, 200, 90),
    ];
    match part {
        Part::Queue { .. } => QUEUES[nth_queue % QUEUES.len()],
        Part::BaseRtt => Rgb(0, 114, 178),
        Part::Transmission => Rgb(90, 90, 200),
        Part::Client => Rgb(0, 158, 115),
        Part::Server => Rgb(204, 121, 167),
        Part::LossRecovery => Rgb(86, 180, 233),
        Part::Unexplained => Rgb(150, 150, 150),
    }
}

/// A queue of this demo's chart: every queue one way stands for all of them.
const fn queue(side: &'static str) -> Part<'static> {
    Part::Queue {
        link: "",
        side,
        queue: "",
    }
}

/// The parts of a loaded round trip in the chart's order, each with the attribution's part
/// whose colour it takes.
const PARTS: [(&str, Part<'static>); 8] = [
    ("up queue", queue("up")),
    ("down queue", queue("down")),
    ("base RTT", Part::BaseRtt),
    ("transmission", Part::Transmission),
    ("client", Part::Client),
    ("server", Part::Server),
    ("loss recovery", Part::LossRecovery),
    ("unexplained", Part::Unexplained),
];

/// The loaded round trip's parts, ms, in the order of [`PARTS`]: the attribution's, its
/// queues added up by direction.
fn parts_ms(a: &Attribution) -> [f64; 8] {
    let mut ms = [0.0; 8];
    for (part, x) in a.parts() {
        let k = match part {
            Part::Queue { side: "up", .. } => 0,
            Part::Queue { .. } => 1,
            Part::BaseRtt => 2,
            Part::Transmission => 3,
            Part::Client => 4,
            Part::Server => 5,
            Part::LossRecovery => 6,
            Part::Unexplained => 7,
        };
        ms[k] += x;
    }
    ms
}

/// One bar per run: its loaded round trip cut into its parts, as shares (the FIFO's is
/// seconds, the AQMs' tens of milliseconds), labelled with the RPM and the round trip.
fn parts_chart(r: &Results) -> Chart {
    let n = r.runs.len() as f64;
    let y = |i: usize| n - i as f64;
    let mut chart = Chart::new(
        "Where the loaded round trip went, by queue discipline",
        Axis::new("share of the loaded round trip (60000 / RPM)", "%").with_range(0.0, 100.0),
        Axis::new("queue discipline", "")
            .with_range(0.4, n + 0.9)
            .categories(
                r.runs
                    .iter()
                    .enumerate()
                    .map(|(i, m)| (y(i), m.label.clone()))
                    .collect(),
            ),
    )
    .size(900, 140 + 80 * r.runs.len() as u32)
    .caption(format!(
        "Each bar is one test's loaded round trip, cut by where its probes' packets were: the \
         path's queues and propagation (link logs), transmission, the client and the server \
         (from each probe's own packets), loss recovery, and what nothing names (grey). \
         Home line {:.0} ms, 10 Mbit/s down, 1 Mbit/s up; four load flows each way; {} s at \
         most per test.",
        r.base_rtt_ms, r.duration_s
    ));
    let mut labels = Vec::new();
    // Per part, its bars' segments ((x0, y), (x1, y)).
    let mut bars: Vec<Vec<report::Segment>> = vec![Vec::new(); PARTS.len()];
    for (i, m) in r.runs.iter().enumerate() {
        let Some(a) = &m.attribution else {
            labels.push((
                50.0,
                y(i) + 0.3,
                format!(
                    "no RPM: {} foreign probes completed, none in the test's last intervals",
                    m.foreign_probes
                ),
            ));
            continue;
        };
        for (k, segment) in report::share_bar(&parts_ms(a), y(i))
            .into_iter()
            .enumerate()
        {
            bars[k].extend(segment);
        }
        labels.push((
            50.0,
            y(i) + 0.3,
            format!(
                "RPM {}, loaded round trip {:.0} ms",
                rpm_text(m),
                a.loaded_rtt_ms
            ),
        ));
    }
    for (k, ((name, part), segs)) in PARTS.iter().zip(bars).enumerate() {
        chart.push(
            Series::new(*name, part_color(part, k), Marks::Segments(segs))
                .stroke(22)
                .keep_in_legend(),
        );
    }
    chart.push(Series::new("", Rgb(0, 0, 0), Marks::Labels(labels)));
    chart
}

fn write_outputs(a: &Args, r: &Results, checks: &[Check]) -> Result<()> {
    let mut page = common::Report::new(
        "Responsiveness under working conditions, queue by queue",
        format!(
            "latencylab rpm (draft-ietf-ippm-responsiveness-09) against rpm-server over the \
             bufferbloat demo's home line, 10 Mbit/s down and 1 Mbit/s up, 10 ms each way, the \
             same queue discipline both ways: FIFO ({}), CoDel ({}), FQ-CoDel, PIE (pie ecn) \
             and DualPI2, both hosts asking for ECN; {FLOWS} load-generating connections each \
             way (Flent's RRUL load); each test ends at stable working conditions or after \
             {:.0} s; seed {}.",
            bufferbloat::FIFO_QUEUE,
            bufferbloat::CODEL_QUEUE,
            a.seconds("duration"),
            a.seed
        ),
        table_rows(r),
        "RPM is the mean of the foreign and the loaded responsiveness (draft section 5.3.1), \
         so its round trip 60000 / RPM weighs foreign and self probes as the RPM does; each \
         part below it is that round trip's share spent there. A self probe goes on a loaded \
         connection: its request waits behind the upload in the client's own buffers, its \
         answer behind the download in the server's (draft section 6.1.1 asks both to keep \
         them small).",
        common::findings(checks),
    );
    let parts = page.figure("parts", parts_chart(r), false)?;
    page.section("Where the round trips went", "", vec![Block::Figure(parts)]);
    page.files(&[
        "fifo/, codel/, fq-codel/, pie/, dualpi2/: each run's lab output: \
         captures/*.pcap, summary.json, lab.json, links/*.log, rpm.json (the client's \
         report, every probe kept)",
    ]);
    page.write(&a.out_dir, r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rpm::attribution::{KindAttribution, QueuePart};

    fn kind(rt: f64, queues: [f64; 2]) -> KindAttribution {
        KindAttribution {
            round_trip_ms: rt,
            queues_ms: queues.to_vec(),
            base_rtt_ms: 20.0,
            transmission_ms: 0.0,
            loss_recovery_ms: 0.0,
            client_send_ms: 0.0,
            server_ms: 0.0,
            hosts_ms: rt - 20.0 - queues[0] - queues[1],
            probes: 10,
            probes_by_packet: 0,
        }
    }

    /// A run whose loaded round trip `60000 / rpm` is `queues` (up, down), 20 ms base RTT,
    /// `hosts` left unexplained and the rest in the client.
    fn metrics(label: &str, rpm: f64, foreign_queue_ms: f64, hosts_ms: f64) -> RunMetrics {
        let loaded = 60_000.0 / rpm;
        let q = (loaded - 20.0) * 0.3;
        let queue = |side: &str, ms: f64| QueuePart {
            link: "path".into(),
            side: side.into(),
            queue: "q".into(),
            ms,
            share: ms / loaded,
        };
        RunMetrics {
            label: label.into(),
            queue: "q".into(),
            rpm: Some(rpm),
            confidence: "High".into(),
            foreign_probes: 100,
            self_probes: 100,
            flows_down: 4,
            flows_up: 4,
            down_mbps: 9.5,
            up_mbps: 0.9,
            idle_rtt_ms: Some(23.0),
            attribution: Some(Attribution {
                rpm,
                confidence: "High".into(),
                loaded_rtt_ms: loaded,
                queues: vec![queue("up", q), queue("down", q)],
                base_rtt_ms: 20.0,
                transmission_ms: 0.0,
                loss_recovery_ms: 0.0,
                client_send_ms: loaded - 20.0 - 2.0 * q - hosts_ms,
                server_ms: 0.0,
                hosts_ms,
                foreign: kind(20.0 + foreign_queue_ms, [foreign_queue_ms, 0.0]),
                self_probes: kind(loaded, [q, q]),
            }),
        }
    }

    fn results(fifo_rpm: f64, fq_foreign_ms: f64, hosts_ms: f64) -> Results {
        Results {
            base_rtt_ms: 20.0,
            duration_s: 15.0,
            runs: vec![
                metrics("FIFO", fifo_rpm, 1500.0, 1.0),
                metrics("CoDel", 400.0, 12.0, 1.0),
                metrics("FQ-CoDel", 600.0, fq_foreign_ms, hosts_ms),
                metrics("PIE", 300.0, 30.0, 1.0),
                metrics("DualPI2", 300.0, 28.0, 1.0),
            ],
        }
    }

    #[test]
    fn the_checks_pass_on_the_expected_order_and_fail_each_on_its_own() {
        assert!(checks(&results(30.0, 2.0, 1.0)).iter().all(|c| c.passed));
        let failed = |r: Results| -> Vec<String> {
            checks(&r)
                .into_iter()
                .filter(|c| !c.passed)
                .map(|c| c.what)
                .collect()
        };
        // A FIFO more responsive than PIE, its queues not 4 × theirs.
        let f = failed(results(350.0, 2.0, 1.0));
        assert_eq!(f.len(), 2, "{f:?}");
        assert!(f[0].starts_with("FIFO's RPM 350 is the lowest"), "{f:?}");
        assert!(f[1].starts_with("the probes spent at least 4 ×"), "{f:?}");
        // FQ-CoDel's foreign probes queuing as long as the base RTT.
        let f = failed(results(30.0, 20.0, 1.0));
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(
            f[0].starts_with("FQ-CoDel: foreign probes hardly queue"),
            "{f:?}"
        );
        // 10 % of FQ-CoDel's loaded round trip unexplained.
        let f = failed(results(30.0, 2.0, 10.0));
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(f[0].contains("furthest: FQ-CoDel at 90.0 %"), "{f:?}");
    }

    #[test]
    fn a_test_without_an_rpm_is_shown_as_none_and_fails_the_checks_that_need_it() {
        let mut r = results(30.0, 2.0, 1.0);
        r.runs[1].rpm = None;
        r.runs[1].attribution = None;
        let (_, rows) = table_rows(&r);
        assert_eq!(rows[0][2], "none (High)");
        assert_eq!(rows[1][2], "-");
        let failed: Vec<String> = checks(&r)
            .into_iter()
            .filter(|c| !c.passed)
            .map(|c| c.what)
            .collect();
        // No RPM is no responsiveness at all: the FIFO is then not the least responsive, and
        // nothing about CoDel's queues or parts can hold.
        assert!(
            failed[0].starts_with("FIFO's RPM 30 is the lowest of the five (next: CoDel's none)"),
            "{failed:?}"
        );
        assert!(
            failed
                .iter()
                .any(|f| f.contains("(furthest: CoDel, which measured no RPM)")),
            "{failed:?}"
        );
        assert!(
            failed.iter().any(|f| f.contains("(most: CoDel's none ms)")),
            "{failed:?}"
        );
        assert!(parts_chart(&r).to_png().is_ok());
    }

    #[test]
    fn the_labs_differ_only_in_the_queue() {
        let opts = Args::of("responsiveness", "x".into(), &[("seed", "3")]).unwrap();
        let rs = runs(&opts);
        assert_eq!(rs.len(), 5);
        let first = &rs[0].1.config;
        for ((_, q), run) in &rs {
            run.config.validate().unwrap();
            assert_eq!(run.config.hosts, first.hosts);
            assert_eq!(run.config.programs, first.programs);
            let l = &run.config.links[0];
            assert_eq!(l.up.queue, l.down.queue, "{q}");
        }
        assert!(first.programs[1]
            .run
            .contains("rpm https://server:4043 --flows 4 --max-duration 15s --seed 3"));
    }

    #[test]
    fn the_chart_has_a_bar_per_run_summing_to_the_whole() {
        let r = results(30.0, 2.0, 1.0);
        for m in &r.runs {
            let a = m.attribution.as_ref().unwrap();
            let total: f64 = parts_ms(a).iter().sum();
            assert!((total - a.loaded_rtt_ms).abs() < 1e-6);
        }
        let c = parts_chart(&r);
        assert!(c.to_png().is_ok());
    }
}
