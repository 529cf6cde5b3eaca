//! End-to-end test of `latencylab demo conn-reuse`: a shortened run (100 ms RTT instead of
//! 250) in real namespaces. The page must load whole in all four runs, its four waves of
//! references over 35 host names (6 when consolidated) resolved by the lab's `/etc/hosts`;
//! `bound` must serve no request on another connection; `pool` only requests whose name had
//! a connection busy or opening; the report and its pictures must be there, and the lab must
//! leave nothing behind. Needs root and /dev/net/tun.

mod common;

use common::*;

#[test]
fn both_designs_load_the_whole_news_page_and_bound_never_serves_a_request_elsewhere() {
    let _g = lock();
    let dir = out_dir("demo-conn-reuse");
    let o = run(&[
        "demo",
        "conn-reuse",
        "--rtt",
        "100ms",
        "--quiet",
        "-o",
        dir.to_str().unwrap(),
    ]);
    let stdout = text(&o.stdout);
    assert!(o.status.success(), "{stdout}\n{}", text(&o.stderr));
    let r = read_json(&dir.join("results.json"));
    for (run, names, conns) in [
        ("bound", 35, 100..=210),
        ("pool", 35, 100..=210),
        ("bound_consolidated", 6, 12..=36),
        ("pool_consolidated", 6, 12..=36),
    ] {
        // The HTML and its 266 references, the last ones found three loads deep.
        assert_eq!(r[run]["resources"], 267, "{run}: {r:#}");
        assert_eq!(r[run]["host_names"], names, "{run}: {r:#}");
        assert!(r[run]["page_load_s"].as_f64().unwrap() > 0.0, "{r:#}");
        let needed = r[run]["new_connections_needed"].as_u64().unwrap();
        // At most 6 connections per name, and most names busy enough for 6.
        assert!(conns.contains(&needed), "{run}: {r:#}");
        let busy = r[run]["opened_while_name_busy"].as_u64().unwrap();
        assert!(busy < needed, "{run}: {r:#}");
    }
    for run in ["bound", "bound_consolidated"] {
        assert_eq!(r[run]["served_by_other_pct"], 0.0, "{run}: {r:#}");
    }
    // Whatever share pool serves by another connection, each such request left before its
    // own connection was ready.
    for run in ["pool", "pool_consolidated"] {
        let pct = r[run]["served_by_other_pct"].as_f64().unwrap();
        let saved = r[run]["saved_ms_mean"].as_f64().unwrap();
        assert!((0.0..=100.0).contains(&pct), "{run}: {r:#}");
        assert!(saved >= 0.0 && (pct > 0.0 || saved == 0.0), "{run}: {r:#}");
    }
    // Chromium loads both pages too; its log says which of its new connections' requests a
    // socket that freed up first served.
    if std::path::Path::new("/usr/bin/chromium").exists() {
        for run in ["chromium", "chromium_consolidated"] {
            let c = &r[run];
            let needed = c["new_connections_needed"].as_u64().unwrap_or(0);
            let freed = c["served_by_freed"].as_u64().unwrap_or(u64::MAX);
            assert!(needed > 0 && freed <= needed, "{run}: {r:#}");
            assert!(
                c["page_load_s"].as_f64().is_some_and(|s| s > 0.0),
                "{run}: {r:#}"
            );
        }
        assert!(dir.join("chromium").join("netlog.json").exists());
    }
    assert_charts(
        &dir,
        &[
            "waterfall-bound",
            "waterfall-pool",
            "waterfall-bound-consolidated",
            "waterfall-pool-consolidated",
            "saved-ms",
        ],
    );
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("What the analyzer found"), "report.html");
    assert!(stdout.contains("served by another connection"), "{stdout}");
    assert_nothing_left();
    let _ = std::fs::remove_dir_all(&dir);
}
