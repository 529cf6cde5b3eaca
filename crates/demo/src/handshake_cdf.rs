//! `latencylab demo handshake-cdf`: the distribution of TCP handshake times over a browsing
//! session from a home line to many servers (experiment E14 of the 2011 post: "only about half of my handshakes are under 100 ms; most of the rest
//! fall in the next 300 ms").
//!
//! The lab: one client behind a cable-like home line (50 Mbit/s down, 10 Mbit/s up, 5 ms each
//! way) to a router, and from it one link per server, each with its own propagation delay, so
//! that each server's round trip from the client is one value of a measured spread. The spread
//! is CAIDA Archipelago's RTTs from a US monitor to every destination it probes (monitor
//! `dtw2-us`, Merit, Ann Arbor, IPv6: 10th, 25th, 50th, 75th and 90th percentiles 27.1, 56.7,
//! 113.3, 156.7 and 232.1 ms; https://www.caida.org/projects/ark/statistics/dtw2-us/
//! dest_rtt_ccdf_v6.html), read between its percentiles piecewise linearly, from the home
//! line's own round trip at the 0th and on the 75th to 90th slope beyond the 90th. Ark probes
//! every routed prefix, not web servers, which CDNs bring closer; it is a spread of the
//! Internet's paths, not of one user's browsing, and the report says so.
//!
//! Server `i` of `n` sits at the `(i + 1/2) / n` quantile: no random draw, the same servers
//! every run. Each runs `tfo-server`; the client opens several short connections to each
//! (`tfo-client`, one request per connection, no Fast Open), the servers' sessions staggered
//! like a page's resources. Measured: the analyzer's handshake times on the client's capture
//! (SYN to SYN-ACK at the client, see `analyze::handshakes`).
//!
//! This module runs and presents; it does not judge: the criteria are printed as checks, and
//! the end-to-end test asserts them.

use analyze::Analysis;
use anyhow::{bail, Context, Result};
use lab::config::{EcnMode, LabConfig};
use labnet::run_dir::RunDir;
use report::Block;
use serde::Serialize;

use crate::common::{self, Check};
use crate::params::Args;

/// The home line's own round trip, ms (5 ms each way): every server is at least this far.
pub const ACCESS_RTT_MS: f64 = 10.0;
/// The measured spread: (percentile, RTT ms) from CAIDA Ark's `dtw2-us` monitor (IPv6).
pub const ARK_PERCENTILES: [(f64, f64); 5] = [
    (10.0, 27.081),
    (25.0, 56.742),
    (50.0, 113.288),
    (75.0, 156.681),
    (90.0, 232.085),
];
/// When the client starts, s after the lab: the servers listen by then.
const CLIENT_START_S: f64 = 0.5;
/// Time from one connection's start to the next one's, to the same server.
const INTERVAL_MS: u64 = 200;
/// Time between the first connections to two successive servers.
const STAGGER_MS: u64 = 50;
/// The servers' port (tfo-server's default).
const PORT: u16 = 5205;

/// `results.json`.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Results {
    /// Connections whose handshake the analyzer timed at the client.
    pub connections: usize,
    pub handshake_ms_p50: f64,
    pub handshake_ms_p90: f64,
    pub under_100ms_pct: f64,
    /// Of the handshakes of 100 ms or more, the share under 400 ms.
    pub rest_under_400ms_pct: f64,
    /// Each server's configured round trip from the client, ms.
    pub server_rtt_ms: Vec<f64>,
    pub connections_per_server: u64,
}

/// What the demo leaves: its results, the terminal table and checks, and where the report is.
pub type Outcome = common::Outcome<Results>;

/// The RTT at percentile `p` (0 to 100) of the measured spread, ms: linear between the
/// published percentiles, from [`ACCESS_RTT_MS`] at 0, on the 75th to 90th slope beyond 90.
pub fn rtt_at_percentile(p: f64) -> f64 {
    let mut pts = vec![(0.0, ACCESS_RTT_MS)];
    pts.extend_from_slice(&ARK_PERCENTILES);
    for w in pts.windows(2) {
        let ((p0, r0), (p1, r1)) = (w[0], w[1]);
        if p <= p1 {
            return r0 + (r1 - r0) * (p - p0) / (p1 - p0);
        }
    }
    let ((p0, r0), (p1, r1)) = (pts[pts.len() - 2], pts[pts.len() - 1]);
    r1 + (r1 - r0) / (p1 - p0) * (p - p1)
}

/// The servers' round trips, ms: server `i` of `n` at the `(i + 1/2) / n` quantile.
pub fn server_rtts_ms(n: usize) -> Vec<f64> {
    (0..n)
        .map(|i| rtt_at_percentile(100.0 * (i as f64 + 0.5) / n as f64))
        .collect()
}

fn server_name(i: usize) -> String {
    format!("s{}", i + 1)
}

/// The lab: client, home line, router, one link per server with its share of the delay.
pub fn lab_config(servers: usize, per_server: u64, seed: u64) -> LabConfig {
    let queue = lab::config::Direction::default().queue.to_string();
    let half_access_us = (ACCESS_RTT_MS * 500.0).round() as u64;
    let mut hosts = vec![common::host("client", 1, EcnMode::Passive)];
    let half_access = format!("{half_access_us}us");
    let mut links = vec![common::link(
        "home",
        ("client", "isp"),
        common::direction("10mbit", &half_access, &queue),
        common::direction("50mbit", &half_access, &queue),
    )];
    let mut programs = Vec::new();
    let mut client = Vec::new();
    for (i, rtt) in server_rtts_ms(servers).into_iter().enumerate() {
        let name = server_name(i);
        hosts.push(common::host(&name, i + 2, EcnMode::Passive));
        // Each way: half of what the server's round trip adds to the home line's.
        let one_way_us = ((rtt - ACCESS_RTT_MS).max(0.0) * 500.0).round() as u64;
        let delay = format!("{one_way_us}us");
        let server = || common::direction("1gbit", &delay, &queue);
        links.push(common::link(&name, ("isp", &name), server(), server()));
        programs.push(common::program(
            &format!("server-{name}"),
            &name,
            0.0,
            format!("exec latencylab tfo-server --no-fastopen --port {PORT}"),
            false,
        ));
        client.push(format!(
            "(sleep {:.3}; exec latencylab tfo-client {name}:{PORT} --count {per_server} --interval {INTERVAL_MS}ms > /dev/null) &",
            i as f64 * STAGGER_MS as f64 / 1000.0
        ));
    }
    client.push("wait".into());
    programs.push(common::program(
        "browser",
        "client",
        CLIENT_START_S,
        client.join(" "),
        true,
    ));
    common::lab(seed, hosts, &["isp"], links, programs)
}

/// The one run: what [`run`] runs and `--export` writes.
pub fn runs(a: &Args) -> [((), common::Run); 1] {
    let lab_s = CLIENT_START_S
        + a.count("servers") as usize as f64 * STAGGER_MS as f64 / 1000.0
        + a.count("per-server") as f64 * INTERVAL_MS as f64 / 1000.0
        + 2.0;
    let run = common::Run {
        dir: "browsing".into(),
        msg: format!(
            "{} servers, {} connections each",
            a.count("servers") as usize,
            a.count("per-server")
        ),
        expected_s: lab_s,
        config: lab_config(a.count("servers") as usize, a.count("per-server"), a.seed),
    };
    [((), run)]
}

/// Runs the lab, analyses the client's capture and writes `results.json`, the PNG and
/// `report.html`.
pub fn run(a: &Args) -> Result<Outcome> {
    let (series, analysis) = common::run_series(a, runs(a).into(), (1.0, 2.0), |(), dir, _| {
        common::analyze_captures(&[RunDir::new(dir).capture("client", "eth0")], false)
    })?;
    let results = results(&analysis[0], a)?;
    let (checks, rows) = (checks(&results, a), table_rows(&results));
    series.end(results, checks, rows, |r, c| {
        write_outputs(a, r, c, &analysis[0])
    })
}

fn results(a: &Analysis, args: &Args) -> Result<Results> {
    let h = a.handshakes();
    let (Some(p50), Some(p90), Some(under)) = (
        h.percentile_ms(50.0),
        h.percentile_ms(90.0),
        h.under_pct(100.0),
    ) else {
        bail!("the client's capture holds no handshake (see browsing/programs/browser.err)");
    };
    let rest: Vec<f64> = h
        .samples_ms
        .iter()
        .copied()
        .filter(|&x| x >= 100.0)
        .collect();
    let rest_under_400 = if rest.is_empty() {
        100.0
    } else {
        rest.iter().filter(|&&x| x < 400.0).count() as f64 * 100.0 / rest.len() as f64
    };
    Ok(Results {
        connections: h.count(),
        handshake_ms_p50: p50,
        handshake_ms_p90: p90,
        under_100ms_pct: under,
        rest_under_400ms_pct: rest_under_400,
        server_rtt_ms: server_rtts_ms(args.count("servers") as usize),
        connections_per_server: args.count("per-server"),
    })
}

/// The talk's shape, on these numbers.
pub fn checks(r: &Results, a: &Args) -> Vec<Check> {
    let want = a.count("servers") as usize as u64 * a.count("per-server");
    vec![
        Check {
            what: format!(
                "every connection's handshake was timed at the client ({} of {want})",
                r.connections
            ),
            passed: r.connections as u64 == want,
        },
        Check {
            what: format!(
                "about half the handshakes under 100 ms ({:.0}%, within 35% to 65%)",
                r.under_100ms_pct
            ),
            passed: (35.0..=65.0).contains(&r.under_100ms_pct),
        },
        Check {
            what: format!(
                "most of the rest within the next 300 ms ({:.0}% of them under 400 ms, at least 75%)",
                r.rest_under_400ms_pct
            ),
            passed: r.rest_under_400ms_pct >= 75.0,
        },
    ]
}

/// The table: the talk's figures beside this run's.
pub fn table_rows(r: &Results) -> (Vec<String>, Vec<Vec<String>>) {
    let header = vec!["".into(), "seed (2011)".into(), "this run".into()];
    let rows = vec![
        vec![
            "connections".into(),
            "15,000".into(),
            r.connections.to_string(),
        ],
        vec![
            "handshake p50 (ms)".into(),
            "about 100".into(),
            format!("{:.1}", r.handshake_ms_p50),
        ],
        vec![
            "handshake p90 (ms)".into(),
            "under 400".into(),
            format!("{:.1}", r.handshake_ms_p90),
        ],
        vec![
            "under 100 ms".into(),
            "about half".into(),
            format!("{:.0}%", r.under_100ms_pct),
        ],
        vec![
            "of the rest, under 400 ms".into(),
            "most".into(),
            format!("{:.0}%", r.rest_under_400ms_pct),
        ],
    ];
    (header, rows)
}

fn write_outputs(args: &Args, r: &Results, checks: &[Check], a: &Analysis) -> Result<()> {
    let chart = report::analysis::handshake_cdf(a)
        .context("no handshake to draw")?
        .size(900, 480);
    let mut page = common::Report::new(
        "TCP handshake times over a browsing session",
        format!(
            "One client on a home line (50 Mbit/s down, 10 Mbit/s up, {ACCESS_RTT_MS:.0} ms \
             round trip) and {} servers whose round trips from it span CAIDA Archipelago's \
             measured spread; {} short connections to each; seed {}.",
            args.count("servers") as usize,
            args.count("per-server"),
            args.seed
        ),
        table_rows(r),
        "Handshake times are the analyzer's, on the client's capture: first SYN to the \
         SYN-ACK, what connect() waited. The seed's column is the 2011 post's Firefox \
         histogram of 15,000 handshakes on a premium cable line.",
        common::findings(checks),
    );
    let cdf = page.figure("handshake-cdf", chart, true)?;
    page.section("Handshake CDF", "", vec![Block::Figure(cdf)]);
    let rtts: Vec<String> = r.server_rtt_ms.iter().map(|x| format!("{x:.0}")).collect();
    page.section(
        "Where the spread comes from",
        &format!(
            "Each server's round trip is one quantile of the RTTs CAIDA's Archipelago monitor \
             dtw2-us (Merit, Ann Arbor, IPv6) measured to every destination it probes \
             (https://www.caida.org/projects/ark/statistics/dtw2-us/dest_rtt_ccdf_v6.html: \
             10th, 25th, 50th, 75th, 90th percentiles 27, 57, 113, 157, 232 ms), read linearly \
             between them. Ark probes every routed prefix rather than the servers a browser \
             visits, which content delivery networks bring closer; the demo shows the shape \
             that such a spread gives, not one user's browsing. Servers' round trips (ms): {}.",
            rtts.join(", ")
        ),
        vec![],
    );
    page.analyzer(
        "Diagnoses of `latencylab analyze` on the client's capture. Nothing is lost or queued \
         here, so the cause it names is the distance itself: `path_delay` on the connections \
         to the far servers, whose time went to round trips. An `app_limited` line, where \
         there is one, is a client or server program that the machine scheduled late between \
         the handshake and the request or the answer: it is not in the handshake times.",
        report::findings::analyzer_findings([("browsing", a)]),
    );
    page.files(&[
        "browsing/: the lab output: captures/*.pcap (client-eth0.pcap is the one \
         analysed), summary.json, lab.json, programs/",
    ]);
    page.write(&args.out_dir, r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spread_passes_through_the_published_percentiles() {
        for (p, rtt) in ARK_PERCENTILES {
            assert!((rtt_at_percentile(p) - rtt).abs() < 1e-9);
        }
        assert_eq!(rtt_at_percentile(0.0), ACCESS_RTT_MS);
        // Beyond the 90th, on the 75th to 90th slope.
        let slope = (232.085 - 156.681) / 15.0;
        assert!((rtt_at_percentile(100.0) - (232.085 + 10.0 * slope)).abs() < 1e-9);
        let rtts = server_rtts_ms(20);
        assert!(rtts.windows(2).all(|w| w[0] < w[1]));
        assert!(rtts[0] > ACCESS_RTT_MS);
    }

    #[test]
    fn each_server_gets_its_own_delay_and_the_client_visits_every_one() {
        let cfg = lab_config(4, 3, 1);
        cfg.validate().unwrap();
        assert_eq!(cfg.hosts.len(), 5);
        assert_eq!(cfg.links.len(), 5);
        let browser = cfg.programs.iter().find(|p| p.name == "browser").unwrap();
        for s in ["s1", "s2", "s3", "s4"] {
            assert!(browser
                .run
                .contains(&format!("tfo-client {s}:{PORT} --count 3")));
        }
        let delays: Vec<String> = cfg.links[1..]
            .iter()
            .map(|l| format!("{:?}", l.up))
            .collect();
        assert!(delays.windows(2).all(|w| w[0] != w[1]), "{delays:?}");
    }

    fn results(under: f64, rest: f64, connections: usize) -> Results {
        Results {
            connections,
            handshake_ms_p50: 110.0,
            handshake_ms_p90: 240.0,
            under_100ms_pct: under,
            rest_under_400ms_pct: rest,
            server_rtt_ms: vec![],
            connections_per_server: 5,
        }
    }

    #[test]
    fn checks_want_half_under_100ms_and_the_rest_mostly_under_400ms() {
        let opts = Args::of("handshake-cdf", "x".into(), &[]).unwrap();
        assert!(checks(&results(45.0, 100.0, 100), &opts)
            .iter()
            .all(|c| c.passed));
        let bad = checks(&results(90.0, 50.0, 99), &opts);
        assert!(bad.iter().all(|c| !c.passed));
    }
}
