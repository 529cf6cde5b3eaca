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

use analyze::Analysis;
use anyhow::{bail, Context, Result};
use lab::config::{EcnMode, LabConfig};
use labnet::run_dir::RunDir;
use report::{Axis, Block, Chart, Ladder, LadderArrow, Rgb, Series};
use serde::Serialize;
use wire::Duration;

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

/// One run's measurements with what the charts need.
struct RunData {
    variant: Variant,
    metrics: RunMetrics,
    /// (s since the lab started, exchange time in ms).
    exchanges: Vec<(f64, f64)>,
    /// One exchange drawn from both captures, the client above, in s since its first request
    /// byte left the client, and how long it took (s).
    ladder: Vec<LadderArrow>,
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
    // The handshake (one RTT) and the exchange under way when the time is up (three).
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
    let (series, runs) = common::run_series(a, runs(a), (1.0, 4.0), |v, dir, _| collect(v, dir))?;
    let results = Results {
        base_rtt_ms: BASE_RTT_MS,
        duration_s: a.seconds("duration"),
        nagle: runs[0].metrics.clone(),
        nodelay: runs[1].metrics.clone(),
        writev: runs[2].metrics.clone(),
    };
    let (checks, rows) = (checks(&results), table_rows(&results));
    series.end(results, checks, rows, |r, c| write_outputs(a, r, c, &runs))
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

/// The second exchange (the first when there is only one) as arrows between the hosts, from
/// the client's and the server's captures, and its length in s. Exchange `k` starts with the
/// client's segment at relative sequence `1 + 70 k` and ends when the response's last byte
/// reaches the client; the arrows are the packets the client sent or received from its start
/// to 5 ms after its end.
fn ladder_of(a: &Analysis) -> Option<(Vec<LadderArrow>, f64)> {
    let (c, s) = analyze::ladder::by_server_port(a, 0, 1, RR_PORT)?;
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
    let arrows = analyze::ladder::arrows(c, s, t0..=t_end + Duration::from_millis(5));
    let ladder_s = (t_end - t0).as_secs_f64();
    Some((report::analysis::ladder_arrows(&arrows, t0), ladder_s))
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

fn write_outputs(a: &Args, r: &Results, checks: &[Check], runs: &[RunData]) -> Result<()> {
    let mut ladders: Vec<Chart> = runs.iter().map(ladder_chart).collect();
    report::same_scale(&mut ladders);
    let mut page = common::Report::new(
        "Nagle's algorithm: a message in two writes over a satellite",
        format!(
            "{CAPACITY} each way, {BASE_RTT_MS:.0} ms base RTT; each 70-byte message written as \
             28 + 42 bytes in both directions, the server answering only whole messages, \
             {THINK} think time; {:.0} s per run, seed {}.",
            r.duration_s, a.seed
        ),
        table_rows(r),
        "Exchange times are the client's, from the request's first write() to the response's \
         last byte; the analyzer's diagnoses are from both hosts' captures.",
        common::findings(checks),
    );
    let ladders = runs
        .iter()
        .zip(ladders)
        .map(|(run, c)| {
            let id = format!("ladder-{}", run.variant.name());
            Ok(Block::Figure(page.figure(&id, c, false)?))
        })
        .collect::<Result<_>>()?;
    page.section(
        "One exchange, packet by packet",
        "The seed's ladder diagram, drawn from the two captures: each line is a packet, from \
         the moment it left one host (in that host's capture) to the moment it reached the \
         other. Same time scale in all three.",
        ladders,
    );
    let exchanges = page.figure("exchanges", exchanges_chart(runs), false)?;
    page.section("Every exchange", "", vec![Block::Figure(exchanges)]);
    let findings = runs
        .iter()
        .flat_map(|run| common::port_findings(run.variant.label(), &run.analysis, RR_PORT))
        .collect();
    page.analyzer(
        "Diagnoses of `latencylab analyze` on each run's two captures (run it yourself on \
         nagle/captures/client-eth0.pcap and server-eth0.pcap). Each capture judges the data \
         its own host sent: the client's the requests, the server's the responses.",
        Block::Findings(findings),
    );
    page.files(&[
        "nagle/, nodelay/, writev/: each run's lab output: captures/*.pcap (tcpdump, \
         Wireshark, latencylab analyze), links/*.log, summary.json, lab.json, programs/*.out \
         (rr-client's exchange lines)",
    ]);
    page.write(&a.out_dir, r)
}

/// The talk's picture: one exchange as a ladder, time to the right, the client above and the
/// server below, one line per packet from where it left to where it arrived.
fn ladder_chart(r: &RunData) -> Chart {
    let end = r.ladder_s;
    let span = end.max(BASE_RTT_MS / 1e3) * 1.08;
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
    Ladder {
        title: format!("One exchange, {}", r.variant.label()),
        caption,
        time_axis: "time since the request's first byte left the client".into(),
        x_range_s: (-0.02 * span, span),
        upper_host: "client".into(),
        lower_host: "server".into(),
        data_color: r.variant.color(),
        ack_color: report::tsg::colors::ACK,
        arrows: r.ladder.clone(),
        notes: vec![(end, "response complete".into())],
    }
    .chart()
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
