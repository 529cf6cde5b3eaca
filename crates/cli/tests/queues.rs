//! End-to-end tests of the queue disciplines in the lab (issue 3's "Done when"): 10 Mbit/s,
//! 20 ms RTT, two bulk TCP downloads and a sparse UDP probe for 25 s, through each discipline.
//! The probe's queueing delay is read from the bottleneck's link log: the time each of its
//! packets spent in the queue, as the queue itself measured it.
//!
//! Needs root and /dev/net/tun, like crates/cli/tests/lab.rs; the labs run one at a time.

mod common;

use common::*;

use std::fs;
use std::path::{Path, PathBuf};

use labnet::run_dir::{parse_link_log, RunDir};
use labnet::spec::Side;
use link::EventKind;

/// Two bulk downloads and a probe every 100 ms (`proto`: udp, or tcp request/response),
/// through `queue` both ways.
fn two_downloads_and_a_probe(name: &str, queue: &str, proto: &str, extra: &[&str]) -> PathBuf {
    let dir = out_dir(name);
    let traffic = format!(
        "latencylab bulk-client server --duration 25s -o /dev/null & \
         latencylab bulk-client server --duration 25s -o /dev/null & \
         latencylab probe-client server --proto {proto} --interval 100ms --duration 25s -o $LATENCYLAB_OUT/probe.jsonl; wait"
    );
    let mut args = vec![
        "shell",
        "--rate",
        "10mbit",
        "--rtt",
        "20ms",
        "--queue",
        queue,
        "-q",
        "-o",
        dir.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    args.extend_from_slice(&[
        "--server",
        "latencylab bulk-server -o /dev/null & latencylab probe-server -o /dev/null",
        "--",
        "sh",
        "-c",
        &traffic,
    ]);
    let o = run(&args);
    assert!(o.status.success(), "{queue}: {}", text(&o.stderr));
    dir
}

/// Queueing delays (ms) of the probe's packets (from port 5202) on the server→client
/// bottleneck.
fn probe_queue_delays_ms(dir: &Path) -> Vec<f64> {
    let path = RunDir::new(dir).link_log("path", Side::Down);
    let log = fs::read_to_string(&path).unwrap();
    parse_link_log(&path.display().to_string(), &log)
        .unwrap()
        .into_iter()
        .filter(|l| {
            l.event == EventKind::Dequeue
                && l.flow.as_deref().is_some_and(|f| f.contains("]:5202 > "))
        })
        .map(|l| l.sojourn_ns.expect("a dequeue has a sojourn") as f64 / 1e6)
        .collect()
}

fn down_link(dir: &Path) -> serde_json::Value {
    let s: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    s["links"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["direction"] == "down")
        .unwrap()
        .clone()
}

#[test]
fn a_deep_fifo_makes_the_probe_wait_behind_the_downloads() {
    let _g = lock();
    let dir = two_downloads_and_a_probe("fifo", "fifo limit 1000", "udp", &[]);
    let m = median(probe_queue_delays_ms(&dir));
    assert!(m > 100.0, "fifo: probe median queue delay {m:.1} ms");
    assert_nothing_left();
}

#[test]
fn fq_codel_keeps_the_sparse_probe_under_10_ms() {
    let _g = lock();
    let dir = two_downloads_and_a_probe("fq_codel", "fq_codel", "udp", &[]);
    let m = median(probe_queue_delays_ms(&dir));
    assert!(m < 10.0, "fq_codel: probe median queue delay {m:.1} ms");
    assert!(
        down_link(&dir)["drops"]["aqm_dequeue"]
            .as_u64()
            .unwrap_or(0)
            > 0,
        "fq_codel acts by dropping"
    );
    assert_nothing_left();
}

#[test]
fn codel_pie_and_dualpi2_keep_the_probe_under_25_ms_with_classic_tcp() {
    let _g = lock();
    for queue in ["codel", "pie", "dualpi2"] {
        let dir = two_downloads_and_a_probe(queue, queue, "udp", &[]);
        let m = median(probe_queue_delays_ms(&dir));
        assert!(m < 25.0, "{queue}: probe median queue delay {m:.1} ms");
        let down = down_link(&dir);
        let aqm: u64 = ["aqm_enqueue", "aqm_dequeue"]
            .iter()
            .filter_map(|k| down["drops"][k].as_u64())
            .sum();
        assert!(aqm > 0, "{queue} keeps the delay down by dropping: {down}");
        if queue == "dualpi2" {
            assert!(
                down["queues"]["c"]["packets"].as_u64().unwrap() > 1000,
                "classic TCP goes to the C queue: {down}"
            );
        }
    }
    assert_nothing_left();
}

#[test]
fn codel_with_ecn_marks_instead_of_dropping() {
    let _g = lock();
    // Every flow ECN-capable: the downloads and a TCP request/response probe, ECN on in both
    // hosts. (A Not-ECT flow, such as a plain UDP probe, is rightly dropped by CoDel, RFC 8289
    // §4.3; that is not what this checks.)
    let dir = two_downloads_and_a_probe("codel-ecn", "codel ecn", "tcp", &["--ecn", "on"]);
    let down = down_link(&dir);
    assert!(down["ce_marks"].as_u64().unwrap() > 0, "{down}");
    let aqm: u64 = ["aqm_enqueue", "aqm_dequeue"]
        .iter()
        .filter_map(|k| down["drops"][k].as_u64())
        .sum();
    assert_eq!(aqm, 0, "ECN-capable flows are marked, not dropped: {down}");
    let m = median(probe_queue_delays_ms(&dir));
    assert!(m < 25.0, "codel ecn: probe median queue delay {m:.1} ms");
    assert_nothing_left();
}

#[test]
fn a_bad_queue_spec_is_refused_before_the_lab_starts() {
    let _g = lock();
    for (spec, want) in [
        (
            "codel target fast",
            "--queue: codel: cannot read target 'fast'",
        ),
        ("fq_codel flows", "--queue: fq_codel: 'flows' needs a value"),
        (
            "dualpi2 coupling 2",
            "--queue: dualpi2: unknown keyword 'coupling'",
        ),
        ("pie tupdate", "--queue: pie: 'tupdate' needs a value"),
    ] {
        let o = run(&["shell", "--queue", spec, "--", "true"]);
        assert_eq!(o.status.code(), Some(2), "{spec}");
        assert!(
            text(&o.stderr).contains(want),
            "{spec}: {}",
            text(&o.stderr)
        );
        assert!(
            !text(&o.stderr).contains("lab up"),
            "refused before anything was built"
        );
    }
    assert_nothing_left();
}
