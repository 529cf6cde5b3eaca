//! End-to-end test of `latencylab demo http-parallel` with its defaults (about 50 s): the
//! portal page over 36, 6 and 1 HTTP/1.1 connections and over HTTP/2, in real namespaces with
//! `img1`..`img5` naming the server, and in headless Chromium. `results.json` must show the
//! post's ordering with a wide margin (1-conn several times slower than 36-conns), the
//! connection counts each run is defined by, and Chromium's last response and load event.
//! Needs root, /dev/net/tun and /usr/bin/chromium.

mod common;

use common::*;

#[test]
fn one_connection_is_several_times_slower_than_36_and_chromium_loads_the_same_page() {
    let _g = lock();
    chromium();
    let dir = out_dir("demo-http-parallel");
    let o = run(&[
        "demo",
        "http-parallel",
        "--quiet",
        "-o",
        dir.to_str().unwrap(),
    ]);
    let stdout = text(&o.stdout);
    assert!(o.status.success(), "{stdout}\n{}", text(&o.stderr));
    let r = read_json(&dir.join("results.json"));
    let load = |run: &str| r[run]["page_load_s"].as_f64().unwrap();
    assert!(load("1-conn") >= 3.0 * load("36-conns"), "{r:#}");
    assert!(load("6-conns") < load("1-conn"), "{r:#}");
    for (run, conns) in [
        ("36-conns", 36),
        ("6-conns", 6),
        ("1-conn", 6),
        ("h2", 6),
        ("h2-coalesced", 1),
    ] {
        assert_eq!(r[run]["connections"], conns, "{run}: {r:#}");
        assert!(r[run]["queue_delay_p95_ms"].as_f64().is_some(), "{run}");
    }
    // One connection in all: each host's connection opens only after the previous one is
    // done with its last response.
    let recs = json_lines(&dir.join("1-conn/programs/page-load.out"));
    let conns: Vec<_> = recs.iter().filter(|v| v["type"] == "connection").collect();
    for w in conns.windows(2) {
        let prev = w[0]["conn"].as_u64().unwrap();
        let last = recs
            .iter()
            .filter(|v| v["type"] == "resource" && v["conn"] == prev)
            .map(|v| v["last_byte_ms"].as_f64().unwrap())
            .fold(0.0, f64::max);
        assert!(w[1]["start_ms"].as_f64().unwrap() >= last, "{w:#?}");
    }
    // Chromium's last response byte: the load event waits for every response, so it cannot
    // come before it.
    let cr = r["chromium_page_load_s"].as_f64().expect("Chromium ran");
    assert!(cr > 0.1 && cr < 60.0, "{r:#}");
    let load_event = r["chromium_load_event_s"]
        .as_f64()
        .expect("Chromium's load event");
    assert!(cr <= load_event, "{r:#}");
    assert_charts(
        &dir,
        &[
            "page-load",
            "queue-delay",
            "waterfall-36-conns",
            "waterfall-h2-coalesced",
        ],
    );
    assert_nothing_left();
    let _ = std::fs::remove_dir_all(&dir);
}
