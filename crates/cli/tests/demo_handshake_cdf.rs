//! End-to-end test of `latencylab demo handshake-cdf`: a shortened demo runs for real, in
//! namespaces (10 servers, 2 connections each), and its `results.json` must show every
//! connection timed at the client, each handshake no shorter than its server's configured
//! round trip, and the shape of the 2011 post's histogram. The report is then opened in headless Chromium. Needs
//! root, /dev/net/tun and /usr/bin/chromium.

mod common;

use common::*;

use std::path::PathBuf;
use std::sync::OnceLock;

static DEMO: OnceLock<(PathBuf, String)> = OnceLock::new();

const SERVERS: usize = 10;
const PER_SERVER: usize = 2;

fn demo() -> &'static (PathBuf, String) {
    DEMO.get_or_init(|| {
        run_demo_in_tempdir(
            "handshake-cdf",
            &["handshake-cdf", "--servers", "10", "--per-server", "2"],
        )
    })
}

#[test]
fn handshakes_follow_the_servers_round_trips_and_about_half_are_under_100ms() {
    let (dir, stdout) = demo();
    let r = read_json(&dir.join("results.json"));
    assert_eq!(
        r["connections"].as_u64(),
        Some((SERVERS * PER_SERVER) as u64),
        "{r}"
    );
    let rtts: Vec<f64> = r["server_rtt_ms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect();
    assert_eq!(rtts.len(), SERVERS);

    // Each handshake at the client is its server's round trip: never shorter, and longer only
    // by the forwarding's own time (a few ms on a loaded machine; the servers are 10 ms or
    // more apart, so a handshake matched to the wrong server still shows), and by the lab's
    // lateness when its engine waited for a CPU (measured, its worst case allowed on top).
    let late_ms = lab_lateness_ms(&dir.join("browsing"), "max");
    let analysis = run(&[
        "analyze",
        "--json",
        &dir.join("browsing/captures/client-eth0.pcap")
            .display()
            .to_string(),
    ]);
    assert!(analysis.status.success(), "{}", text(&analysis.stderr));
    let v: serde_json::Value = serde_json::from_slice(&analysis.stdout).unwrap();
    let mut ours: Vec<f64> = v["handshakes"]["cdf"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["ms"].as_f64().unwrap())
        .collect();
    ours.sort_by(f64::total_cmp);
    let mut want: Vec<f64> = rtts
        .iter()
        .flat_map(|&x| std::iter::repeat_n(x, PER_SERVER))
        .collect();
    want.sort_by(f64::total_cmp);
    for (o, w) in ours.iter().zip(&want) {
        assert!(
            *o >= w - 0.5 && *o <= w + 10.0 + late_ms,
            "handshakes {ours:?}\nround trips {want:?}\nlab lateness max {late_ms} ms"
        );
    }

    // Four of the ten servers are under 100 ms (quantiles 5 % to 35 %), all under 400 ms.
    let under = r["under_100ms_pct"].as_f64().unwrap();
    assert!((35.0..=65.0).contains(&under), "{r}");
    assert_eq!(r["rest_under_400ms_pct"].as_f64(), Some(100.0), "{r}");
    assert!(
        stdout.contains("ok  about half the handshakes under 100 ms"),
        "{stdout}"
    );
    assert!(dir.join("handshake-cdf.png").exists());
    assert_nothing_left();
}

#[test]
fn handshake_cdf_report_renders_in_headless_chromium() {
    let (dir, _) = demo();
    let dom = check_renders(&dir.join("report.html"), &["handshake-cdf"]);
    assert!(dom.contains("TCP handshake times"));
}
