//! End-to-end tests of the analyzer's time budget and stories on captures made without
//! latencylab: `scripts/corpus/stories.py` builds them with network namespaces, veth pairs,
//! a small delay line, small traffic programs and tcpdump at the client, in the middle and at
//! the server, over IPv4 and IPv6 (cached between runs in the system's temporary directory).
//!
//! For every capture: the budget adds up to the connection's duration, the component that
//! dominates is the right one, each expected diagnosis is there with a cost within 10 % of
//! what the programs were told to do (or, where the truth depends on the kernel, of what
//! tshark reads from the same capture), and no other diagnosis appears. Needs root, ip,
//! ethtool, tcpdump and tshark (scripts/test installs them).

mod common;

use common::*;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

const CASES: [&str; 7] = [
    "healthy",
    "slow_server",
    "slow_client",
    "long_path",
    "dead_peer",
    "stopped_reader",
    "refused",
];
const POINTS: [&str; 3] = ["client", "middle", "server"];

/// Builds (or reuses) the corpus in Cargo's scratch directory for integration tests (under
/// `target/`, so `cargo clean` removes it); returns its directory.
fn corpus() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("stories-corpus");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/corpus/stories.py");
    let o = Command::new("python3")
        .arg(&script)
        .arg("build")
        .arg(&dir)
        .output()
        .expect("python3 runs");
    assert!(
        o.status.success(),
        "{} build failed:\n{}",
        script.display(),
        text(&o.stderr)
    );
    dir
}

fn analyze(pcap: &Path) -> Value {
    let o = Command::new(bin())
        .args(["analyze", "--json"])
        .arg(pcap)
        .output()
        .expect("latencylab analyze runs");
    assert!(o.status.success(), "analyze failed: {}", text(&o.stderr));
    serde_json::from_slice(&o.stdout).expect("analyze --json prints JSON")
}

/// `tshark -T fields` over a capture: one Vec of field values per packet.
fn tshark(pcap: &Path, filter: &str, fields: &[&str]) -> Vec<Vec<String>> {
    let mut args: Vec<String> = vec!["-r".into(), pcap.display().to_string()];
    if !filter.is_empty() {
        args.extend(["-Y".into(), filter.into()]);
    }
    args.extend(["-T".into(), "fields".into()]);
    for f in fields {
        args.extend(["-e".into(), (*f).into()]);
    }
    let o = Command::new("tshark")
        .args(&args)
        .output()
        .expect("tshark runs (apt-get install tshark)");
    assert!(o.status.success(), "tshark: {}", text(&o.stderr));
    text(&o.stdout)
        .lines()
        .map(|l| l.split('\t').map(str::to_string).collect())
        .collect()
}

/// How long the client advertised a zero window, as tshark reads the capture: from its first
/// zero window to its first non-zero window after that.
fn zero_window_ms(pcap: &Path, client_port: u64) -> f64 {
    let rows = tshark(
        pcap,
        &format!("tcp.srcport == {client_port} && !(tcp.flags.syn == 1)"),
        &["frame.time_relative", "tcp.window_size_value"],
    );
    let mut since = None;
    let mut total = 0.0;
    for r in rows {
        let t: f64 = r[0].parse().unwrap();
        let w: u64 = r[1].parse().unwrap();
        match (w, since) {
            (0, None) => since = Some(t),
            (w, Some(s)) if w > 0 => {
                total += t - s;
                since = None;
            }
            _ => {}
        }
    }
    total * 1e3
}

/// SYN to RST, as tshark reads the capture.
fn refusal_ms(pcap: &Path) -> f64 {
    let rows = tshark(pcap, "tcp.flags.reset == 1", &["frame.time_relative"]);
    rows[0][0].parse::<f64>().unwrap() * 1e3
}

fn within(x: f64, truth: f64, what: &str) {
    assert!(
        (x - truth).abs() <= 0.1 * truth.abs().max(1.0),
        "{what}: {x:.1} ms, truth {truth:.1} ms"
    );
}

#[test]
fn every_story_is_told_with_its_cost_from_the_client_the_middle_and_the_server() {
    let _g = lock();
    let dir = corpus();
    let mut checked = 0;
    for case in CASES {
        for fam in ["v4", "v6"] {
            let run = dir.join(format!("{case}-{fam}"));
            let truth = read_json(&run.join("truth.json"));
            for point in POINTS {
                let pcap = run.join(format!("{point}.pcap"));
                let what = format!("{case}-{fam} at the {point}");
                let a = analyze(&pcap);
                let conns = a["connections"].as_array().unwrap();
                assert_eq!(conns.len(), 1, "{what}: one connection");
                let c = &conns[0];
                let duration_ms = c["duration_s"].as_f64().unwrap() * 1e3;
                let budget = c["time_budget_ms"].as_object().unwrap();
                let sum: f64 = budget.values().map(|v| v.as_f64().unwrap()).sum();
                assert!(
                    (sum - duration_ms).abs() <= 1e-6 * duration_ms.max(1.0),
                    "{what}: budget {budget:?} adds up to {sum} ms, not {duration_ms} ms"
                );
                let (largest, _) = budget
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.as_f64().unwrap()))
                    .fold(("", -1.0), |m, x| if x.1 > m.1 { x } else { m });
                let diags: Vec<(&str, f64, &str)> = c["diagnoses"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|d| {
                        (
                            d["kind"].as_str().unwrap(),
                            d["cost_ms"].as_f64().unwrap(),
                            d["component"].as_str().unwrap(),
                        )
                    })
                    .collect();
                let kinds: Vec<&str> = diags.iter().map(|d| d.0).collect();
                let cost = |k: &str| diags.iter().find(|d| d.0 == k).unwrap().1;
                let rtt_ms = truth["rtt"].as_f64().unwrap();
                let client_port: u64 = c["a"]
                    .as_str()
                    .unwrap()
                    .rsplit(':')
                    .next()
                    .unwrap()
                    .parse()
                    .unwrap();
                // (expected diagnoses, dominant part, truth of the first diagnosis's cost)
                let (want, dominant, truth_ms): (&[&str], &str, f64) = match (case, point) {
                    ("healthy", _) => (&[], "network", 0.0),
                    ("slow_server", _) => (&["server_delay"], "server", 1000.0),
                    ("slow_client", _) => (&["client_delay"], "client", 1350.0),
                    // Handshake, request and the server's FIN: three round trips seen from
                    // the client, two and a half from the middle, two from the server.
                    ("long_path", "client") => (&["path_delay"], "network", 3.0 * rtt_ms),
                    ("long_path", "middle") => (&["path_delay"], "network", 2.5 * rtt_ms),
                    ("long_path", _) => (&["path_delay"], "network", 2.0 * rtt_ms),
                    // The server never sees the request: only its handshake.
                    ("dead_peer", "server") => (&[], "network", 0.0),
                    ("dead_peer", _) => (&["peer_unresponsive"], "stalled", 5000.0),
                    ("stopped_reader", _) => (
                        &["zero_window_stall"],
                        "stalled",
                        zero_window_ms(&pcap, client_port),
                    ),
                    ("refused", _) => (&["connection_refused"], "network", refusal_ms(&pcap)),
                    _ => unreachable!(),
                };
                assert_eq!(kinds, want, "{what}: {:#}", c["diagnoses"]);
                assert_eq!(largest, dominant, "{what}: {budget:?}");
                if let Some(k) = want.first() {
                    within(cost(k), truth_ms, &format!("{what}: {k}"));
                }
                if case == "stopped_reader" {
                    // The client's program paused its reads for 3 s; the window closed once
                    // its buffer was full, a little after the pause began.
                    assert!((1500.0..=3000.0).contains(&truth_ms), "{what}: {truth_ms}");
                    assert_eq!(diags[0].2, "receiver_application");
                }
                if case == "slow_server" {
                    let ex = c["exchanges"].as_array().unwrap();
                    assert_eq!(ex.len(), 1, "{what}");
                    assert_eq!(ex[0]["name"], "GET /story.html", "{what}");
                    within(
                        ex[0]["time_budget_ms"]["server"].as_f64().unwrap(),
                        1000.0,
                        &what,
                    );
                }
                checked += 1;
            }
        }
    }
    assert_eq!(checked, CASES.len() * 2 * POINTS.len());
}
