//! `latencylab demo nagle`: a request/response application over a satellite path, each
//! 70-byte message written with two `write()` calls (28 + 42 bytes) in both directions, three
//! times: as written (Nagle's algorithm on, Linux's default), with TCP_NODELAY, and with one
//! `writev()` per message (experiment E7, "the nagle finagle" of the 1998 talk).
//!
//! The path: 155 Mbit/s each way, 250 ms each way (500 ms base RTT), a geostationary hop. The
//! client writes a request, waits for the whole response, thinks 200 ms, and writes the next;
//! the server answers only a whole request. With Nagle on, the 42-byte half of every message
//! waits in the sender's kernel until the 28-byte half is acknowledged (RFC 896; RFC 9293
//! §3.7.4: no new small segment while a small one is unacknowledged), in both directions, so an
//! exchange takes three round trips instead of one.
//!
//! Measured: each exchange's time at the client (`rr-client`), the analyzer's diagnoses from
//! both hosts' captures, and one exchange drawn as a ladder (message-sequence) diagram from
//! the two captures.
//!
//! This module runs and presents; it does not judge: the experiment's criteria are printed as
//! checks, and the end-to-end test asserts them.

use std::path::Path;

use analyze::{Analysis, Connection};
use anyhow::{bail, Context, Result};
use lab::config::{EcnMode, LabConfig};
use labnet::run_dir::RunDir;
use report::{Axis, Block, Chart, Marks, Page, Rgb, Section, Series};
use serde::Serialize;
use wire::Instant;

use crate::common::{self, Check};
use crate::params::Args;

/// Round-trip propagation delay of the satellite hop, ms (250 ms each way).
pub const BASE_RTT_MS: f64 = 500.0;
/// The hop's capacity each way (the talk's OC-3).
pub const CAPACITY: &str = "155mbit";
/// The request/response port (rr-server's default).
const RR_PORT: u16 = 5206;
/// Think time between a response and the next request.
const THINK: &str = "200ms";
/// When the client starts, s after the lab: the server is listening by then.
const CLIENT_START_S: f64 = 0.5;
/// The request/response message length (`apps::rr`): 28 + 42 bytes.
const MESSAGE_LEN: u64 = apps::rr::MESSAGE_LEN as u64;

/// The three runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    Nagle,
    Nodelay,
    Writev,
}

impl Variant {
    pub const ALL: [Variant; 3] = [Variant::Nagle, Variant::Nodelay, Variant::Writev];

    /// The run's directory and key in `results.json`.
    pub fn name(self) -> &'static str {
        match self {
            Variant::Nagle => "nagle",
            Variant::Nodelay => "nodelay",
            Variant::Writev => "writev",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Variant::Nagle => "A: two write()s, Nagle on",
            Variant::Nodelay => "B: two write()s, TCP_NODELAY",
            Variant::Writev => "C: one writev()",
        }
    }

    /// The options of both `rr` programs.
    fn flags(self) -> &'static str {
        match self {
            Variant::Nagle => "",
            Variant::Nodelay => " --nodelay",
            Variant::Writev => " --writev",
        }
    }

    fn color(self) -> Rgb {
        match self {
            Variant::Nagle => Rgb(213, 94, 0),
            Variant::Nodelay => Rgb(0, 114, 178),
            // Not green: green is the ladder's pure ACK.
            Variant::Writev => Rgb(204, 121, 167),
        }
    }
}

/// One run's numbers, as `results.json` writes them.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct RunMetrics {
    /// How both programs wrote their messages: `write+write`, `write+write nodelay`, `writev`.
    pub write_style: String,
    /// Request written to whole response read, at the client.
    pub exchange_ms_p50: f64,
    pub exchange_ms_p95: f64,
    pub exchanges: u64,
    /// The analyzer's diagnosis kinds for the request/response connection, from both captures.
    pub diagnoses: Vec<String>,
}

/// `results.json`.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Results {
    pub base_rtt_ms: f64,
    pub duration_s: f64,
    pub nagle: RunMetrics,
    pub nodelay: RunMetrics,
    pub writev: RunMetrics,
}

/// What the demo leaves: its results, the terminal table and checks, and where the report is.
pub type Outcome = common::Outcome<Results>;

/// One arrow of a ladder diagram: a packet leaving one host and reaching the other.
#[derive(Clone, Debug, PartialEq)]
pub struct Arrow {
    pub from_client: bool,
    /// Seconds since the exchange's first request byte left the client.
    pub depart_s: f64,
    pub arrive_s: f64,
    /// "28 B", "42 B", "ACK".
    pub label: String,
}

/// One run's measurements with what the charts need.
struct RunData {
    variant: Variant,
    metrics: RunMetrics,
    /// (s since the lab started, exchange time in ms).
    exchanges: Vec<(f64, f64)>,
    /// One exchange drawn from both captures, and how long it took (s).
    ladder: Vec<Arrow>,
    ladder_s: f64,
    analysis: Analysis,
}

/// The lab of one run.
pub fn lab_config(v: Variant, duration_s: f64, seed: u64) -> LabConfig {
    let sat = || common::direction(CAPACITY, "250ms", "fifo limit 1000");
    common::two_hosts(
        seed,
        [
            common::host("client", 1, EcnMode::Passive),
            common::host("server", 2, EcnMode::Passive),
        ],
        ("satellite", sat(), sat()),
        vec![
            common::program(
                "rr-server",
                "server",
                0.0,
                format!("exec latencylab rr-server{}", v.flags()),
                false,
            ),
            common::program(
                "rr-client",
                "client",
                CLIENT_START_S,
                format!(
                    "exec latencylab rr-client server{} --interval {THINK} --duration {:.0}ms",
                    v.flags(),
                    duration_s * 1000.0
                ),
                true,
            ),
        ],
    )
}

/// The runs: what [`run`] runs and `--export` writes.
pub fn runs(a: &Args) -> Vec<(Variant, common::Run)> {
    let lab_s = a.seconds("duration") + CLIENT_START_S + 3.0;
    Variant::ALL
        .map(|v| {
            let run = common::Run {
                dir: v.name().into(),
                msg: format!("{}, {:.0} s", v.label(), a.seconds("duration")),
                expected_s: lab_s,
                config: lab_config(v, a.seconds("duration"), a.seed),
            };
            (v, run)
        })
        .into()
}

/// Runs the three labs, analyses them and writes `results.json`, the PNGs and `report.html`.
pub fn run(a: &Args) -> Result<Outcome> {
    // The handshake (one RTT) and the exchange under way when the time is up (three).
    let lab_s = a.seconds("duration") + CLIENT_START_S + 3.0;
    let mut series = common::Series::new(&a.out_dir, 3.0 * lab_s + 3.0 + 4.0, a.quiet)?;
    let runs = series.run(runs(a), Some(1.0), |v, dir, _| collect(v, dir))?;
    let results = Results {
        base_rtt_ms: BASE_RTT_MS,
        duration_s: a.seconds("duration"),
        nagle: runs[0].metrics.clone(),
        nodelay: runs[1].metrics.clone(),
        writev: runs[2].metrics.clone(),
    };
    let (checks, rows) = (checks(&results), table_rows(&results));
    series.finish(4.0, results, checks, rows, |r, c| {
        write_outputs(a, r, c, &runs)
    })
}

/// Reads one run's outputs back.
fn collect(v: Variant, dir: &Path) -> Result<RunData> {
    let recs = common::program_records(dir, "rr-client")?;
    let exchanges: Vec<(f64, f64)> = recs
        .iter()
        .filter_map(|r| match r {
            apps::Record::Exchange {
                sent_s,
                exchange_ms,
                ..
            } => Some((CLIENT_START_S + sent_s, *exchange_ms)),
            _ => None,
        })
        .collect();
    let times: Vec<f64> = exchanges.iter().map(|e| e.1).collect();
    let Some(p) = apps::Percentiles::of(&times) else {
        bail!(
            "{}: the client completed no exchange (see programs/rr-client.err)",
            dir.display()
        );
    };
    let run_dir = RunDir::new(dir);
    let analysis = common::analyze_captures(
        &[
            run_dir.capture("client", "eth0"),
            run_dir.capture("server", "eth0"),
        ],
        true,
    )?;
    let (ladder, ladder_s) = ladder_of(&analysis).with_context(|| {
        format!(
            "{}: the captures do not hold a whole exchange",
            run_dir.captures().display()
        )
    })?;
    Ok(RunData {
        variant: v,
        metrics: RunMetrics {
            write_style: match v {
                Variant::Nagle => "write+write",
                Variant::Nodelay => "write+write nodelay",
                Variant::Writev => "writev",
            }
            .into(),
            exchange_ms_p50: p.p50,
            exchange_ms_p95: p.p95,
            exchanges: p.count as u64,
            diagnoses: common::diagnosis_kinds(&analysis, RR_PORT),
        },
        exchanges,
        ladder,
        ladder_s,
        analysis,
    })
}

/// The request/response connection as each capture saw it: (at the client, at the server).
fn vantages(a: &Analysis) -> Option<(&Connection, &Connection)> {
    let rr = |cap: usize| {
        a.connections
            .iter()
            .filter(|c| c.vantage.capture == cap && c.b.port() == RR_PORT)
            .max_by_key(|c| c.a2b.stats.data_bytes)
    };
    Some((rr(0)?, rr(1)?))
}

/// The second exchange (the first when there is only one) as arrows between the hosts, from
/// the client's and the server's captures, and its length in s. Exchange `k` starts with the
/// client's segment at relative sequence `1 + 70 k` and ends when the response's last byte
/// reaches the client.
fn ladder_of(a: &Analysis) -> Option<(Vec<Arrow>, f64)> {
    let (c, s) = vantages(a)?;
    let starts = |k: u64| {
        c.a2b
            .series
            .segments
            .iter()
            .find(|g| g.len > 0 && g.seq == 1 + MESSAGE_LEN * k)
            .map(|g| g.time)
    };
    let k = if starts(1).is_some() { 1 } else { 0 };
    let t0 = starts(k)?;
    let last_byte = 1 + MESSAGE_LEN * (k + 1);
    let t_end = c
        .b2a
        .series
        .segments
        .iter()
        .find(|g| g.len > 0 && g.seq + u64::from(g.len) == last_byte)
        .map(|g| g.time)?;
    let rel = |t: Instant| (t.as_nanos() as f64 - t0.as_nanos() as f64) / 1e9;
    // An ACK sent within this long of a data segment from the same host rode on it.
    const RIDES_NS: u64 = 20_000;
    let near = |t: Instant, segs: &[analyze::model::Segment]| {
        segs.iter()
            .any(|g| g.len > 0 && t.as_nanos().abs_diff(g.time.as_nanos()) <= RIDES_NS)
    };
    let window = |t: Instant| t >= t0 && t.as_nanos() <= t_end.as_nanos() + 5_000_000;
    let mut arrows = Vec::new();
    // A packet that left at `depart` and arrived at `arrive`, kept when the client saw it
    // (sent or received) during the exchange.
    let mut arrow = |from_client: bool, depart: Instant, arrive: Instant, label: String| {
        if window(if from_client { depart } else { arrive }) {
            arrows.push(Arrow {
                from_client,
                depart_s: rel(depart),
                arrive_s: rel(arrive),
                label,
            });
        }
    };
    // Data: leaves at the sender's capture, arrives at the receiver's.
    for (from_client, sent, recvd) in [
        (true, &c.a2b.series.segments, &s.a2b.series.segments),
        (false, &s.b2a.series.segments, &c.b2a.series.segments),
    ] {
        for g in sent.iter().filter(|g| g.len > 0) {
            let Some(r) = recvd
                .iter()
                .find(|r| r.seq == g.seq && r.len == g.len && r.time >= g.time)
            else {
                continue;
            };
            arrow(from_client, g.time, r.time, format!("{} B", g.len));
        }
    }
    // Pure ACKs: the receiver of the data sends them (its capture), the sender gets them.
    // `acks` of a direction are what the other side sent about its data.
    for (from_client, sent, recvd, own_data) in [
        (
            false,
            &s.a2b.series.acks,
            &c.a2b.series.acks,
            &s.b2a.series.segments,
        ),
        (
            true,
            &c.b2a.series.acks,
            &s.b2a.series.acks,
            &c.a2b.series.segments,
        ),
    ] {
        for p in sent.iter().filter(|p| p.seq > 1) {
            if near(p.time, own_data) {
                continue;
            }
            let Some(r) = recvd.iter().find(|r| r.seq == p.seq && r.time >= p.time) else {
                continue;
            };
            arrow(from_client, p.time, r.time, "ACK".into());
        }
    }
    arrows.sort_by(|x, y| x.depart_s.total_cmp(&y.depart_s));
    Some((arrows, rel(t_end)))
}

/// The expectations for this demo, on these numbers.
pub fn checks(r: &Results) -> Vec<Check> {
    let base = r.base_rtt_ms;
    let rtts = |m: &RunMetrics| m.exchange_ms_p50 / base;
    let nagle_named = |m: &RunMetrics| m.diagnoses.iter().any(|d| d == "nagle_delayed_ack");
    let c = |what: String, passed: bool| Check { what, passed };
    let mut out = vec![c(
        format!(
            "two write()s with Nagle: an exchange takes about 3 RTT ({:.2} RTT, p50 {:.0} ms)",
            rtts(&r.nagle),
            r.nagle.exchange_ms_p50
        ),
        (2.5..=3.5).contains(&rtts(&r.nagle)),
    )];
    for (name, m) in [("TCP_NODELAY", &r.nodelay), ("writev()", &r.writev)] {
        out.push(c(
            format!(
                "{name}: an exchange takes about 1 RTT ({:.2} RTT, p50 {:.0} ms)",
                rtts(m),
                m.exchange_ms_p50
            ),
            rtts(m) <= 1.5,
        ));
    }
    out.push(c(
        format!(
            "the analyzer names the Nagle hold in run A ({})",
            list(&r.nagle.diagnoses)
        ),
        nagle_named(&r.nagle),
    ));
    out.push(c(
        format!(
            "and not in B ({}) or C ({})",
            list(&r.nodelay.diagnoses),
            list(&r.writev.diagnoses)
        ),
        !nagle_named(&r.nodelay) && !nagle_named(&r.writev),
    ));
    out
}

fn list(v: &[String]) -> String {
    if v.is_empty() {
        "nothing".into()
    } else {
        v.join(", ")
    }
}

/// The side-by-side table: header and rows, for the terminal and the page alike.
pub fn table_rows(r: &Results) -> (Vec<String>, Vec<Vec<String>>) {
    let [nagle, nodelay, writev] = Variant::ALL.map(Variant::label);
    let runs = [
        (nagle, &r.nagle),
        (nodelay, &r.nodelay),
        (writev, &r.writev),
    ];
    let (header, row) = common::run_columns(&runs);
    let base = r.base_rtt_ms;
    let rows = vec![
        row("exchanges", &|m| m.exchanges.to_string()),
        row("exchange p50 (ms)", &|m| {
            format!("{:.0}", m.exchange_ms_p50)
        }),
        row("exchange p95 (ms)", &|m| {
            format!("{:.0}", m.exchange_ms_p95)
        }),
        row("exchange p50 (RTTs)", &|m| {
            format!("{:.2}", m.exchange_ms_p50 / base)
        }),
        row("analyzer", &|m| list(&m.diagnoses)),
    ];
    (header, rows)
}

fn write_outputs(a: &Args, results: &Results, checks: &[Check], runs: &[RunData]) -> Result<()> {
    let mut ladders: Vec<Chart> = runs.iter().map(ladder_chart).collect();
    report::same_scale(&mut ladders);
    let exchanges = exchanges_chart(runs);
    let mut files: Vec<(String, &Chart)> = runs
        .iter()
        .zip(&ladders)
        .map(|(r, c)| (format!("ladder-{}", r.variant.name()), c))
        .collect();
    files.push(("exchanges".into(), &exchanges));
    let page = page(a, results, checks, runs, &files)?;
    let charts: Vec<(&str, &Chart)> = files.iter().map(|(n, c)| (n.as_str(), *c)).collect();
    common::write_report_files(&a.out_dir, results, &charts, &page)
}

/// The talk's picture: one exchange as a ladder, time to the right, the client above and the
/// server below, one line per packet from where it left to where it arrived.
fn ladder_chart(r: &RunData) -> Chart {
    const CLIENT_Y: f64 = 1.0;
    const SERVER_Y: f64 = 0.0;
    let y = |client: bool| if client { CLIENT_Y } else { SERVER_Y };
    let end = r.ladder_s;
    let span = end.max(BASE_RTT_MS / 1e3) * 1.08;
    let mut data = Vec::new();
    let mut acks = Vec::new();
    for a in &r.ladder {
        let seg = (
            (a.depart_s, y(a.from_client)),
            (a.arrive_s, y(!a.from_client)),
        );
        if a.label == "ACK" {
            acks.push(seg);
        } else {
            data.push(seg);
        }
    }
    // Packets that leave one host together draw the same line: one label names them all
    // ("ACK + 28 B", "28 B + 42 B"), placed a third of the way along a data line, or two
    // thirds along an ACK's, so that lines that cross do not write over each other.
    let mut labels: Vec<(f64, f64, String)> = Vec::new();
    let mut done = vec![false; r.ladder.len()];
    for i in 0..r.ladder.len() {
        if done[i] {
            continue;
        }
        let first = &r.ladder[i];
        let mut group: Vec<&Arrow> = Vec::new();
        for (j, a) in r.ladder.iter().enumerate().skip(i) {
            if !done[j]
                && a.from_client == first.from_client
                && (a.depart_s - first.depart_s).abs() < 1e-3
            {
                done[j] = true;
                group.push(a);
            }
        }
        group.sort_by_key(|a| a.label != "ACK");
        let mut text: Vec<String> = Vec::new();
        let mut k = 0;
        while k < group.len() {
            let same = group[k..]
                .iter()
                .take_while(|a| a.label == group[k].label)
                .count();
            text.push(if same > 1 {
                format!("{same} × {}", group[k].label)
            } else {
                group[k].label.clone()
            });
            k += same;
        }
        let at = group.iter().find(|a| a.label != "ACK").unwrap_or(&group[0]);
        let f = if at.label == "ACK" { 0.7 } else { 0.3 };
        let lx = at.depart_s + f * (at.arrive_s - at.depart_s);
        let ly = y(at.from_client) + f * (y(!at.from_client) - y(at.from_client));
        labels.push((lx, ly, text.join(" + ")));
    }
    let color = r.variant.color();
    let rtts = end / (BASE_RTT_MS / 1e3);
    let caption = match r.variant {
        Variant::Nagle => format!(
            "The request leaves in two segments, the 42 bytes only once the 28 are ACKed a round \
             trip later; the server answers the whole message and its reply is split the same \
             way. The user waits {:.2} s, {rtts:.1} round trips.",
            end
        ),
        Variant::Nodelay => format!(
            "TCP_NODELAY: both writes leave at once as two small segments, and so do the \
             reply's. One round trip: {end:.2} s."
        ),
        Variant::Writev => format!(
            "One writev(): each message leaves as a single 70-byte segment. One round trip: \
             {end:.2} s."
        ),
    };
    Chart::new(
        format!("One exchange, {}", r.variant.label()),
        Axis::new("time since the request's first byte left the client", "s")
            .with_range(-0.02 * span, span),
        Axis::new("host", "0 = server, 1 = client").with_range(-0.25, 1.25),
    )
    .size(900, 360)
    .caption(caption)
    .with(Series::line(
        "",
        Rgb::GREY,
        vec![(-0.02 * span, CLIENT_Y), (span, CLIENT_Y)],
    ))
    .with(Series::line(
        "",
        Rgb::GREY,
        vec![(-0.02 * span, SERVER_Y), (span, SERVER_Y)],
    ))
    .with(Series::new("pure ACK", report::tsg::colors::ACK, Marks::Segments(acks)).keep_in_legend())
    .with(
        Series::new("data segment", color, Marks::Segments(data))
            .stroke(2)
            .keep_in_legend(),
    )
    .with(Series::new("", Rgb(0, 0, 0), Marks::Text(labels)))
    .with(Series::new(
        "",
        Rgb(0, 0, 0),
        Marks::Labels(vec![
            (0.0, CLIENT_Y + 0.12, "client".into()),
            (0.0, SERVER_Y - 0.2, "server".into()),
            (end, CLIENT_Y + 0.12, "response complete".into()),
        ]),
    ))
}

fn exchanges_chart(runs: &[RunData]) -> Chart {
    let end = runs
        .iter()
        .flat_map(|r| r.exchanges.iter().map(|e| e.0))
        .fold(1.0, f64::max);
    let mut c = Chart::new(
        "Every exchange of the three runs",
        Axis::new("time since the lab started", "s"),
        Axis::new("exchange time", "ms").from_zero(),
    )
    .size(900, 420)
    .caption(format!(
        "Each dot is one exchange, from the request's first write() to the response's last \
         byte read. With two write()s and Nagle on, every exchange takes three \
         round trips ({:.0} ms); TCP_NODELAY and writev() bring it down to one ({BASE_RTT_MS:.0} \
         ms), the path's own round trip.",
        3.0 * BASE_RTT_MS
    ));
    for (k, name) in [(1.0, "1 RTT"), (3.0, "3 RTT")] {
        c.push(
            Series::line(
                format!("{name} ({:.0} ms)", k * BASE_RTT_MS),
                Rgb::GREY,
                vec![(0.0, k * BASE_RTT_MS), (end, k * BASE_RTT_MS)],
            )
            .stroke(1)
            .keep_in_legend(),
        );
    }
    for r in runs {
        c.push(
            Series::scatter(r.variant.label(), r.variant.color(), r.exchanges.clone())
                .keep_in_legend(),
        );
    }
    c
}

fn page(
    a: &Args,
    r: &Results,
    checks: &[Check],
    runs: &[RunData],
    files: &[(String, &Chart)],
) -> Result<Page> {
    let fig = |id: &str, c: &Chart| common::figure(id, c, false);
    let mut page = Page::new("Nagle's algorithm: a message in two writes over a satellite");
    page.subtitle = format!(
        "{CAPACITY} each way, {BASE_RTT_MS:.0} ms base RTT; each 70-byte message written as \
         28 + 42 bytes in both directions, the server answering only whole messages, {THINK} \
         think time; {:.0} s per run, seed {}.",
        r.duration_s, a.seed
    );
    page.push(common::results_section(
        table_rows(r),
        "Exchange times are the client's, from the request's first write() to \
         the response's last byte; the analyzer's diagnoses are from both \
         hosts' captures.",
        common::findings(checks),
    ));
    let mut ladders = Section::new("One exchange, packet by packet").with(Block::Paragraph(
        "The seed's ladder diagram, drawn from the two captures: each line is a packet, from \
         the moment it left one host (in that host's capture) to the moment it reached the \
         other. Same time scale in all three."
            .into(),
    ));
    for (name, chart) in files.iter().filter(|(n, _)| n.starts_with("ladder-")) {
        ladders.push(Block::Figure(fig(name, chart)?));
    }
    page.push(ladders);
    if let Some((name, chart)) = files.iter().find(|(n, _)| n == "exchanges") {
        page.push(Section::new("Every exchange").with(Block::Figure(fig(name, chart)?)));
    }
    let mut findings = Vec::new();
    for run in runs {
        findings.extend(common::port_findings(
            run.variant.label(),
            &run.analysis,
            RR_PORT,
        ));
    }
    page.push(common::analyzer_section(
        "Diagnoses of `latencylab analyze` on each run's two captures (run it yourself \
         on nagle/captures/client-eth0.pcap and server-eth0.pcap). Each capture judges \
         the data its own host sent: the client's the requests, the server's the \
         responses.",
        Block::Findings(findings),
    ));
    page.push(common::files_section(&[
        "nagle/, nodelay/, writev/: each run's lab output: captures/*.pcap (tcpdump, \
         Wireshark, latencylab analyze), links/*.log, summary.json, lab.json, programs/*.out \
         (rr-client's exchange lines)",
    ]));
    Ok(page)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metrics(p50: f64, diagnoses: &[&str]) -> RunMetrics {
        RunMetrics {
            write_style: "w".into(),
            exchange_ms_p50: p50,
            exchange_ms_p95: p50,
            exchanges: 10,
            diagnoses: diagnoses.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn checks_pass_for_three_round_trips_against_one() {
        let r = Results {
            base_rtt_ms: 500.0,
            duration_s: 20.0,
            nagle: metrics(1540.0, &["app_limited", "nagle_delayed_ack"]),
            nodelay: metrics(502.0, &["app_limited"]),
            writev: metrics(501.0, &[]),
        };
        assert!(checks(&r).iter().all(|c| c.passed), "{:?}", checks(&r));
    }

    #[test]
    fn checks_fail_when_nagle_costs_nothing_or_is_named_everywhere() {
        let r = Results {
            base_rtt_ms: 500.0,
            duration_s: 20.0,
            nagle: metrics(510.0, &[]),
            nodelay: metrics(502.0, &["nagle_delayed_ack"]),
            writev: metrics(1500.0, &[]),
        };
        let failed = checks(&r).into_iter().filter(|c| !c.passed).count();
        assert_eq!(failed, 4, "{:?}", checks(&r));
    }

    #[test]
    fn each_run_sets_its_write_style_at_both_ends_and_waits_for_the_client() {
        for v in Variant::ALL {
            let cfg = lab_config(v, 12.0, 1);
            cfg.validate().unwrap();
            assert_eq!(cfg.links[0].up.to_json()["delay"], "250ms");
            let waited: Vec<_> = cfg.programs.iter().filter(|p| p.wait).collect();
            assert_eq!(waited.len(), 1);
            assert!(waited[0].run.contains("--duration 12000ms"));
            for p in &cfg.programs {
                assert_eq!(p.run.contains("--nodelay"), v == Variant::Nodelay);
                assert_eq!(p.run.contains("--writev"), v == Variant::Writev);
            }
        }
    }
}
