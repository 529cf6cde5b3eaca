//! End-to-end test of `latencylab demo cwnd-reuse`: a shortened run (100 ms RTT, two clicks
//! after 2 s of idleness each) in real namespaces. With the server keeping its window after
//! idle, `largest-burst` must put each click on the 2 MB photo's connection, which sends the
//! whole 25 kB in its first flight, while `oldest` picks a thumbnail's connection, which sends
//! at most its initial window of 10 segments; the control runs must have the server at
//! `tcp_slow_start_after_idle=1`; the report and its pictures must be there, and the lab must
//! leave nothing behind. The same captures test the analyzer's `slow_start_after_idle`
//! diagnosis on real traffic: the client's capture of the clicks over the 2 MB photo's
//! connection must be named when the server's window restarted after idle, and not when it
//! was kept, nor when the clicks took a thumbnail's connection, whose window never grew.
//! Needs root and /dev/net/tun.

mod common;

use common::*;

/// Linux's initial window: 10 segments of 1448 bytes (MTU 1500 with timestamps).
const INITIAL_WINDOW_BYTES: u64 = 10 * 1448;

fn u64s(v: &serde_json::Value) -> Vec<u64> {
    v.as_array()
        .unwrap_or_else(|| panic!("{v}"))
        .iter()
        .map(|x| x.as_u64().unwrap())
        .collect()
}

/// How many `slow_start_after_idle` diagnoses `latencylab analyze` gives for one run's client
/// capture (one per connection, however many clicks it carried).
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
fn a_click_on_the_largest_bursts_connection_inherits_its_window_and_the_oldest_does_not() {
    let _g = lock();
    let dir = out_dir("demo-cwnd-reuse");
    let o = run(&[
        "demo",
        "cwnd-reuse",
        "--rtt",
        "100ms",
        "--idle",
        "2s",
        "--clicks",
        "2",
        "--quiet",
        "-o",
        dir.to_str().unwrap(),
    ]);
    let stdout = text(&o.stdout);
    assert!(o.status.success(), "{stdout}\n{}", text(&o.stderr));
    let r = read_json(&dir.join("results.json"));
    for (run, ssai) in [
        ("oldest", 0),
        ("largest_burst", 0),
        ("oldest_ssai", 1),
        ("largest_burst_ssai", 1),
    ] {
        assert_eq!(r[run]["server_ssai"], ssai, "{run}: {r:#}");
        assert_eq!(r[run]["fetch_ms"].as_array().unwrap().len(), 2, "{r:#}");
        assert!(r[run]["fetch_ms_p50"].as_f64().unwrap() > 0.0, "{r:#}");
    }
    // The client's view: which connection each click took.
    assert!(
        u64s(&r["largest_burst"]["picked_burst_bytes"])
            .iter()
            .all(|&b| b == 2_000_000),
        "{r:#}"
    );
    assert!(
        u64s(&r["oldest"]["picked_burst_bytes"])
            .iter()
            .all(|&b| b < 100_000),
        "{r:#}"
    );
    // The server's: the window the click found.
    let flights = |run: &str| u64s(&r[run]["first_flight_bytes"]);
    assert!(
        flights("largest_burst").iter().all(|&b| b >= 25_000),
        "{r:#}"
    );
    assert!(
        flights("oldest").iter().all(|&b| b <= INITIAL_WINDOW_BYTES),
        "{r:#}"
    );
    assert!(
        flights("oldest_ssai")
            .iter()
            .all(|&b| b <= INITIAL_WINDOW_BYTES),
        "{r:#}"
    );
    let p50 = |run: &str| r[run]["fetch_ms_p50"].as_f64().unwrap();
    assert!(p50("largest_burst") < p50("oldest"), "{r:#}");
    assert_charts(
        &dir,
        &[
            "connections-oldest",
            "connections-largest-burst",
            "flights",
            "fetch-ms",
        ],
    );
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("What the analyzer found"), "report.html");
    assert!(html.contains("tcp_slow_start_after_idle=0"), "report.html");
    assert!(stdout.contains("fetch p50 (ms)"), "{stdout}");
    // The analyzer: a window restarted after idle is named, a kept one is not.
    assert_eq!(named(&dir, "largest-burst-ssai1"), 1);
    for run_dir in ["largest-burst", "oldest", "oldest-ssai1"] {
        assert_eq!(named(&dir, run_dir), 0, "{run_dir}");
    }
    assert_nothing_left();
    let _ = std::fs::remove_dir_all(&dir);
}
