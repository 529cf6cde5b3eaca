//! End-to-end test of `latencylab demo fallback`: a shortened demo runs for real, in
//! namespaces, and its `results.json` must show the ordinary app stalling while the Wi-Fi
//! passes nothing, the RFC 8305 race answering every request within about a second over
//! cellular and moving back to Wi-Fi within a few seconds of its recovery, and MPTCP keeping
//! its one connection working. The report is then opened in headless Chromium. Needs root,
//! /dev/net/tun and /usr/bin/chromium.

mod common;

use common::*;

use std::path::PathBuf;
use std::sync::OnceLock;

static DEMO: OnceLock<(PathBuf, String)> = OnceLock::new();

/// Runs `latencylab demo fallback --duration 23s -o DIR` once; returns DIR and stdout.
fn demo() -> &'static (PathBuf, String) {
    DEMO.get_or_init(|| run_demo_in_tempdir("fallback", &["fallback", "--duration", "23s"]))
}

fn f(v: &serde_json::Value, run: &str, key: &str) -> f64 {
    v[run][key]
        .as_f64()
        .unwrap_or_else(|| panic!("results.json: {run}.{key} is not a number: {}", v[run]))
}

#[test]
fn the_race_hides_the_outage_that_stalls_the_ordinary_app() {
    let (dir, stdout) = demo();
    let r = read_json(&dir.join("results.json"));
    for run in ["wifi-only", "fallback", "mptcp"] {
        assert!(f(&r, run, "requests") >= 22.0, "{r}");
    }
    // The ordinary app waits out SYN retransmissions on the dead Wi-Fi: seconds, or never.
    assert!(
        f(&r, "wifi-only", "failed") > 0.0 || f(&r, "wifi-only", "request_ms_max") > 3000.0,
        "{r}"
    );
    assert_eq!(f(&r, "wifi-only", "on_cellular_pct"), 0.0, "{r}");
    // The race: nothing lost, nothing slow, cellular only while needed.
    assert_eq!(f(&r, "fallback", "failed"), 0.0, "{r}");
    // A busy machine that stops the lab's engine holds every packet meanwhile: the engine's
    // longest stall, as it measured it, is allowed on top.
    let s = read_json(&dir.join("fallback").join("summary.json"));
    let stall_ms = s["engine"]["longest_stall_ms"].as_f64().unwrap();
    assert!(
        f(&r, "fallback", "request_ms_max") <= 1000.0 + stall_ms,
        "the engine's longest stall {stall_ms} ms: {r}"
    );
    let cell = f(&r, "fallback", "on_cellular_pct");
    assert!(cell > 50.0 && cell < 100.0, "{r}");
    assert!(f(&r, "fallback", "back_on_wifi_s") <= 5.0, "{r}");
    // The demo's own check says the same, unless the machine stalled the run (which the demo
    // warns of).
    assert!(
        stdout.contains("ok  fallback: every request answered within about 1 s")
            || stall_ms > labnet::lifecycle::STALL_WORTH_SAYING.as_secs_f64() * 1e3,
        "{stdout}"
    );
    assert!(dir.join("timeline-fallback.png").exists());
    assert_nothing_left();
}

#[test]
fn mptcp_keeps_one_connection_working_through_the_outage() {
    let (dir, _) = demo();
    let r = read_json(&dir.join("results.json"));
    // The kernel moves the requests to the cellular subflow once the Wi-Fi one goes stale;
    // the client's Better Route probe has a new Wi-Fi subflow made once Wi-Fi works again.
    assert_eq!(f(&r, "mptcp", "failed"), 0.0, "{r}");
    assert!(f(&r, "mptcp", "on_cellular_pct") > 50.0, "{r}");
    assert!(f(&r, "mptcp", "request_ms_max") < 3000.0, "{r}");
    assert!(f(&r, "mptcp", "back_on_wifi_s") <= 5.0, "{r}");
    // One MPTCP connection: in the phone's cellular capture, one subflow's handshake.
    let out = run(&[
        "analyze",
        "--json",
        &dir.join("mptcp/captures/phone-rmnet0.pcap")
            .display()
            .to_string(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("analyze --json");
    let conns = v["connections"].as_array().expect("connections").len();
    assert_eq!(conns, 1, "{v}");
    // Back on Wi-Fi over a subflow that joined the same connection (MP_JOIN), after the probe.
    let lines =
        json_lines(&labnet::run_dir::RunDir::new(dir.join("mptcp")).program_out("fallback-client"));
    assert!(
        lines.iter().any(|l| l["type"] == "better_route"),
        "no better_route line"
    );
}

#[test]
fn fallback_report_renders_in_headless_chromium() {
    let (dir, _) = demo();
    let dom = check_renders(
        &dir.join("report.html"),
        &["timeline-wifi-only", "timeline-fallback", "timeline-mptcp"],
    );
    assert!(dom.contains("Better Route"));
}
