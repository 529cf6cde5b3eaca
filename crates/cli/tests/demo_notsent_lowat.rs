//! End-to-end test of `latencylab demo notsent-lowat`: a shortened demo runs for real, in
//! namespaces, and its `results.json` must show what the demo exists to show, with generous
//! margins (never exact values: the machine is shared). The report is then
//! opened in headless Chromium. Needs root, /dev/net/tun and /usr/bin/chromium.

mod common;

use common::*;

use std::path::PathBuf;
use std::sync::OnceLock;

/// Every chart of the demo's report, each also a PNG.
const CHARTS: &[&str] = &["click-to-frame", "unsent-bytes", "click-to-frame-cdf"];

static DEMO: OnceLock<(PathBuf, String)> = OnceLock::new();

/// Runs `latencylab demo notsent-lowat --duration 15s -o DIR` once; returns DIR and stdout.
fn demo() -> &'static (PathBuf, String) {
    DEMO.get_or_init(|| {
        run_demo_in_tempdir("notsent-lowat", &["notsent-lowat", "--duration", "15s"])
    })
}

fn f(v: &serde_json::Value, run: &str, key: &str) -> f64 {
    v[run][key]
        .as_f64()
        .unwrap_or_else(|| panic!("results.json: {run}.{key} is not a number: {}", v[run]))
}

#[test]
fn frames_stale_in_the_send_buffer_delay_clicks_by_seconds_and_lowat_removes_most_of_it() {
    let (dir, stdout) = demo();
    let r = read_json(&dir.join("results.json"));
    assert_eq!(r["base_rtt_ms"].as_f64(), Some(40.0));
    for run in ["unbounded", "lowat"] {
        assert!(
            f(&r, run, "click_to_frame_ms_p50") <= f(&r, run, "click_to_frame_ms_p95"),
            "{r}"
        );
        // Nothing is faster than the way there and the frame's own serialisation.
        assert!(f(&r, run, "click_to_frame_ms_p50") >= 20.0, "{r}");
        assert!(f(&r, run, "clicks") >= 5.0, "{r}");
    }
    // Unbounded: a click waits behind a second and more of queued frames; with the low-water
    // mark, at most a quarter of that.
    assert!(f(&r, "unbounded", "click_to_frame_ms_p50") > 1000.0, "{r}");
    assert!(
        f(&r, "lowat", "click_to_frame_ms_p50")
            <= f(&r, "unbounded", "click_to_frame_ms_p50") / 4.0,
        "{r}"
    );
    // Where the delay is: the unsent bytes in the sender, not the network (the ping beside
    // the screen sharing stays far below the click delay in both runs).
    assert!(f(&r, "unbounded", "unsent_bytes_p50") > 50_000.0, "{r}");
    assert!(
        f(&r, "lowat", "unsent_bytes_p50") <= 16_384.0 + 4_096.0,
        "{r}"
    );
    assert!(
        f(&r, "unbounded", "ping_rtt_ms_p50") * 4.0 < f(&r, "unbounded", "click_to_frame_ms_p50"),
        "{r}"
    );
    // The analyzer, which sees only the wire, does not blame the network for the delay that
    // sits in the sender: no bufferbloat in either run's capture.
    for run in ["unbounded", "lowat"] {
        let pcap = dir.join(run).join("captures/server-eth0.pcap");
        let out = common::run(&["analyze", "--json", &pcap.display().to_string()]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("analyze --json");
        for c in v["connections"].as_array().expect("connections") {
            for d in c["diagnoses"].as_array().expect("diagnoses") {
                assert_ne!(d["kind"], "bufferbloat", "{run}: {d}");
            }
        }
    }
    assert_charts(dir, CHARTS);
    for run in ["unbounded", "lowat"] {
        assert!(dir.join(run).join("captures/server-eth0.pcap").exists());
        assert!(dir.join(run).join("programs/screen-server.out").exists());
    }
    assert!(stdout.contains("ok  unbounded"), "{stdout}");
    assert!(stdout.contains("report.html"), "{stdout}");
    assert_nothing_left();
}

#[test]
fn notsent_lowat_report_renders_in_headless_chromium_with_every_figure() {
    let (dir, _) = demo();
    let dom = check_renders(&dir.join("report.html"), CHARTS);
    assert!(dom.contains("TCP_NOTSENT_LOWAT"));
}
