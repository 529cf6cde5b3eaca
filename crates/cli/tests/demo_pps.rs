//! End-to-end test of `latencylab demo pps`: a shortened demo runs for real, in namespaces,
//! and its `results.json` must show goodput following the bytes per packet through a hop that
//! limits packets per second, with generous margins. The report is then
//! opened in headless Chromium. Needs root, /dev/net/tun and /usr/bin/chromium.

mod common;

use common::*;

use std::path::PathBuf;
use std::sync::OnceLock;

static DEMO: OnceLock<(PathBuf, String)> = OnceLock::new();

/// Runs `latencylab demo pps --duration 6s --pps 1000 -o DIR` once; returns DIR and stdout.
fn demo() -> &'static (PathBuf, String) {
    DEMO.get_or_init(|| run_demo_in_tempdir("pps", &["pps", "--duration", "6s", "--pps", "1000"]))
}

fn f(v: &serde_json::Value, run: &str, key: &str) -> f64 {
    v[run][key]
        .as_f64()
        .unwrap_or_else(|| panic!("results.json: {run}.{key} is not a number: {}", v[run]))
}

#[test]
fn goodput_follows_the_packet_size_through_a_packet_rate_ceiling() {
    let (dir, stdout) = demo();
    let r = read_json(&dir.join("results.json"));
    assert_eq!(r["pps_limit"].as_f64(), Some(1000.0), "{r}");
    assert_eq!(f(&r, "mtu1500", "mtu"), 1500.0, "{r}");
    assert_eq!(f(&r, "mtu9000", "mtu"), 9000.0, "{r}");
    // Both runs fill the hop: about 1000 packets a second, never more. A busy machine that
    // stops the lab's engine leaves the hop idle meanwhile: the share of the 6 s transfer the
    // engine measured itself stalled is allowed off the floor.
    let busy = |run: &str| {
        let s = read_json(&dir.join(run).join("summary.json"));
        let stalled_s = s["engine"]["stalls_over_1ms_total_ms"].as_f64().unwrap() / 1e3;
        1.0 - (stalled_s / 6.0).min(1.0)
    };
    for run in ["mtu1500", "mtu9000"] {
        let pps = f(&r, run, "packets_per_s");
        let floor = 850.0 * busy(run);
        assert!(
            (floor..=1020.0).contains(&pps),
            "{run}: {pps} packets/s (floor {floor:.0}): {r}"
        );
    }
    // 1000 packets of 1428 payload bytes a second is 11.4 Mbit/s; of 8928, 71.4 Mbit/s.
    let small = f(&r, "mtu1500", "goodput_mbps");
    let big = f(&r, "mtu9000", "goodput_mbps");
    assert!(
        (8.0 * busy("mtu1500")..=11.6).contains(&small),
        "{small} Mbit/s at MTU 1500: {r}"
    );
    // Per packet that crossed the hop, so that a run the machine slowed (fewer packets a
    // second) does not move the ratio: the payload ratio, 8928 / 1428 = 6.25.
    let per_packet = |run: &str, goodput: f64| goodput / f(&r, run, "packets_per_s");
    let ratio = per_packet("mtu9000", big) / per_packet("mtu1500", small);
    assert!(
        (4.3..=6.5).contains(&ratio),
        "{big} / {small} Mbit/s per packet a second = {ratio}: {r}"
    );
    assert!(dir.join("goodput.png").exists());
    assert!(dir.join("packets.png").exists());
    assert!(
        stdout.contains("ok  goodput at MTU 9000 is near the payload ratio"),
        "{stdout}"
    );
    assert_nothing_left();
}

#[test]
fn pps_report_renders_in_headless_chromium() {
    let (dir, _) = demo();
    let dom = check_renders(&dir.join("report.html"), &["goodput", "packets"]);
    assert!(dom.contains("Packets per second, not bytes"));
}

#[test]
fn a_bad_packet_rate_exits_2_quoting_it() {
    let o = run(&["demo", "pps", "--pps", "5"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("'5'"), "{}", text(&o.stderr));
}
