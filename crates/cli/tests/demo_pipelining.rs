//! End-to-end test of `latencylab demo pipelining`: a shortened run (40 and 120 ms RTT
//! instead of 100 and 300, to keep it short) in real namespaces; its `results.json` must show
//! what the post it reproduces shows (pipelining at least halves the mean time to first byte, more so at
//! the larger RTT), every resource of the page must have arrived, and the lab must leave
//! nothing behind. Needs root and /dev/net/tun.

mod common;

use common::*;

#[test]
fn pipelining_halves_the_mean_ttfb_and_saves_more_at_the_larger_rtt() {
    let _g = lock();
    let dir = out_dir("demo-pipelining");
    let o = run(&[
        "demo",
        "pipelining",
        "--rtt",
        "40ms",
        "--rtt2",
        "120ms",
        "--quiet",
        "-o",
        dir.to_str().unwrap(),
    ]);
    let stdout = text(&o.stdout);
    assert!(o.status.success(), "{stdout}\n{}", text(&o.stderr));
    let r = read_json(&dir.join("results.json"));
    for run in [
        "no-pipelining",
        "pipelining",
        "no-pipelining-300ms",
        "pipelining-300ms",
    ] {
        assert_eq!(r[run]["resources"], 159, "{run}: {r:#}");
        assert_eq!(r[run]["connections"], 6, "{run}: {r:#}");
        assert!(r[run]["page_load_s"].as_f64().unwrap() > 0.0);
    }
    let t = |run: &str| r[run]["ttfb_ms_mean"].as_f64().unwrap();
    assert!(t("pipelining") <= 0.5 * t("no-pipelining"), "{r:#}");
    assert!(
        t("pipelining-300ms") <= 0.5 * t("no-pipelining-300ms"),
        "{r:#}"
    );
    assert!(
        t("no-pipelining-300ms") - t("pipelining-300ms") > t("no-pipelining") - t("pipelining"),
        "{r:#}"
    );
    // Without pipelining, each request waits for a whole round trip per resource ahead of it
    // on its connection: the mean is many RTTs, not one.
    assert!(t("no-pipelining") > 5.0 * 40.0, "{r:#}");
    assert_eq!(
        stdout.matches("\nok ").count() + stdout.starts_with("ok ") as usize,
        3,
        "{stdout}"
    );
    assert_charts(
        &dir,
        &[
            "waterfall-no-pipelining",
            "waterfall-pipelining-300ms",
            "ttfb-vs-rtt",
        ],
    );
    assert!(dir.join("report.html").exists());
    assert_nothing_left();
    let _ = std::fs::remove_dir_all(&dir);
}
