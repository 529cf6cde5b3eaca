//! End-to-end tests of `latencylab demo`: a shortened demo runs for real, in namespaces, and
//! its `results.json` must show the effects the demo exists to show, with margins (never exact
//! values: the machine is shared). The report is then opened in headless Chromium. Needs root,
//! /dev/net/tun and /usr/bin/chromium.
//!
//! Each demo runs once per test binary; the tests that read its output share that run.

mod common;

use common::*;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};

/// Every chart of the demo's report, each also a PNG.
const CHARTS: &[&str] = &[
    "tsg-fifo",
    "tsg-codel",
    "zoom-fifo",
    "zoom-codel",
    "delay-fifo",
    "delay-codel",
    "rtt-over-time",
    "throughput",
    "rtt-cdf",
];

fn scratch(name: &str) -> PathBuf {
    out_dir(&format!("demo-{name}"))
}

/// Runs `latencylab demo ARGS -o DIR` once per test binary; returns DIR and stdout.
fn run_demo(
    cell: &'static OnceLock<(PathBuf, String)>,
    lock: &Mutex<()>,
    name: &str,
    args: &[&str],
) -> &'static (PathBuf, String) {
    let _g = lock.lock().unwrap_or_else(|e| e.into_inner());
    cell.get_or_init(|| {
        let dir = scratch(name);
        let out = Command::new(bin())
            .arg("demo")
            .args(args)
            .arg("-o")
            .arg(&dir)
            .stdin(Stdio::null())
            .output()
            .expect("latencylab runs");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "demo {args:?} failed: {}\nstdout:\n{stdout}\nstderr:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        (dir, stdout)
    })
}

static BUFFERBLOAT: OnceLock<(PathBuf, String)> = OnceLock::new();
static BUFFERBLOAT_LOCK: Mutex<()> = Mutex::new(());

/// Where the bufferbloat run writes its `--live` lines (a file: naming it empties nothing).
fn bufferbloat_live() -> PathBuf {
    scratch_root().join("demo-bufferbloat-live.jsonl")
}

fn bufferbloat() -> &'static (PathBuf, String) {
    let live: &'static str = Box::leak(bufferbloat_live().to_str().unwrap().into());
    run_demo(
        &BUFFERBLOAT,
        &BUFFERBLOAT_LOCK,
        "bufferbloat",
        &[
            "bufferbloat",
            "--duration",
            "12s",
            "--quiet",
            "--live",
            live,
        ],
    )
}

#[test]
fn a_demos_live_file_follows_each_of_its_labs_by_name() {
    bufferbloat();
    let rows: Vec<labnet::live::Row> = std::fs::read_to_string(bufferbloat_live())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mean_delay = |lab: &str| {
        let d: Vec<f64> = rows
            .iter()
            .filter(|r| r.lab.ends_with(lab) && r.dir == "down" && r.t_s > 4.0)
            .filter_map(|r| r.queue_delay_ms)
            .collect();
        assert!(d.len() > 40, "{lab}: {} rows", d.len());
        d.iter().sum::<f64>() / d.len() as f64
    };
    // The FIFO's queue waits far longer than CoDel's, lab by lab in one file, in run order.
    let (fifo, codel) = (mean_delay("/fifo"), mean_delay("/codel"));
    assert!(fifo > 5.0 * codel, "fifo {fifo} ms, codel {codel} ms");
    let first_codel = rows.iter().position(|r| r.lab.ends_with("/codel")).unwrap();
    assert!(rows[..first_codel].iter().all(|r| r.lab.ends_with("/fifo")));
    assert_eq!(
        rows.iter().filter(|r| r.last).count(),
        4,
        "two directions, two labs"
    );
}

fn f(v: &serde_json::Value, run: &str, key: &str) -> f64 {
    v[run][key]
        .as_f64()
        .unwrap_or_else(|| panic!("results.json: {run}.{key} is not a number: {}", v[run]))
}

#[test]
fn bufferbloat_demo_shows_the_fifo_bloating_and_codel_with_ecn_keeping_delay_low() {
    let (dir, stdout) = bufferbloat();
    let r = read_json(&dir.join("results.json"));
    assert_eq!(r["base_rtt_ms"].as_f64(), Some(20.0));
    let keys = [
        "goodput_mbps",
        "rtt_p50_ms",
        "rtt_p95_ms",
        "rtt_p99_ms",
        "queue_delay_p95_ms",
        "drops",
        "ce_marks",
        "cwr",
        "longest_gap_ms",
        "ack_stall_ms",
        "stalls",
    ];
    for run in ["fifo", "codel"] {
        for k in keys {
            f(&r, run, k);
        }
        assert!(f(&r, run, "rtt_p50_ms") <= f(&r, run, "rtt_p95_ms"));
        assert!(f(&r, run, "rtt_p95_ms") <= f(&r, run, "rtt_p99_ms"));
    }
    let base = 20.0;
    // Run A: the FIFO bloats, overflows, and holds in-order delivery back on each loss.
    assert!(f(&r, "fifo", "rtt_p95_ms") >= 5.0 * base, "{r}");
    assert!(f(&r, "fifo", "drops") > 0.0, "{r}");
    assert!(
        f(&r, "fifo", "ack_stall_ms") >= 4.0 * f(&r, "codel", "ack_stall_ms"),
        "{r}"
    );
    // Run B: marks instead of drops, answered by CWR, delay near the base RTT.
    assert!(f(&r, "codel", "ce_marks") > 0.0, "{r}");
    assert!(f(&r, "codel", "cwr") > 0.0, "{r}");
    assert!(f(&r, "codel", "drops") <= 5.0, "{r}");
    assert!(f(&r, "codel", "rtt_p95_ms") < base + 30.0, "{r}");
    // Same goodput either way.
    for run in ["fifo", "codel"] {
        assert!(f(&r, run, "goodput_mbps") >= 9.0, "{run}: {r}");
    }
    assert_charts(dir, CHARTS);
    for run in ["fifo", "codel"] {
        assert!(dir.join(run).join("captures/server-eth0.pcap").exists());
        assert!(dir.join(run).join("summary.json").exists());
    }
    assert!(stdout.contains("longest ACK stall on the wire"), "{stdout}");
    assert!(stdout.contains("report.html"), "{stdout}");
}

#[test]
fn bufferbloat_report_renders_in_headless_chromium_with_every_figure() {
    let (dir, _) = bufferbloat();
    // Not beside the exported run file's lab: Chromium's CPU would move that lab's figures.
    let _g = BUFFERBLOAT_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let dom = check_renders(&dir.join("report.html"), CHARTS);
    assert!(dom.contains("What the analyzer found"));
    assert!(dom.contains("CoDel + ECN"));
}

#[test]
fn demo_quotes_a_bad_duration_back_and_exits_2() {
    let out = Command::new(bin())
        .args(["demo", "bufferbloat", "--duration", "soon", "-o"])
        .arg(scratch("bad"))
        .output()
        .expect("latencylab runs");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("'soon'"), "{err}");
}

/// p95 by nearest rank.
fn p95(mut v: Vec<f64>) -> f64 {
    assert!(!v.is_empty(), "no samples");
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[((v.len() as f64 * 0.95).ceil() as usize).clamp(1, v.len()) - 1]
}

/// Two runs of one lab agree within run-to-run noise: a quarter of the larger, or `slack`.
fn close(what: &str, demo: f64, rerun: f64, slack: f64) {
    let tol = (0.25 * demo.max(rerun)).max(slack);
    assert!(
        (demo - rerun).abs() <= tol,
        "{what}: the demo's run {demo:.1}, the exported run file's {rerun:.1} (allowed ±{tol:.1})"
    );
}

#[test]
fn an_exported_fifo_run_file_reproduces_the_demos_fifo_run_and_gets_the_standard_report() {
    let (dir, _) = bufferbloat();
    let want = read_json(&dir.join("results.json"));
    let _g = BUFFERBLOAT_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let export = scratch("bufferbloat-export");
    let e = export.to_str().unwrap();
    let o = run(&["demo", "bufferbloat", "--duration", "12s", "--export", e]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let readme = std::fs::read_to_string(export.join("README.md")).unwrap();
    assert!(
        readme.contains("`fifo.toml`") && readme.contains("`codel.toml`"),
        "{readme}"
    );
    let fifo = std::fs::read_to_string(export.join("fifo.toml")).unwrap();
    assert!(fifo.contains("queue = \"fifo limit 300\""), "{fifo}");
    assert!(
        fifo.contains("# Replace `run` with your own command"),
        "{fifo}"
    );

    let rerun = scratch("bufferbloat-rerun");
    let r = rerun.to_str().unwrap();
    let o = run(&[
        "run",
        export.join("fifo.toml").to_str().unwrap(),
        "--quiet",
        "-o",
        r,
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let rtts: Vec<f64> = json_lines(&rerun.join("programs/probe-client.out"))
        .iter()
        .filter(|l| l["type"] == "rtt" && l["proto"] == "udp")
        .map(|l| l["rtt_ms"].as_f64().unwrap())
        .collect();
    let summary = read_json(&rerun.join("summary.json"));
    let down = summary["links"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["name"] == "path" && l["direction"] == "down")
        .expect("the path's downlink");
    let drops: f64 = down["drops"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_f64().unwrap())
        .sum();
    close(
        "probe RTT p95, ms",
        f(&want, "fifo", "rtt_p95_ms"),
        p95(rtts),
        40.0,
    );
    close("downlink drops", f(&want, "fifo", "drops"), drops, 10.0);

    let o = run(&["report", r]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    for png in ["probe-rtt", "queue-delay", "tcp-rtt", "goodput"] {
        assert!(rerun.join(format!("{png}.png")).is_file(), "no {png}.png");
    }
    let page = std::fs::read_to_string(rerun.join("report.html")).unwrap();
    assert!(
        page.contains("Where the time went"),
        "no budget in the report"
    );
}
