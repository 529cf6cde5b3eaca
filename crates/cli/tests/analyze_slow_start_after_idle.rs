//! End-to-end test of the analyzer's `slow_start_after_idle` diagnosis on real captures: a
//! shortened `demo cwnd-reuse` (100 ms RTT, one click after 2 s idle) makes a server whose
//! connection moved 2 MB and then sat idle, once keeping its window after idle
//! (`tcp_slow_start_after_idle=0`) and once not (Linux's default, 1). The client's capture of
//! the click over that connection must be named when the window restarted, and not when it
//! was kept; nor when the click took a thumbnail's connection, whose window never grew. Needs
//! root and /dev/net/tun.

mod common;

use common::*;

/// How many `slow_start_after_idle` diagnoses `latencylab analyze` gives for one run's client
/// capture.
fn named(dir: &std::path::Path, run_dir: &str) -> usize {
    let pcap = dir.join(run_dir).join("captures").join("client-eth0.pcap");
    let o = run(&["analyze", "--json", pcap.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let a: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    a["connections"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["diagnoses"].as_array().unwrap().iter())
        .filter(|d| d["kind"] == "slow_start_after_idle")
        .count()
}

#[test]
fn a_window_restarted_after_idle_is_named_and_a_kept_one_is_not() {
    let _g = lock();
    let dir = out_dir("analyze-ssai");
    let o = run(&[
        "demo",
        "cwnd-reuse",
        "--rtt",
        "100",
        "--idle",
        "2",
        "--clicks",
        "1",
        "--quiet",
        "-o",
        dir.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(named(&dir, "largest-burst-ssai1"), 1);
    for run_dir in ["largest-burst", "oldest", "oldest-ssai1"] {
        assert_eq!(named(&dir, run_dir), 0, "{run_dir}");
    }
    assert_nothing_left();
    let _ = std::fs::remove_dir_all(&dir);
}
