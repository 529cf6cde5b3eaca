//! End-to-end test of `latencylab demo tfo`: a shortened demo runs for real, in namespaces,
//! and its `results.json` must show the round trip that TCP Fast Open saves, with generous
//! margins (never exact values: the machine is shared), and the late duplicate SYNs that Fast
//! Open makes the server act on twice. The report is then opened in headless Chromium. Needs root,
//! /dev/net/tun and /usr/bin/chromium.

mod common;

use common::*;

use std::path::PathBuf;
use std::sync::OnceLock;

static DEMO: OnceLock<(PathBuf, String)> = OnceLock::new();

/// Runs `latencylab demo tfo --requests 12 -o DIR` once; returns DIR and stdout.
fn demo() -> &'static (PathBuf, String) {
    DEMO.get_or_init(|| run_demo_in_tempdir("tfo", &["tfo", "--requests", "12"]))
}

fn f(v: &serde_json::Value, run: &str, key: &str) -> f64 {
    v[run][key]
        .as_f64()
        .unwrap_or_else(|| panic!("results.json: {run}.{key} is not a number: {}", v[run]))
}

#[test]
fn fast_open_answers_in_one_round_trip_where_plain_tcp_needs_two() {
    let (dir, stdout) = demo();
    let r = read_json(&dir.join("results.json"));
    let rtt = 100.0;
    assert_eq!(r["base_rtt_ms"].as_f64(), Some(rtt));
    // Two round trips without Fast Open, one with it: never less than the physics allows.
    assert!(f(&r, "plain", "request_ms_p50") >= 2.0 * rtt - 1.0, "{r}");
    assert!(f(&r, "plain", "request_ms_p50") < 2.5 * rtt, "{r}");
    assert!(f(&r, "tfo", "request_ms_p50") >= rtt - 1.0, "{r}");
    assert!(f(&r, "tfo", "request_ms_p50") < 1.5 * rtt, "{r}");
    assert_eq!(f(&r, "plain", "requests"), 12.0, "{r}");
    assert_eq!(f(&r, "tfo", "requests"), 12.0, "{r}");
    // The first Fast Open connection fetches the cookie; the other eleven carry their request
    // in the SYN, as the client's TCP_INFO and the analyzer on the server's capture both say.
    assert_eq!(f(&r, "plain", "tfo_requests"), 0.0, "{r}");
    assert_eq!(f(&r, "plain", "tfo_in_capture"), 0.0, "{r}");
    assert_eq!(f(&r, "tfo", "tfo_requests"), 11.0, "{r}");
    assert_eq!(f(&r, "tfo", "tfo_in_capture"), 11.0, "{r}");
    for run in ["plain", "tfo"] {
        assert_eq!(f(&r, run, "server_actions"), 12.0, "{r}");
        assert_eq!(f(&r, run, "double_actions"), 0.0, "{r}");
    }

    // The analyzer's JSON names each Fast Open connection.
    let out = run(&[
        "analyze",
        "--json",
        &dir.join("tfo/captures/server-eth0.pcap")
            .display()
            .to_string(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("analyze --json");
    let tfo: Vec<bool> = v["connections"]
        .as_array()
        .expect("connections")
        .iter()
        .map(|c| c["tfo"].as_bool().expect("tfo is a boolean"))
        .collect();
    assert_eq!(tfo.len(), 12, "{tfo:?}");
    assert!(!tfo[0] && tfo[1..].iter().all(|t| *t), "{tfo:?}");

    // Late copies of the client's packets: each SYN with data is done again (all but the
    // cookie's), a plain SYN does nothing.
    let d = &r["duplicate"];
    for run in ["plain", "tfo"] {
        assert_eq!(f(d, run, "requests"), 12.0, "{r}");
    }
    assert_eq!(f(d, "plain", "server_actions"), 12.0, "{r}");
    assert_eq!(f(d, "plain", "double_actions"), 0.0, "{r}");
    assert_eq!(f(d, "tfo", "server_actions"), 23.0, "{r}");
    assert_eq!(f(d, "tfo", "double_actions"), 11.0, "{r}");
    assert!(
        stdout.contains("ok  duplicate, tfo: a late SYN with data is done again"),
        "{stdout}"
    );

    assert!(dir.join("request-time.png").exists());
    assert!(
        stdout.contains("ok  tfo: a request takes about 1 RTT"),
        "{stdout}"
    );
    assert_nothing_left();
}

#[test]
fn tfo_report_renders_in_headless_chromium() {
    let (dir, _) = demo();
    let dom = check_renders(&dir.join("report.html"), &["request-time"]);
    assert!(dom.contains("TCP Fast Open"));
}
