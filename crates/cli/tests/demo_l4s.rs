//! End-to-end test of `latencylab demo l4s`: a shortened demo runs for real, in
//! namespaces, and its `results.json` must show the effects the demo exists to show, with
//! generous margins (never exact values: the machine is shared). The report
//! is then opened in headless Chromium. Needs root, /dev/net/tun and /usr/bin/chromium.
//!
//! The demo runs once per test binary; the tests that read its output share that run.

mod common;

use common::*;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// Every chart of the demo's report, each also a PNG.
const CHARTS: &[&str] = &[
    "rtt-cdf",
    "fps",
    "loss",
    "delay-classic",
    "delay-l4s",
    "delay-bleached",
    "share",
];

fn scratch(name: &str) -> PathBuf {
    out_dir(&format!("l4s-{name}"))
}

static DEMO: OnceLock<(PathBuf, String)> = OnceLock::new();

/// Runs `latencylab demo l4s --duration 15 -o DIR` once; returns DIR and stdout.
fn demo() -> &'static (PathBuf, String) {
    DEMO.get_or_init(|| {
        let dir = scratch("demo");
        let out = Command::new(bin())
            .args(["demo", "l4s", "--duration", "15s", "--quiet", "-o"])
            .arg(&dir)
            .stdin(Stdio::null())
            .output()
            .expect("latencylab runs");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "demo l4s failed: {}\nstdout:\n{stdout}\nstderr:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        (dir, stdout)
    })
}

fn f(v: &serde_json::Value, run: &str, key: &str) -> f64 {
    v[run][key]
        .as_f64()
        .unwrap_or_else(|| panic!("results.json: {run}.{key} is not a number: {}", v[run]))
}

#[test]
fn l4s_demo_keeps_the_call_out_of_the_downloads_queue_and_falls_back_when_ecn_is_bleached() {
    let (dir, stdout) = demo();
    let r = read_json(&dir.join("results.json"));
    let base = 20.0;
    assert_eq!(r["base_rtt_ms"].as_f64(), Some(base));
    for run in ["classic", "l4s", "bleached"] {
        for k in [
            "call_rtt_min_ms",
            "call_rtt_p50_ms",
            "call_rtt_p99_ms",
            "call_loss_pct",
            "loss_pct_max_per_s",
            "fps_ge25_pct",
            "fps_min",
            "stalls",
            "freezes",
            "freeze_s_total",
            "plis",
            "competing_share_pct",
        ] {
            f(&r, run, k);
        }
        assert!(f(&r, run, "call_rtt_p50_ms") <= f(&r, run, "call_rtt_p99_ms"));
        assert!(f(&r, run, "call_rtt_p50_ms") >= base - 1.0, "{run}: {r}");
        // Per second: a share of the packets, at most the 30 frames sent (a second's line can
        // take in a frame of the next when the loop runs late).
        assert!(
            (0.0..=100.0).contains(&f(&r, run, "loss_pct_max_per_s")),
            "{run}: {r}"
        );
        assert!((0.0..=32.0).contains(&f(&r, run, "fps_min")), "{run}: {r}");
    }

    // Run B: the call's packets wait almost nothing at the bottleneck, lose nothing, and the
    // video flows; the downloads keep their part of the line.
    assert!(f(&r, "l4s", "down_l_delay_p99_ms") < 5.0, "{r}");
    assert!(f(&r, "l4s", "call_rtt_p50_ms") < base + 5.0, "{r}");
    // The talk's bound on the call's worst case: its minimum RTT + 5 ms, on the round trips
    // through the network (timed in the captures). The minimum itself is the line's
    // propagation plus at most one full-size packet's serialisation each way (1.2 ms at
    // 10 Mbit/s): a minimum above that would be a queue no packet escaped, hiding in the
    // bound. The call's own p99 is not asserted: on a shared two-core machine its tail is
    // the call processes waiting for a CPU (docs/demos.md); the demo prints it with ok or NOT.
    let min = f(&r, "l4s", "path_rtt_min_ms");
    assert!(min >= base && min <= base + 2.4, "{r}");
    // The lab's own lateness (its engine waiting for a CPU on a busy machine) adds to the
    // round trips it falls on; it is measured, and allowed on top of the bound. Its worst
    // case, not its p99: one stall of the engine holds every packet in flight at once, a
    // handful of the call's round trips among the downloads' thousands of packets.
    let late = lab_lateness_ms(&dir.join("l4s"), "max");
    assert!(
        f(&r, "l4s", "path_rtt_p99_ms") < min + 5.0 + 2.0 * late,
        "lab lateness max {late} ms, engine {}\n{r}",
        read_json(&dir.join("l4s").join("summary.json"))["engine"]
    );
    assert!(f(&r, "l4s", "call_loss_pct") < 1.0, "{r}");
    // A second at 24 frames is a frame the call's processes sent or decoded late on a busy
    // machine (nothing was lost or frozen: asserted here), and a loaded machine can make a few
    // of a short run's 15 seconds so: most seconds at 25 frames or more, none under 15. A
    // call that lost or froze frames fails the asserts here and below.
    assert!(f(&r, "l4s", "fps_ge25_pct") >= 70.0, "{r}");
    assert!(f(&r, "l4s", "fps_min") >= 15.0, "{r}");
    assert_eq!(f(&r, "l4s", "stalls"), 0.0, "{r}");
    // Nothing lost, so nothing to freeze on and no keyframe to ask for.
    assert_eq!(f(&r, "l4s", "freezes"), 0.0, "{r}");
    assert_eq!(f(&r, "l4s", "freeze_s_total"), 0.0, "{r}");
    assert!(f(&r, "l4s", "competing_share_pct") >= 40.0, "{r}");
    assert!(f(&r, "l4s", "call_ce_pct") > 0.0, "{r}");

    // Run A: the call waits in the downloads' FIFO and loses packets or stalls.
    assert!(
        f(&r, "classic", "path_rtt_p99_ms") >= f(&r, "l4s", "path_rtt_p99_ms") + 10.0,
        "{r}"
    );
    assert!(
        f(&r, "classic", "call_rtt_p50_ms") >= f(&r, "l4s", "call_rtt_p50_ms") + 10.0,
        "{r}"
    );
    assert!(
        f(&r, "classic", "call_loss_pct") >= 1.0 || f(&r, "classic", "stalls") > 0.0,
        "{r}"
    );
    // Each loss breaks the chain of frames: the caller asks for keyframes and its picture
    // freezes, for a second or more in all over the shortened call.
    assert!(f(&r, "classic", "plis") > 0.0, "{r}");
    assert!(f(&r, "classic", "freezes") > 0.0, "{r}");
    assert!(f(&r, "classic", "freeze_s_total") >= 1.0, "{r}");
    assert!(f(&r, "classic", "fps_min") < f(&r, "l4s", "fps_min"), "{r}");
    // Its worst second is worse than the whole call, and worse than L4S's worst.
    assert!(
        f(&r, "classic", "loss_pct_max_per_s") >= f(&r, "classic", "call_loss_pct"),
        "{r}"
    );
    assert!(
        f(&r, "classic", "loss_pct_max_per_s") > f(&r, "l4s", "loss_pct_max_per_s"),
        "{r}"
    );

    // Run C: validation notices the bleaching within 3 s and the call carries on.
    let fallback = r["bleached"]["fallback_s"]
        .as_f64()
        .unwrap_or_else(|| panic!("no fallback in the bleached run: {r}"));
    assert!(fallback <= 3.0, "{r}");
    assert_eq!(r["bleached"]["kept_running"].as_bool(), Some(true), "{r}");
    assert!(f(&r, "bleached", "call_ce_pct") == 0.0, "{r}");

    assert_charts(dir, CHARTS);
    for run in ["classic", "l4s", "bleached"] {
        assert!(dir.join(run).join("summary.json").exists());
        assert!(dir.join(run).join("programs/call-remote.out").exists());
    }
    assert!(stdout.contains("call RTT p99"), "{stdout}");
    assert!(stdout.contains("in the worst second"), "{stdout}");
    assert!(
        stdout.contains("fewest frames shown in a second"),
        "{stdout}"
    );
    assert!(stdout.contains("freezes of the picture"), "{stdout}");
    assert!(stdout.contains("report.html"), "{stdout}");
}

#[test]
fn l4s_report_renders_in_headless_chromium_with_every_figure() {
    let (dir, _) = demo();
    let dom = check_renders(&dir.join("report.html"), CHARTS);
    assert!(dom.contains("B: L4S (DualPI2)"));
}
