//! End-to-end tests of the queue disciplines in the lab: 10 Mbit/s, 20 ms RTT, two bulk TCP
//! downloads and a sparse probe for 25 s, through each discipline. The probe's queueing delay
//! is read from the bottleneck's link log: the time each of its packets spent in the queue, as
//! the queue itself measured it.
//!
//! The six disciplines run side by side in one lab of 25 s, each on a bottleneck of its own
//! between a client and a server of its own, joined by a router: the same traffic through the
//! same queue for the same time as six labs one after another, in a sixth of the wall time.
//! The pairs share nothing but the forwarding engine (60 Mbit/s in all, far below what it
//! carries), and each queue measures its own sojourn times, so a program scheduled late on the
//! shared CPUs changes when a packet arrives, not how long the queue held it.
//!
//! Needs root and /dev/net/tun, like crates/cli/tests/lab.rs; the labs run one at a time.

mod common;

use common::*;

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use labnet::run_dir::{parse_link_log, RunDir};
use labnet::spec::Side;
use link::EventKind;

/// Each pair: its name (its hosts are `c-NAME` and `s-NAME`, its bottleneck link `NAME`), the
/// queue on that link both ways, the probe's protocol, and whether both hosts request ECN.
const PAIRS: &[(&str, &str, &str, bool)] = &[
    ("fifo", "fifo limit 1000", "udp", false),
    ("fqcodel", "fq_codel", "udp", false),
    ("codel", "codel", "udp", false),
    ("pie", "pie", "udp", false),
    ("dualpi2", "dualpi2", "udp", false),
    // Every flow ECN-capable: the downloads and a TCP request/response probe. (A Not-ECT
    // flow, such as a plain UDP probe, is rightly dropped by CoDel, RFC 8289 §4.3; that is not
    // what this pair checks.)
    ("codelecn", "codel ecn", "tcp", true),
];

/// The run file: a router, and per pair a client on an unlimited link to it and a server
/// behind the pair's 10 Mbit/s, 20 ms bottleneck; two downloads and a probe every 100 ms for
/// 25 s from each client.
fn run_file() -> String {
    let mut f = String::from("seed = 1\n\n[[router]]\nname = \"r\"\n");
    for (name, queue, proto, ecn) in PAIRS {
        let ecn = if *ecn { "ecn = \"on\"\n" } else { "" };
        f += &format!(
            "\n[[host]]\nname = \"c-{name}\"\n{ecn}\
             [[host]]\nname = \"s-{name}\"\n{ecn}\
             [[link]]\nname = \"a-{name}\"\na = \"c-{name}\"\nb = \"r\"\n\
             [[link]]\nname = \"{name}\"\na = \"r\"\nb = \"s-{name}\"\nrate = \"10mbit\"\n\
             rtt = \"20ms\"\nqueue = \"{queue}\"\n\
             [[program]]\nname = \"s-{name}\"\nhost = \"s-{name}\"\n\
             run = \"latencylab bulk-server -o /dev/null & latencylab probe-server -o /dev/null\"\n\
             [[program]]\nname = \"c-{name}\"\nhost = \"c-{name}\"\nat = \"500ms\"\nwait = true\n\
             run = \"latencylab bulk-client s-{name} --duration 25s -o /dev/null & \
             latencylab bulk-client s-{name} --duration 25s -o /dev/null & \
             latencylab probe-client s-{name} --proto {proto} --interval 100ms --duration 25s \
             -o /dev/null; wait\"\n"
        );
    }
    f
}

static LAB: OnceLock<PathBuf> = OnceLock::new();

/// Runs the six pairs' lab once per test binary; returns its run directory.
fn lab() -> &'static Path {
    LAB.get_or_init(|| {
        let _g = lock();
        let dir = out_dir("queues");
        fs::create_dir_all(&dir).unwrap();
        let file = dir.join("queues.toml");
        fs::write(&file, run_file()).unwrap();
        let out = dir.join("run");
        let o = run(&[
            "run",
            file.to_str().unwrap(),
            "-q",
            "-o",
            out.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        assert_nothing_left();
        out
    })
}

/// Queueing delays (ms) of the probe's packets (from port 5202) on pair `name`'s
/// server→client bottleneck.
fn probe_queue_delays_ms(dir: &Path, name: &str) -> Vec<f64> {
    let path = RunDir::new(dir).link_log(name, Side::Down);
    let log = fs::read_to_string(&path).unwrap();
    let delays: Vec<f64> = parse_link_log(&path.display().to_string(), &log)
        .unwrap()
        .into_iter()
        .filter(|l| {
            l.event == EventKind::Dequeue
                && l.flow.as_deref().is_some_and(|f| f.contains("]:5202 > "))
        })
        .map(|l| l.sojourn_ns.expect("a dequeue has a sojourn") as f64 / 1e6)
        .collect();
    // A probe every 100 ms for 25 s: most of its 250 packets must be there to judge by.
    assert!(
        delays.len() > 200,
        "{name}: only {} probe packets",
        delays.len()
    );
    delays
}

/// Pair `name`'s bottleneck, server→client, from summary.json.
fn down_link(dir: &Path, name: &str) -> serde_json::Value {
    let s: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    s["links"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["name"] == name && l["direction"] == "down")
        .unwrap_or_else(|| panic!("no link {name} down in {s}"))
        .clone()
}

#[test]
fn a_deep_fifo_makes_the_probe_wait_behind_the_downloads() {
    let m = median(probe_queue_delays_ms(lab(), "fifo"));
    assert!(m > 100.0, "fifo: probe median queue delay {m:.1} ms");
}

#[test]
fn fq_codel_keeps_the_sparse_probe_under_10_ms() {
    let dir = lab();
    let m = median(probe_queue_delays_ms(dir, "fqcodel"));
    assert!(m < 10.0, "fq_codel: probe median queue delay {m:.1} ms");
    assert!(
        down_link(dir, "fqcodel")["drops"]["aqm_dequeue"]
            .as_u64()
            .unwrap_or(0)
            > 0,
        "fq_codel acts by dropping"
    );
}

#[test]
fn codel_pie_and_dualpi2_keep_the_probe_under_25_ms_with_classic_tcp() {
    let dir = lab();
    for queue in ["codel", "pie", "dualpi2"] {
        let m = median(probe_queue_delays_ms(dir, queue));
        assert!(m < 25.0, "{queue}: probe median queue delay {m:.1} ms");
        let down = down_link(dir, queue);
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
}

#[test]
fn codel_with_ecn_marks_instead_of_dropping() {
    let dir = lab();
    let down = down_link(dir, "codelecn");
    assert!(down["ce_marks"].as_u64().unwrap() > 0, "{down}");
    let aqm: u64 = ["aqm_enqueue", "aqm_dequeue"]
        .iter()
        .filter_map(|k| down["drops"][k].as_u64())
        .sum();
    assert_eq!(aqm, 0, "ECN-capable flows are marked, not dropped: {down}");
    let m = median(probe_queue_delays_ms(dir, "codelecn"));
    assert!(m < 25.0, "codel ecn: probe median queue delay {m:.1} ms");
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
