//! End-to-end test of `latencylab demo conn-reuse`: a shortened run (100 ms RTT instead of
//! 250) in real namespaces. The page must load whole in both runs; `bound` must serve no
//! request on another connection and `pool` some, each saving less than one RTT; the report
//! and its pictures must be there, and the lab must leave nothing behind. Needs root and
//! /dev/net/tun.

mod common;

use common::*;

#[test]
fn pool_serves_would_be_new_connections_on_ones_that_free_up_and_bound_never_does() {
    let _g = lock();
    let dir = out_dir("demo-conn-reuse");
    let o = run(&[
        "demo",
        "conn-reuse",
        "--rtt",
        "100",
        "--quiet",
        "-o",
        dir.to_str().unwrap(),
    ]);
    let stdout = text(&o.stdout);
    assert!(o.status.success(), "{stdout}\n{}", text(&o.stderr));
    let r = read_json(&dir.join("results.json"));
    for run in ["bound", "pool"] {
        // The HTML and its 132 references.
        assert_eq!(r[run]["resources"], 133, "{run}: {r:#}");
        assert!(r[run]["page_load_s"].as_f64().unwrap() > 0.0, "{r:#}");
        let needed = r[run]["new_connections_needed"].as_u64().unwrap();
        // Five host names, at most 6 connections each.
        assert!((5..=30).contains(&needed), "{run}: {r:#}");
    }
    assert_eq!(r["bound"]["served_by_other_pct"], 0.0, "{r:#}");
    let pct = r["pool"]["served_by_other_pct"].as_f64().unwrap();
    assert!(pct > 0.0, "{r:#}");
    let saved = r["pool"]["saved_ms_mean"].as_f64().unwrap();
    assert!(saved > 0.0 && saved < 100.0, "{r:#}");
    for png in ["waterfall-bound", "waterfall-pool", "saved-ms"] {
        assert!(dir.join(format!("{png}.png")).exists(), "{png}.png");
    }
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("What the analyzer found"), "report.html");
    assert!(stdout.contains("served by another connection"), "{stdout}");
    assert_nothing_left();
    let _ = std::fs::remove_dir_all(&dir);
}
