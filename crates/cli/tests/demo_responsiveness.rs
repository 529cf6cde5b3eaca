//! End-to-end test of `latencylab demo responsiveness`: a shortened demo runs for real, in
//! namespaces, five labs in turn, and its `results.json` must show the FIFO's RPM far below
//! the AQMs', FQ-CoDel's foreign probes hardly queuing, and every attribution adding up. The
//! report is then opened in headless Chromium. Needs root, /dev/net/tun and /usr/bin/chromium.

mod common;

use common::*;

use std::path::PathBuf;
use std::sync::OnceLock;

static DEMO: OnceLock<(PathBuf, String)> = OnceLock::new();

/// Runs `latencylab demo responsiveness --duration 10s -o DIR` once; returns DIR and stdout.
fn demo() -> &'static (PathBuf, String) {
    DEMO.get_or_init(|| {
        run_demo_in_tempdir("responsiveness", &["responsiveness", "--duration", "10s"])
    })
}

fn run_of<'a>(r: &'a serde_json::Value, label: &str) -> &'a serde_json::Value {
    r["runs"]
        .as_array()
        .expect("results.json: runs is a list")
        .iter()
        .find(|m| m["label"] == label)
        .unwrap_or_else(|| panic!("results.json: no run {label}: {r}"))
}

fn f(v: &serde_json::Value, path: &[&str]) -> f64 {
    let mut x = v;
    for k in path {
        x = &x[*k];
    }
    x.as_f64()
        .unwrap_or_else(|| panic!("{}: not a number in {v}", path.join(".")))
}

#[test]
fn fifo_is_far_less_responsive_than_every_aqm_and_the_attribution_adds_up() {
    let (dir, stdout) = demo();
    let r = read_json(&dir.join("results.json"));
    let fifo = f(run_of(&r, "FIFO"), &["rpm"]);
    for aqm in ["CoDel", "FQ-CoDel", "PIE", "DualPI2"] {
        let rpm = f(run_of(&r, aqm), &["rpm"]);
        assert!(rpm >= 4.0 * fifo, "{aqm}: {rpm} against FIFO's {fifo}: {r}");
    }
    // FQ-CoDel: a new connection's packets hardly wait.
    let fq = run_of(&r, "FQ-CoDel");
    let foreign_queues: f64 = fq["attribution"]["foreign"]["queues_ms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .sum();
    assert!(foreign_queues < 20.0, "{foreign_queues} ms: {fq}");
    // Every run's loaded round trip is its named parts within 5 %: what no measurement names
    // (the hosts' receiving) is small, self probes taken apart packet by packet.
    for m in r["runs"].as_array().unwrap() {
        let a = &m["attribution"];
        let unexplained = f(a, &["hosts_ms"]) / f(a, &["loaded_rtt_ms"]);
        assert!(
            unexplained.abs() <= 0.05,
            "{}: {unexplained}: {a}",
            m["label"]
        );
        let s = &a["self"];
        assert!(
            f(s, &["probes_by_packet"]) >= 0.9 * f(s, &["probes"]),
            "{}: {s}",
            m["label"]
        );
    }
    assert!(dir.join("parts.png").exists());
    assert!(stdout.contains("ok  FIFO's RPM"), "{stdout}");
    assert!(stdout.contains("ok  the attribution adds up"), "{stdout}");
    assert_nothing_left();
}

#[test]
fn responsiveness_report_renders_in_headless_chromium() {
    let (dir, _) = demo();
    let dom = check_renders(&dir.join("report.html"), &["parts"]);
    assert!(dom.contains("Responsiveness under working conditions, queue by queue"));
}

#[test]
fn a_too_short_test_exits_2_quoting_it() {
    let o = run(&["demo", "responsiveness", "--duration", "2s"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("'2s'"), "{}", text(&o.stderr));
}
