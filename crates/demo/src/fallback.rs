//! `latencylab demo fallback`: a Wi-Fi that goes dark while cellular works, and three ways an
//! app can connect through it (experiment E2 of the 2015 talk).
//!
//! The phone has two interfaces: `wlan0` (Wi-Fi: 50 Mbit/s, 4 ms RTT to the access router,
//! the preferred default route) and `rmnet0` (cellular: 10 Mbit/s, 60 ms RTT, the second
//! default route). Both reach the router `net`, which reaches the server over a 1 Gbit/s, 5 ms
//! link. From t = 2 s to t = 20 s the Wi-Fi link passes nothing (`state = "blackhole"`: still
//! associated, nothing gets through; the talk's "TCP connection attempts do not succeed" is the
//! part of it that breaks new connections, and the whole of it is what also breaks a
//! connection that is already open). The phone makes a request every second with
//! `fallback-client` to `fallback-server`:
//! - run `wifi-only`: `--mode default`, a new connection per request over the default route;
//! - run `fallback`: `--mode race`, an RFC 8305 race with a 250 ms Connection Attempt Delay
//!   and a Better Route probe back to Wi-Fi;
//! - run `mptcp`: `--mode mptcp`, one MPTCP connection with a backup subflow over cellular
//!   (the phone adds an `ip mptcp endpoint` for `rmnet0` before it starts); while requests go
//!   over cellular, the client's Better Route probe tries Wi-Fi and, once it connects, has the
//!   path manager replace the stale Wi-Fi subflow with a new one, as a phone's MPTCP stack does.
//!
//! Measured, from the client's lines: which interface carried each request and how long it
//! took from its start to the answer; the requests that failed (no answer within 10 s).
//!
//! This module runs and presents; it does not judge: the criteria are printed as checks, and
//! the end-to-end test asserts them.

use labnet::run_dir::RunDir;
use std::path::Path;

use analyze::Analysis;
use anyhow::{bail, Result};
use lab::config::{iface_addrs, Change, EcnMode, Interface, LabConfig};
use labnet::setting::{LinkState, Setting};
use report::{Axis, Block, Chart, Rgb, Series};
use serde::Serialize;

use crate::common::{self, Check};
use crate::params::Args;

/// When the Wi-Fi goes dark and comes back, s of lab time.
pub const OUTAGE_START_S: f64 = 2.0;
pub const OUTAGE_END_S: f64 = 20.0;
/// When the client starts, s after the lab: the server listens by then.
const CLIENT_START_S: f64 = 0.5;
/// A request with no answer this long after its start has failed.
const TIMEOUT_S: f64 = 10.0;
const WIFI: &str = "wlan0";
const CELL: &str = "rmnet0";

/// The runs: directory (and name in the table and the charts), the client's `--mode`.
pub const RUNS: [(&str, &str); 3] = [
    ("wifi-only", "default"),
    ("fallback", "race"),
    ("mptcp", "mptcp"),
];

/// One run's numbers, as `results.json` writes them.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct RunMetrics {
    /// Over the answered requests, from each one's start to its answer.
    pub request_ms_p50: Option<f64>,
    pub request_ms_max: Option<f64>,
    pub requests: u64,
    /// Requests with no answer within the timeout.
    pub failed: u64,
    /// Answered requests carried by the cellular interface, %.
    pub on_cellular_pct: f64,
    /// Seconds after the Wi-Fi's recovery until the first answer that came over it; `null`
    /// if none did.
    pub back_on_wifi_s: Option<f64>,
    /// The worst answered request that started during the outage, ms.
    pub outage_request_ms_max: Option<f64>,
}

/// `results.json`.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Results {
    pub outage_start_s: f64,
    pub outage_end_s: f64,
    #[serde(rename = "wifi-only")]
    pub wifi_only: RunMetrics,
    pub fallback: RunMetrics,
    pub mptcp: RunMetrics,
}

/// What the demo leaves: its results, the terminal table and checks, and where the report is.
pub type Outcome = common::Outcome<Results>;

/// One request on the lab's clock.
#[derive(Clone, Debug, PartialEq)]
struct Request {
    start_s: f64,
    /// `None`: failed.
    ms: Option<f64>,
    iface: String,
}

struct RunData {
    name: &'static str,
    metrics: RunMetrics,
    requests: Vec<Request>,
    analysis: Analysis,
}

/// The lab of one run, its client in `--mode` `mode`.
pub fn lab_config(mode: &str, duration_s: f64, seed: u64) -> LabConfig {
    let queue = lab::config::Direction::default().queue.to_string();
    let iface = |name: &str, i: usize| {
        let (ipv4, ipv6) = iface_addrs(i);
        Interface {
            name: name.into(),
            ipv4,
            ipv6,
        }
    };
    let mut phone = common::host("phone", 1, EcnMode::Passive);
    phone.interfaces = vec![iface(WIFI, 1), iface(CELL, 2)];
    let link = |name: &str, a: &str, b: &str, rate: &str, delay: &str| {
        let dir = || common::direction(rate, delay, &queue);
        common::link(name, (a, b), dir(), dir())
    };
    let state = |at_s: f64, s: LinkState| Change {
        at_s,
        link: "wifi".into(),
        direction: None,
        settings: vec![Setting::State(s)],
    };
    let client = format!(
        "exec latencylab fallback-client server --mode {mode} --primary {WIFI} --secondary {CELL} \
         --duration {duration_s}s --timeout {TIMEOUT_S}s"
    );
    let (client, server) = if mode == "mptcp" {
        // The cellular address as a backup subflow of every MPTCP connection, for either
        // family the server's name resolves to; both ends allow a second subflow.
        let (c4, c6) = iface_addrs(2);
        (
            format!(
                "ip mptcp limits set subflow 2 add_addr_accepted 2 && \
                 ip mptcp endpoint add {c4} dev {CELL} subflow backup && \
                 ip mptcp endpoint add {c6} dev {CELL} subflow backup && {client}"
            ),
            "ip mptcp limits set subflow 2 add_addr_accepted 2 && exec latencylab fallback-server"
                .to_string(),
        )
    } else {
        (client, "exec latencylab fallback-server --no-mptcp".into())
    };
    // The lab ends with the client; the server then gets SIGTERM.
    let lab = common::lab(
        seed,
        vec![phone, common::host("server", 3, EcnMode::Passive)],
        &["net"],
        vec![
            link("wifi", "phone.wlan0", "net", "50mbit", "2ms"),
            link("cell", "phone.rmnet0", "net", "10mbit", "30ms"),
            link("core", "net", "server", "1gbit", "2.5ms"),
        ],
        vec![
            common::program("fallback-server", "server", 0.0, server, false),
            common::program("fallback-client", "phone", CLIENT_START_S, client, true),
        ],
    );
    LabConfig {
        changes: vec![
            state(OUTAGE_START_S, LinkState::Blackhole),
            state(OUTAGE_END_S, LinkState::On),
        ],
        ..lab
    }
}

/// The three runs: what [`run`] runs and `--export` writes.
pub fn runs(a: &Args) -> Vec<(&'static str, common::Run)> {
    let lab_s = CLIENT_START_S + a.seconds("duration") + 1.0;
    RUNS.map(|(name, mode)| {
        let run = common::Run {
            dir: name.into(),
            msg: name.into(),
            expected_s: lab_s + if mode == "default" { TIMEOUT_S } else { 0.0 },
            config: lab_config(mode, a.seconds("duration"), a.seed),
        };
        (name, run)
    })
    .into()
}

/// Runs the labs, analyses them and writes `results.json`, the PNGs and `report.html`.
pub fn run(a: &Args) -> Result<Outcome> {
    let (series, runs) =
        common::run_series(a, runs(a), (1.0, 2.0), |name, dir, _| collect(name, dir))?;
    let results = Results {
        outage_start_s: OUTAGE_START_S,
        outage_end_s: OUTAGE_END_S,
        wifi_only: runs[0].metrics.clone(),
        fallback: runs[1].metrics.clone(),
        mptcp: runs[2].metrics.clone(),
    };
    let (checks, rows) = (checks(&results), table_rows(&results));
    series.end(results, checks, rows, |r, c| write_outputs(a, r, c, &runs))
}

/// Reads one run's outputs back.
fn collect(name: &'static str, dir: &Path) -> Result<RunData> {
    let recs = common::program_records(dir, "fallback-client")?;
    let requests = requests_of(&recs);
    if requests.is_empty() {
        bail!(
            "{}: the client made no request (see programs/fallback-client.err)",
            dir.display()
        );
    }
    let analysis = common::analyze_pcap(&RunDir::new(dir).capture("phone", "wlan0"))?;
    Ok(RunData {
        name,
        metrics: metrics(&requests),
        requests,
        analysis,
    })
}

/// The client's requests, answered and failed, on the lab's clock (the client started
/// `CLIENT_START_S` into the lab).
fn requests_of(recs: &[apps::Record]) -> Vec<Request> {
    let mut out: Vec<Request> = recs
        .iter()
        .filter_map(|r| match r {
            apps::Record::FallbackRequest {
                start_s,
                iface,
                request_ms,
                ..
            } => Some(Request {
                start_s: start_s + CLIENT_START_S,
                ms: Some(*request_ms),
                iface: iface.clone(),
            }),
            apps::Record::RequestFailed { t_s, .. } => Some(Request {
                start_s: t_s + CLIENT_START_S,
                ms: None,
                iface: String::new(),
            }),
            _ => None,
        })
        .collect();
    out.sort_by(|a, b| a.start_s.total_cmp(&b.start_s));
    out
}

/// A run's numbers from its requests.
fn metrics(requests: &[Request]) -> RunMetrics {
    let answered: Vec<(&Request, f64)> = requests
        .iter()
        .filter_map(|r| r.ms.map(|ms| (r, ms)))
        .collect();
    let times: Vec<f64> = answered.iter().map(|a| a.1).collect();
    let p = apps::Percentiles::of(&times);
    let on_cell = answered.iter().filter(|a| a.0.iface == CELL).count();
    let back = answered
        .iter()
        .filter(|(r, _)| r.iface == WIFI)
        .map(|(r, ms)| r.start_s + ms / 1e3 - OUTAGE_END_S)
        .filter(|after| *after >= 0.0)
        .min_by(f64::total_cmp);
    let outage: Vec<f64> = answered
        .iter()
        .filter(|(r, _)| (OUTAGE_START_S..OUTAGE_END_S).contains(&r.start_s))
        .map(|a| a.1)
        .collect();
    RunMetrics {
        request_ms_p50: p.map(|p| p.p50),
        request_ms_max: p.map(|p| p.max),
        requests: requests.len() as u64,
        failed: (requests.len() - answered.len()) as u64,
        on_cellular_pct: if answered.is_empty() {
            0.0
        } else {
            100.0 * on_cell as f64 / answered.len() as f64
        },
        back_on_wifi_s: back,
        outage_request_ms_max: outage.into_iter().max_by(f64::total_cmp),
    }
}

/// The experiment's criteria, on these numbers (the talk: "the user won't notice anything odd").
pub fn checks(r: &Results) -> Vec<Check> {
    let worst = |m: &RunMetrics| m.request_ms_max.unwrap_or(f64::INFINITY);
    let stalled = r.wifi_only.failed > 0 || worst(&r.wifi_only) > 3000.0;
    let back = |m: &RunMetrics| m.back_on_wifi_s.is_some_and(|s| s <= 5.0);
    let secs = |m: &RunMetrics| {
        m.back_on_wifi_s
            .map_or("never".to_string(), |s| format!("{s:.1} s"))
    };
    vec![
        Check {
            what: format!(
                "wifi-only: requests stall for seconds during the outage (worst {:.0} ms, {} failed)",
                worst(&r.wifi_only),
                r.wifi_only.failed
            ),
            passed: stalled,
        },
        Check {
            what: format!(
                "fallback: every request answered within about 1 s (worst {:.0} ms, {} failed)",
                worst(&r.fallback),
                r.fallback.failed
            ),
            passed: r.fallback.failed == 0 && worst(&r.fallback) <= 1000.0,
        },
        Check {
            what: format!(
                "fallback: back on Wi-Fi within a few seconds of its recovery ({})",
                secs(&r.fallback)
            ),
            passed: back(&r.fallback),
        },
        Check {
            what: format!(
                "mptcp: every request answered, on one connection (worst {:.0} ms, {} failed)",
                worst(&r.mptcp),
                r.mptcp.failed
            ),
            passed: r.mptcp.failed == 0,
        },
        Check {
            what: format!(
                "mptcp: back on Wi-Fi within a few seconds of its recovery ({})",
                secs(&r.mptcp)
            ),
            passed: back(&r.mptcp),
        },
    ]
}

/// The side-by-side table: header and rows.
pub fn table_rows(r: &Results) -> (Vec<String>, Vec<Vec<String>>) {
    let runs = [
        ("wifi-only", &r.wifi_only),
        ("fallback", &r.fallback),
        ("mptcp", &r.mptcp),
    ];
    let ms = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.0}"));
    let (header, row) = common::run_columns(&runs);
    let rows = vec![
        row("request p50 (ms)", &|m| ms(m.request_ms_p50)),
        row("request max (ms)", &|m| ms(m.request_ms_max)),
        row("worst during the outage (ms)", &|m| {
            ms(m.outage_request_ms_max)
        }),
        row("requests", &|m| m.requests.to_string()),
        row("failed", &|m| m.failed.to_string()),
        row("on cellular (%)", &|m| format!("{:.0}", m.on_cellular_pct)),
        row("back on Wi-Fi after (s)", &|m| {
            m.back_on_wifi_s
                .map_or("never".to_string(), |s| format!("{s:.1}"))
        }),
    ];
    (header, rows)
}

/// One run's timeline: each request at its start, its delay up, coloured by the interface
/// that carried it; failed requests at the timeout.
fn timeline(run: &RunData) -> Chart {
    let points = |iface: &str| -> Vec<(f64, f64)> {
        run.requests
            .iter()
            .filter(|r| r.iface == iface)
            .filter_map(|r| r.ms.map(|ms| (r.start_s, ms)))
            .collect()
    };
    let failed: Vec<(f64, f64)> = run
        .requests
        .iter()
        .filter(|r| r.ms.is_none())
        .map(|r| (r.start_s, TIMEOUT_S * 1e3))
        .collect();
    // The outage's frame stands clear above the slowest request, so that its top edge does
    // not hide that request's dot.
    let top = 1.08
        * run
            .requests
            .iter()
            .map(|r| r.ms.unwrap_or(TIMEOUT_S * 1e3))
            .fold(100.0, f64::max);
    let m = &run.metrics;
    let mut c = Chart::new(
        format!(
            "{}: each request's delay and the interface that carried it",
            run.name
        ),
        Axis::new("request start", "s"),
        Axis::new("request time", "ms").from_zero(),
    )
    .size(900, 360)
    .caption(format!(
        "Grey frame: the Wi-Fi passes nothing ({OUTAGE_START_S:.0} s to {OUTAGE_END_S:.0} s). \
         Blue: over Wi-Fi; orange: over cellular; black: no answer within {TIMEOUT_S:.0} s. \
         {}; {} failed, {:.0} % over cellular, back on Wi-Fi {}.",
        m.request_ms_max
            .map_or("No answer".to_string(), |v| format!("Worst {v:.0} ms")),
        m.failed,
        m.on_cellular_pct,
        m.back_on_wifi_s.map_or("never".to_string(), |s| format!(
            "{s:.1} s after its recovery"
        ))
    ));
    c.push(
        Series::line(
            "outage",
            Rgb::GREY,
            vec![
                (OUTAGE_START_S, 0.0),
                (OUTAGE_START_S, top),
                (OUTAGE_END_S, top),
                (OUTAGE_END_S, 0.0),
            ],
        )
        .keep_in_legend(),
    );
    c.push(Series::scatter("Wi-Fi (wlan0)", Rgb(0, 114, 178), points(WIFI)).keep_in_legend());
    c.push(Series::scatter("cellular (rmnet0)", Rgb(230, 159, 0), points(CELL)).keep_in_legend());
    c.push(Series::scatter("failed", Rgb::BLACK, failed).keep_in_legend());
    c
}

fn write_outputs(a: &Args, r: &Results, checks: &[Check], runs: &[RunData]) -> Result<()> {
    let mut page = common::Report::new(
        "Wi-Fi goes dark, cellular works: fallback and back",
        format!(
            "A phone with Wi-Fi (50 Mbit/s, 4 ms RTT, the preferred route) and cellular \
             (10 Mbit/s, 60 ms RTT) makes a request every second for {:.0} s; the Wi-Fi passes \
             nothing from {OUTAGE_START_S:.0} s to {OUTAGE_END_S:.0} s. Runs: wifi-only (a new \
             connection per request over the default route), fallback (an RFC 8305 race: Wi-Fi \
             first, cellular 250 ms later, the first to connect wins; a Better Route probe moves \
             back to Wi-Fi), mptcp (one MPTCP connection with a backup subflow over cellular). \
             Seed {}.",
            a.seconds("duration"),
            a.seed
        ),
        table_rows(r),
        "Request times are the client's, from each request's start to its \
         answer; failed requests had no answer within 10 s. \"Back on Wi-Fi\" \
         is the time from the Wi-Fi's recovery to the first answer that came \
         over it.",
        common::findings(checks),
    );
    // Each on its own scale: the ordinary app's seconds would flatten the others' milliseconds.
    let timelines = runs
        .iter()
        .map(|run| {
            let id = format!("timeline-{}", run.name);
            Ok(Block::Figure(page.figure(&id, timeline(run), false)?))
        })
        .collect::<Result<_>>()?;
    page.section("Timeline", "", timelines);
    page.analyzer(
        "Diagnoses of `latencylab analyze` on each run's capture of the phone's Wi-Fi \
         interface (phone-wlan0.pcap): where the ordinary app's connection attempts \
         went unanswered (`syn_timeout`).",
        report::findings::analyzer_findings(runs.iter().map(|r| (r.name, &r.analysis))),
    );
    page.files(&[
        "wifi-only/, fallback/, mptcp/: each run's lab output: captures/*.pcap, summary.json, \
         lab.json, programs/fallback-client.out (every request, its interface and time)",
    ]);
    page.write(&a.out_dir, r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(start_s: f64, ms: Option<f64>, iface: &str) -> Request {
        Request {
            start_s,
            ms,
            iface: iface.into(),
        }
    }

    #[test]
    fn metrics_count_cellular_failures_and_the_first_wifi_answer_after_recovery() {
        let rs = [
            req(1.5, Some(5.0), WIFI),
            req(2.5, Some(320.0), CELL),
            req(3.5, None, ""),
            req(19.5, Some(70.0), CELL),
            // Answered over Wi-Fi 0.9 s after its recovery.
            req(20.5, Some(400.0), WIFI),
            req(21.5, Some(5.0), WIFI),
        ];
        let m = metrics(&rs);
        assert_eq!(m.requests, 6);
        assert_eq!(m.failed, 1);
        assert_eq!(m.on_cellular_pct, 40.0);
        assert!((m.back_on_wifi_s.unwrap() - 0.9).abs() < 1e-9, "{m:?}");
        assert_eq!(m.request_ms_max, Some(400.0));
        assert_eq!(m.outage_request_ms_max, Some(320.0));
        let never = metrics(&[req(20.5, Some(70.0), CELL)]);
        assert_eq!(never.back_on_wifi_s, None);
    }

    fn run_metrics(max: f64, failed: u64, back: Option<f64>) -> RunMetrics {
        RunMetrics {
            request_ms_p50: Some(5.0),
            request_ms_max: Some(max),
            requests: 25,
            failed,
            on_cellular_pct: 50.0,
            back_on_wifi_s: back,
            outage_request_ms_max: Some(max),
        }
    }

    #[test]
    fn checks_pass_for_a_stalling_default_and_a_quick_fallback_and_fail_otherwise() {
        let r = |fallback_max, back| Results {
            outage_start_s: 2.0,
            outage_end_s: 20.0,
            wifi_only: run_metrics(9000.0, 6, Some(0.5)),
            fallback: run_metrics(fallback_max, 0, back),
            mptcp: run_metrics(900.0, 0, Some(2.0)),
        };
        assert!(checks(&r(320.0, Some(1.2))).iter().all(|c| c.passed));
        let failed: Vec<String> = checks(&r(3000.0, None))
            .into_iter()
            .filter(|c| !c.passed)
            .map(|c| c.what)
            .collect();
        assert_eq!(failed.len(), 2, "{failed:?}");
        assert!(failed[1].contains("(never)"), "{failed:?}");
    }

    #[test]
    fn the_wifi_goes_dark_from_2_to_20_s_and_only_mptcp_sets_up_endpoints() {
        for (_, mode) in RUNS {
            let cfg = lab_config(mode, 25.0, 1);
            cfg.validate().unwrap();
            let at: Vec<f64> = cfg.changes.iter().map(|c| c.at_s).collect();
            assert_eq!(at, vec![2.0, 20.0]);
            assert!(cfg.changes.iter().all(|c| c.link == "wifi"));
            let client = &cfg.programs[1].run;
            assert!(client.contains(&format!("--mode {mode}")), "{client}");
            assert_eq!(client.contains("ip mptcp endpoint"), mode == "mptcp");
            assert_eq!(cfg.hosts[0].interfaces.len(), 2);
        }
    }
}
