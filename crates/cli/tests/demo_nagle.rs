//! End-to-end test of `latencylab demo nagle`: a shortened demo runs for real, in
//! namespaces, over the 500 ms satellite path, and its `results.json` must show the three
//! round trips of two writes under Nagle against one with TCP_NODELAY or writev(), and the
//! analyzer naming the Nagle hold only where it happened. The report is then opened in
//! headless Chromium. Needs root, /dev/net/tun and /usr/bin/chromium.
//!
//! The demo runs once per test binary; the tests that read its output share that run.

mod common;

use common::*;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// Every chart of the demo's report, each also a PNG.
const CHARTS: &[&str] = &[
    "ladder-nagle",
    "ladder-nodelay",
    "ladder-writev",
    "exchanges",
];

static DEMO: OnceLock<(PathBuf, String)> = OnceLock::new();

/// Runs `latencylab demo nagle --duration 8s -o DIR` once; returns DIR and stdout.
fn demo() -> &'static (PathBuf, String) {
    DEMO.get_or_init(|| {
        let _g = lock();
        let dir = out_dir("demo-nagle");
        let out = Command::new(bin())
            .args(["demo", "nagle", "--duration", "8s", "--quiet", "-o"])
            .arg(&dir)
            .stdin(Stdio::null())
            .output()
            .expect("latencylab runs");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "demo nagle failed: {}\nstdout:\n{stdout}\nstderr:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        assert_nothing_left();
        (dir, stdout)
    })
}

fn f(v: &serde_json::Value, run: &str, key: &str) -> f64 {
    v[run][key]
        .as_f64()
        .unwrap_or_else(|| panic!("results.json: {run}.{key} is not a number: {}", v[run]))
}

fn kinds(v: &serde_json::Value, run: &str) -> Vec<String> {
    v[run]["diagnoses"]
        .as_array()
        .unwrap_or_else(|| panic!("results.json: {run}.diagnoses is not a list: {}", v[run]))
        .iter()
        .map(|k| k.as_str().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn nagle_demo_takes_three_round_trips_with_two_writes_and_one_without() {
    let (dir, stdout) = demo();
    let r = read_json(&dir.join("results.json"));
    let base = 500.0;
    assert_eq!(r["base_rtt_ms"].as_f64(), Some(base));
    for run in ["nagle", "nodelay", "writev"] {
        assert!(f(&r, run, "exchanges") >= 2.0, "{run}: {r}");
        assert!(f(&r, run, "exchange_ms_p50") <= f(&r, run, "exchange_ms_p95"));
        // Nothing is faster than the path's round trip.
        assert!(f(&r, run, "exchange_ms_p50") >= base - 1.0, "{run}: {r}");
    }
    // About 3 RTT per exchange when Nagle holds the second write, against about 1.
    let nagle = f(&r, "nagle", "exchange_ms_p50") / base;
    assert!((2.5..=3.5).contains(&nagle), "{r}");
    for run in ["nodelay", "writev"] {
        assert!(f(&r, run, "exchange_ms_p50") / base <= 1.5, "{run}: {r}");
    }
    // The analyzer names the hold where it happened, and only there.
    assert!(
        kinds(&r, "nagle").contains(&"nagle_delayed_ack".to_string()),
        "{r}"
    );
    for run in ["nodelay", "writev"] {
        assert!(
            !kinds(&r, run).contains(&"nagle_delayed_ack".to_string()),
            "{run}: {r}"
        );
    }
    assert_charts(dir, CHARTS);
    for run in ["nagle", "nodelay", "writev"] {
        assert!(dir.join(run).join("captures/client-eth0.pcap").exists());
        assert!(dir.join(run).join("captures/server-eth0.pcap").exists());
    }
    assert!(stdout.contains("exchange p50 (RTTs)"), "{stdout}");
    assert!(stdout.contains("report.html"), "{stdout}");
}

#[test]
fn nagle_report_renders_in_headless_chromium_with_every_figure() {
    let (dir, _) = demo();
    let dom = check_renders(&dir.join("report.html"), CHARTS);
    assert!(dom.contains("What the analyzer found"));
    assert!(dom.contains("nagle_delayed_ack"));
}

/// `--reanalyse` on a copy of the run: no lab, the same table, `results.json` and charts from
/// the same captures; and a copy asked for with other options is refused, naming the option
/// that differs.
#[test]
fn nagle_reanalysed_gives_the_same_table_and_files_and_refuses_other_options() {
    let (dir, stdout) = demo();
    let again = out_dir("demo-nagle-again");
    let copied = Command::new("cp")
        .arg("-a")
        .arg(dir)
        .arg(&again)
        .status()
        .expect("cp runs");
    assert!(copied.success());
    let capture = again.join("nagle/captures/client-eth0.pcap");
    let pcap = std::fs::read(&capture).unwrap();
    let out = run(&[
        "demo",
        "nagle",
        "--duration",
        "8s",
        "--quiet",
        "--reanalyse",
        "-o",
        again.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let table = |s: &str| s.split("\nreport: ").next().unwrap_or_default().to_string();
    assert_eq!(table(&text(&out.stdout)), table(stdout));
    assert_eq!(
        read_json(&again.join("results.json")),
        read_json(&dir.join("results.json"))
    );
    for png in ["ladder-nagle.png", "exchanges.png"] {
        let (a, b) = (std::fs::read(dir.join(png)), std::fs::read(again.join(png)));
        assert!(a.unwrap() == b.unwrap(), "{png} differs when drawn again");
    }
    assert_eq!(
        std::fs::read(&capture).unwrap(),
        pcap,
        "the capture was rewritten"
    );
    let other = run(&[
        "demo",
        "nagle",
        "--duration",
        "9s",
        "--quiet",
        "--reanalyse",
        "-o",
        again.to_str().unwrap(),
    ]);
    assert_eq!(other.status.code(), Some(1), "{}", text(&other.stderr));
    assert!(
        text(&other.stderr).contains("--duration 8000ms"),
        "{}",
        text(&other.stderr)
    );
    assert_nothing_left();
}
