//! `latencylab demo tfo`: one round trip instead of two with TCP Fast Open, and why only for
//! idempotent requests (experiment E5 of the 2015 talk).
//!
//! The line: 10 Mbit/s each way, 50 ms each way (100 ms base RTT). The client makes many short
//! connections, one request each (`tfo-client`), to a server that acts on each request and
//! counts how many times it acted per request id (`tfo-server`). Run `plain`: no Fast Open, so
//! the handshake costs a round trip before the request can go. Run `tfo`: the first connection
//! fetches a cookie, the next ones carry their request in the SYN. Both hosts allow Fast Open
//! (the lab sets `net.ipv4.tcp_fastopen` = 3); the programs opt in per socket.
//!
//! Then the same two runs with the path copying every packet from the client and delivering
//! the copy a second late, long after its connection has ended (`duplicate = "100% 1s"` on the
//! client→server direction). The late copy of a SYN with data is a valid Fast Open request and
//! the server acts on it again; a plain SYN carries nothing, and the copies of the other
//! segments find no connection.
//!
//! Measured: each request's time from `connect` to the whole answer (the client), whether its
//! SYN carried the request (the client's and the server's `TCP_INFO`, and the analyzer on the
//! server's capture), and the server's actions per request id.
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

/// Round-trip propagation delay of the line, ms (50 ms each way).
pub const BASE_RTT_MS: f64 = 100.0;
/// When the client starts, s after the lab: the server listens by then.
const CLIENT_START_S: f64 = 0.5;
/// Time from one request's start to the next one's.
const INTERVAL_MS: u64 = 300;
/// The server's port (tfo-server's default).
const PORT: u16 = 5205;
/// The duplicate runs: the client→server direction's copy of every packet, this late. A
/// connection lives about 3 RTT (handshake, request and answer, close).
const LATE_COPY: &str = "100% 1s";
/// How long the client stays after its last request in the duplicate runs, s: the lab ends
/// with the client, and the last SYN's copy must reach the server (1 s) and be answered first.
const LINGER_S: f64 = 1.5;

/// The runs: directory, whether both sides opt in to Fast Open, whether the path delivers a
/// late copy of every packet from the client. The first two are the ones charted.
pub const RUNS: [(&str, bool, bool); 4] = [
    ("plain", false, false),
    ("tfo", true, false),
    ("duplicate-plain", false, true),
    ("duplicate-tfo", true, true),
];

/// One run's numbers, as `results.json` writes them.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct RunMetrics {
    /// Median time from `connect` to the whole answer; in the `tfo` run without the first
    /// request, which fetched the cookie.
    pub request_ms_p50: f64,
    pub request_ms_p95: f64,
    /// Requests answered.
    pub requests: u64,
    /// Connections whose SYN carried the request, as the client saw them (TCP_INFO).
    pub tfo_requests: u64,
    /// Connections the analyzer recognised as Fast Open in the server's capture.
    pub tfo_in_capture: u64,
    /// The server's actions, and those beyond the first for a request id.
    pub server_actions: u64,
    pub double_actions: u64,
}

/// `results.json`.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Results {
    pub base_rtt_ms: f64,
    pub plain: RunMetrics,
    pub tfo: RunMetrics,
    /// The runs with late copies of the client's packets.
    pub duplicate: DuplicateResults,
}

/// The duplicate runs' numbers.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct DuplicateResults {
    pub plain: DuplicateMetrics,
    pub tfo: DuplicateMetrics,
}

/// One duplicate run's numbers: what the server did with the late copies.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct DuplicateMetrics {
    /// Requests answered (the client's count).
    pub requests: u64,
    /// The server's actions, and those beyond the first for a request id.
    pub server_actions: u64,
    pub double_actions: u64,
}

impl DuplicateMetrics {
    fn of(m: &RunMetrics) -> DuplicateMetrics {
        DuplicateMetrics {
            requests: m.requests,
            server_actions: m.server_actions,
            double_actions: m.double_actions,
        }
    }
}

/// What the demo leaves: its results, the terminal table and checks, and where the report is.
pub type Outcome = common::Outcome<Results>;

struct RunData {
    /// The run's directory.
    name: &'static str,
    color: Rgb,
    metrics: RunMetrics,
    analysis: Analysis,
    /// (request number, ms).
    times: Vec<(f64, f64)>,
}

/// The lab of one run; with `late_copies` the path delivers a late copy of every packet from
/// the client.
pub fn lab_config(fastopen: bool, late_copies: bool, requests: u64, seed: u64) -> LabConfig {
    let queue = lab::config::Direction::default().queue.to_string();
    let (server_opt, client_opt) = if fastopen {
        ("", " --fastopen")
    } else {
        (" --no-fastopen", "")
    };
    let mut up = vec![
        ("rate", "10mbit"),
        ("delay", "50ms"),
        ("queue", queue.as_str()),
    ];
    let mut client = format!(
        "exec latencylab tfo-client server{client_opt} --count {requests} --interval {INTERVAL_MS}ms"
    );
    if late_copies {
        up.push(("duplicate", LATE_COPY));
        client = format!("{} && sleep {LINGER_S}", client.trim_start_matches("exec "));
    }
    // The lab ends with the client; the server then gets SIGTERM and writes its totals.
    common::two_hosts(
        seed,
        [
            common::host("client", 1, EcnMode::Passive),
            common::host("server", 2, EcnMode::Passive),
        ],
        (
            "path",
            lab::config::Direction::parse(&up)
                .unwrap_or_else(|e| panic!("the tfo demo's client→server direction: {e}")),
            common::direction("10mbit", "50ms", &queue),
        ),
        vec![
            common::program(
                "tfo-server",
                "server",
                0.0,
                format!("exec latencylab tfo-server{server_opt}"),
                false,
            ),
            common::program("tfo-client", "client", CLIENT_START_S, client, true),
        ],
    )
}

/// The runs: what [`run`] runs and `--export` writes.
pub fn runs(a: &Args) -> Vec<(usize, common::Run)> {
    let lab_s = a.count("requests") as f64 * INTERVAL_MS as f64 / 1000.0 + CLIENT_START_S + 2.0;
    RUNS.iter()
        .enumerate()
        .map(|(i, &(dir, fastopen, late_copies))| {
            let run = common::Run {
                dir: dir.into(),
                msg: format!("{dir}, {} requests", a.count("requests")),
                expected_s: lab_s + if late_copies { LINGER_S } else { 0.0 },
                config: lab_config(fastopen, late_copies, a.count("requests"), a.seed),
            };
            (i, run)
        })
        .collect()
}

/// Runs the labs, analyses them and writes `results.json`, the PNGs and `report.html`.
pub fn run(a: &Args) -> Result<Outcome> {
    let (series, mut runs) =
        common::run_series(a, runs(a), (1.0, 2.0), |i, dir, _| collect(i, dir))?;
    let dup = runs.split_off(2);
    let results = Results {
        base_rtt_ms: BASE_RTT_MS,
        plain: runs[0].metrics.clone(),
        tfo: runs[1].metrics.clone(),
        duplicate: DuplicateResults {
            plain: DuplicateMetrics::of(&dup[0].metrics),
            tfo: DuplicateMetrics::of(&dup[1].metrics),
        },
    };
    let (checks, rows) = (checks(&results), table_rows(&results));
    series.end(results, checks, rows, |r, c| write_outputs(a, r, c, &runs))
}

/// Reads the `i`-th run's outputs back.
fn collect(i: usize, dir: &Path) -> Result<RunData> {
    let (name, fastopen, _) = RUNS[i];
    let client = common::program_records(dir, "tfo-client")?;
    let server = common::program_records(dir, "tfo-server")?;
    let requests: Vec<(u64, f64, bool)> = client
        .iter()
        .filter_map(|r| match r {
            apps::Record::Request {
                request,
                request_ms,
                tfo,
                ..
            } => Some((*request, *request_ms, *tfo)),
            _ => None,
        })
        .collect();
    // The first request of a Fast Open client fetches the cookie: a plain handshake.
    let skip = usize::from(fastopen);
    let timed: Vec<f64> = requests.iter().skip(skip).map(|r| r.1).collect();
    let Some(p) = apps::Percentiles::of(&timed) else {
        bail!(
            "{}: the client made no request (see programs/tfo-client.err)",
            dir.display()
        );
    };
    let Some(apps::Record::ActionSummary {
        actions,
        double_actions,
        ..
    }) = server
        .iter()
        .rev()
        .find(|r| matches!(r, apps::Record::ActionSummary { .. }))
        .cloned()
    else {
        bail!(
            "{}: the server wrote no action_summary (see programs/tfo-server.err)",
            dir.display()
        );
    };
    let analysis = common::analyze_pcap(&RunDir::new(dir).capture("server", "eth0"))?;
    let tfo_in_capture = analysis
        .connections
        .iter()
        .filter(|c| c.b.port() == PORT && c.tfo())
        .count() as u64;
    Ok(RunData {
        name,
        color: common::PAIR_COLORS[usize::from(fastopen)],
        metrics: RunMetrics {
            request_ms_p50: p.p50,
            request_ms_p95: p.p95,
            requests: requests.len() as u64,
            tfo_requests: requests.iter().filter(|r| r.2).count() as u64,
            tfo_in_capture,
            server_actions: actions,
            double_actions,
        },
        analysis,
        times: requests
            .iter()
            .enumerate()
            .map(|(i, r)| ((i + 1) as f64, r.1))
            .collect(),
    })
}

/// The experiment's criteria, on these numbers (the talk: two round trips become one).
pub fn checks(r: &Results) -> Vec<Check> {
    let rtt = r.base_rtt_ms;
    let (a, b) = (&r.plain, &r.tfo);
    vec![
        Check {
            what: format!(
                "plain: a request takes about 2 RTT (p50 {:.0} ms, within {:.0} to {:.0} ms)",
                a.request_ms_p50,
                1.9 * rtt,
                2.5 * rtt
            ),
            passed: (1.9 * rtt..=2.5 * rtt).contains(&a.request_ms_p50),
        },
        Check {
            what: format!(
                "tfo: a request takes about 1 RTT (p50 {:.0} ms, within {:.0} to {:.0} ms)",
                b.request_ms_p50,
                0.9 * rtt,
                1.5 * rtt
            ),
            passed: (0.9 * rtt..=1.5 * rtt).contains(&b.request_ms_p50),
        },
        Check {
            what: format!(
                "tfo: every request after the first rode in the SYN ({} of {}; the analyzer saw {})",
                b.tfo_requests,
                b.requests.saturating_sub(1),
                b.tfo_in_capture
            ),
            passed: b.requests > 1
                && b.tfo_requests == b.requests - 1
                && b.tfo_in_capture == b.tfo_requests,
        },
        Check {
            what: format!(
                "duplicate, tfo: a late SYN with data is done again (double actions {} > 0)",
                r.duplicate.tfo.double_actions
            ),
            passed: r.duplicate.tfo.double_actions > 0,
        },
        Check {
            what: format!(
                "duplicate, plain: a late plain SYN does nothing (double actions {} = 0)",
                r.duplicate.plain.double_actions
            ),
            passed: r.duplicate.plain.double_actions == 0,
        },
    ]
}

/// The side-by-side table: header and rows.
pub fn table_rows(r: &Results) -> (Vec<String>, Vec<Vec<String>>) {
    let runs = [(RUNS[0].0, &r.plain), (RUNS[1].0, &r.tfo)];
    let (header, row) = common::run_columns(&runs);
    let mut rows = vec![
        row("request p50 (ms)", &|m| format!("{:.1}", m.request_ms_p50)),
        row("request p95 (ms)", &|m| format!("{:.1}", m.request_ms_p95)),
        row("requests", &|m| m.requests.to_string()),
        row("request in the SYN (client)", &|m| {
            m.tfo_requests.to_string()
        }),
        row("Fast Open in the capture", &|m| {
            m.tfo_in_capture.to_string()
        }),
        row("server actions", &|m| m.server_actions.to_string()),
        row("double actions", &|m| m.double_actions.to_string()),
    ];
    let d = &r.duplicate;
    let dup_runs = [(RUNS[0].0, &d.plain), (RUNS[1].0, &d.tfo)];
    let (_, dup_row) = common::run_columns(&dup_runs);
    rows.extend([
        dup_row("late copies: requests", &|m| m.requests.to_string()),
        dup_row("late copies: server actions", &|m| {
            m.server_actions.to_string()
        }),
        dup_row("late copies: double actions", &|m| {
            m.double_actions.to_string()
        }),
    ]);
    (header, rows)
}

fn request_chart(r: &Results, runs: &[RunData]) -> Chart {
    let n = runs.iter().map(|r| r.times.len()).max().unwrap_or(1).max(1) as f64;
    let rtt = r.base_rtt_ms;
    let mut c = Chart::new(
        "Time from connect to the whole answer, one connection per request",
        Axis::new("request", "number"),
        Axis::new("request time", "ms").from_zero(),
    )
    .size(900, 480)
    .caption(format!(
        "Plain TCP: the handshake, then the request: about two round trips ({:.0} ms). With \
         Fast Open the first connection fetches a cookie (its request still takes two round \
         trips); every later one sends its request in the SYN and has the answer after one \
         round trip ({:.0} ms). The grey lines are 1 and 2 × the {rtt:.0} ms base RTT.",
        r.plain.request_ms_p50, r.tfo.request_ms_p50
    ));
    // The reference lines first, so that the runs are drawn over them.
    c.push(Series::hline("1 RTT", Rgb::GREY, rtt, (1.0, n)));
    c.push(Series::hline("2 RTT", Rgb::GREY, 2.0 * rtt, (1.0, n)));
    c.extend(
        runs.iter()
            .map(|r| Series::line(r.name, r.color, r.times.clone()).keep_in_legend()),
    );
    c
}

fn write_outputs(a: &Args, r: &Results, checks: &[Check], runs: &[RunData]) -> Result<()> {
    let mut page = common::Report::new(
        "TCP Fast Open: one round trip instead of two",
        format!(
            "10 Mbit/s each way, {:.0} ms base RTT; {} requests per run, each on a new \
             connection, {INTERVAL_MS} ms apart; seed {}. Run plain: no Fast Open. Run tfo: \
             TCP_FASTOPEN on the server's listener, TCP_FASTOPEN_CONNECT on the client.",
            r.base_rtt_ms,
            a.count("requests"),
            a.seed
        ),
        table_rows(r),
        "Request times are the client's, from connect to the whole answer (the tfo run's p50 \
         leaves out the first request, which fetched the cookie). \"In the SYN\" is TCP_INFO's \
         TCPI_OPT_SYN_DATA at the client; the capture column is the analyzer's count of SYNs \
         with data and a cookie at the server. Actions are the server's, per request id.",
        common::findings(checks),
    );
    let chart = page.figure("request-time", request_chart(r, runs), false)?;
    page.section("Request time", "", vec![Block::Figure(chart)]);
    let d = &r.duplicate;
    page.section(
        "Late duplicate SYNs: why only idempotent requests",
        &format!(
            "Two more runs, the same but for the path, which copies every packet from the \
             client and delivers the copy 1 s late, after its connection has ended. The server \
             acts on every request it reads (think \"send a pair of shoes\"). With Fast Open \
             the late copy of a SYN with data is a valid new request: the server acted {} times \
             on {} requests, {} of them twice. Without it, a SYN carries no data; the server \
             answers the late SYN, the client (whose connection is long closed) does not \
             complete the handshake, and nothing is done: {} actions on {} requests, {} twice. \
             The table's \"late copies\" rows; each run's files are in duplicate-plain/ and \
             duplicate-tfo/.",
            d.tfo.server_actions,
            d.tfo.requests,
            d.tfo.double_actions,
            d.plain.server_actions,
            d.plain.requests,
            d.plain.double_actions
        ),
        vec![],
    );
    page.analyzer(
        "Diagnoses of `latencylab analyze` on each run's server capture; run it on \
         tfo/captures/server-eth0.pcap to see each connection's `TCP Fast Open` line.",
        report::findings::analyzer_findings(runs.iter().map(|r| (r.name, &r.analysis))),
    );
    page.files(&[
        "plain/, tfo/, duplicate-plain/, duplicate-tfo/: each run's lab output: \
         captures/*.pcap, summary.json, lab.json, programs/*.out (tfo-client.out has every \
         request, tfo-server.out every action)",
    ]);
    page.write(&a.out_dir, r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metrics(p50: f64, requests: u64, tfo: u64) -> RunMetrics {
        RunMetrics {
            request_ms_p50: p50,
            request_ms_p95: p50 + 5.0,
            requests,
            tfo_requests: tfo,
            tfo_in_capture: tfo,
            server_actions: requests,
            double_actions: 0,
        }
    }

    #[test]
    fn checks_pass_for_two_round_trips_against_one_and_fail_when_tfo_saves_nothing() {
        let r = |tfo_ms, tfo, doubles| Results {
            base_rtt_ms: 100.0,
            plain: metrics(203.0, 30, 0),
            tfo: metrics(tfo_ms, 30, tfo),
            duplicate: DuplicateResults {
                plain: duplicate(30, 0),
                tfo: duplicate(30, doubles),
            },
        };
        assert!(checks(&r(104.0, 29, 29)).iter().all(|c| c.passed));
        let failed: Vec<_> = checks(&r(203.0, 0, 29))
            .into_iter()
            .filter(|c| !c.passed)
            .collect();
        assert_eq!(failed.len(), 2, "{failed:?}");
    }

    fn duplicate(requests: u64, doubles: u64) -> DuplicateMetrics {
        DuplicateMetrics {
            requests,
            server_actions: requests + doubles,
            double_actions: doubles,
        }
    }

    #[test]
    fn checks_want_doubles_with_fast_open_and_none_without() {
        let r = |plain, tfo| Results {
            base_rtt_ms: 100.0,
            plain: metrics(203.0, 30, 0),
            tfo: metrics(104.0, 30, 29),
            duplicate: DuplicateResults {
                plain: duplicate(30, plain),
                tfo: duplicate(30, tfo),
            },
        };
        assert!(checks(&r(0, 29)).iter().all(|c| c.passed));
        let failed = |r: &Results| -> Vec<String> {
            checks(r)
                .into_iter()
                .filter(|c| !c.passed)
                .map(|c| c.what)
                .collect()
        };
        let f = failed(&r(0, 0));
        assert!(f.len() == 1 && f[0].starts_with("duplicate, tfo"), "{f:?}");
        let f = failed(&r(1, 29));
        assert!(
            f.len() == 1 && f[0].starts_with("duplicate, plain"),
            "{f:?}"
        );
    }

    #[test]
    fn only_the_tfo_lab_opts_in_on_both_sides() {
        let plain = lab_config(false, false, 10, 1);
        let tfo = lab_config(true, false, 10, 1);
        plain.validate().unwrap();
        tfo.validate().unwrap();
        assert!(plain.programs[0].run.contains("--no-fastopen"));
        assert!(!plain.programs[1].run.contains("--fastopen"));
        assert!(!tfo.programs[0].run.contains("--no-fastopen"));
        assert!(tfo.programs[1].run.contains("--fastopen --count 10"));
    }

    #[test]
    fn only_the_duplicate_labs_copy_the_clients_packets_late() {
        for fastopen in [false, true] {
            let plain = lab_config(fastopen, false, 10, 1);
            let dup = lab_config(fastopen, true, 10, 1);
            dup.validate().unwrap();
            assert_eq!(plain.links[0].up.params.impair.duplicate, None);
            let copy = dup.links[0].up.params.impair.duplicate.clone().unwrap();
            assert_eq!(copy.probability, 1.0);
            assert_eq!(copy.late_by, std::time::Duration::from_secs(1));
            // Only the client's packets are copied; the client outstays the last copy.
            assert_eq!(dup.links[0].down, plain.links[0].down);
            assert!(dup.programs[1].run.ends_with("&& sleep 1.5"));
            assert_eq!(
                dup.programs[1].run.replace(" && sleep 1.5", ""),
                plain.programs[1].run.replace("exec ", "")
            );
        }
    }
}
