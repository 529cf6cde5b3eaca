//! End-to-end test of `latencylab demo hol-blocking`, shortened to one run (seed) per setting
//! (about a minute): the page over HTTP/1.1, HTTP/2 and HTTP/3 (both scheduling orders) at
//! every loss setting in real namespaces, and in headless Chromium over HTTP/1.1, HTTP/2 and
//! QUIC. `results.json` must hold every run, each HTTP/3 run with the scheduling its server
//! stated, the loss model must have dropped packets where asked, the analyzer must have found
//! each QUIC handshake in the client's capture, just before the client's own timing, and
//! Chromium must have used QUIC, and several connections over HTTP/1.1.
//! Needs root, /dev/net/tun and /usr/bin/chromium.

mod common;

use common::*;

#[test]
fn every_protocol_loads_at_every_loss_and_the_analyzer_sees_each_quic_handshake() {
    let _g = lock();
    chromium();
    let dir = out_dir("demo-hol-blocking");
    let o = run(&[
        "demo",
        "hol-blocking",
        "--quiet",
        "--runs",
        "1",
        "-o",
        dir.to_str().unwrap(),
    ]);
    let stdout = text(&o.stdout);
    assert!(o.status.success(), "{stdout}\n{}", text(&o.stderr));
    let r = read_json(&dir.join("results.json"));
    let cells = r["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 4 * 5, "{r:#}");
    for c in cells {
        let runs = c["runs"].as_array().unwrap();
        assert_eq!(runs.len(), 1, "{c:#}");
        let m = &runs[0];
        let p = c["protocol"].as_str().unwrap();
        let lost = m["lost_down"].as_u64().unwrap() + m["lost_up"].as_u64().unwrap();
        assert_eq!(lost == 0, c["loss"] == "0%", "{c:#}");
        let conns = m["connections"].as_u64().unwrap();
        assert_eq!(conns, if p == "h1" { 6 } else { 1 }, "{c:#}");
        if p.starts_with("h3") {
            let want = if p == "h3-seq" {
                "sequential"
            } else {
                "round-robin"
            };
            assert_eq!(m["scheduling"], want, "{c:#}");
            let client = m["handshake_ms_client"].as_array().unwrap();
            let capture = m["handshake_ms_capture"].as_array().unwrap();
            assert_eq!(client.len(), 1, "{c:#}");
            assert_eq!(capture.len(), 1, "{c:#}");
            // The analyzer's handshake (the client's first Initial to its first 1-RTT packet)
            // is what tshark reads of the same capture, to the microsecond.
            let loss = c["loss"].as_str().unwrap().trim_end_matches('%');
            let pcap = dir
                .join(format!("{p}-loss{loss}-s0"))
                .join("captures/client-eth0.pcap");
            let theirs = tshark_quic_handshake_ms(&pcap);
            let ours = capture[0].as_f64().unwrap();
            assert!((ours - theirs).abs() < 0.01, "tshark {theirs} ms: {c:#}");
            // The client's own clock ends when its task learns of the handshake; its packets
            // leave when the task runs again (once 7 ms later on a quiet machine, in a run
            // with bursty loss, and more on a loaded machine). The demo's check holds the two
            // to 1 ms; this test only to the same handshake: any other is a round trip (the
            // demo's 40 ms) or more away.
            let d = client[0].as_f64().unwrap() - ours;
            assert!(d.abs() < 30.0, "{c:#}");
        }
    }
    assert_eq!(r["chromium_used_quic"], true, "{r:#}");
    let cr = r["chromium_quic_page_load_s"]
        .as_f64()
        .expect("Chromium ran");
    assert!(cr > 0.05 && cr < 30.0, "{r:#}");
    // Chromium over HTTP/1.1 and HTTP/2 (QUIC off): a page load each, HTTP/1.1 on several
    // TCP connections at once, HTTP/2 multiplexed (Chromium may open a second pool's).
    for k in ["chromium_h1_page_load_s", "chromium_h2_page_load_s"] {
        let s = r[k].as_f64().unwrap_or_else(|| panic!("{k}: {r:#}"));
        assert!(s > 0.05 && s < 30.0, "{r:#}");
    }
    assert!(r["chromium_h1_connections"].as_u64().unwrap() >= 4, "{r:#}");
    assert!(r["chromium_h2_connections"].as_u64().unwrap() <= 2, "{r:#}");
    assert!(
        stdout.contains("headless Chromium over HTTP/1.1"),
        "{stdout}"
    );
    assert!(stdout.contains("HTTP/3 round-robin"), "{stdout}");
    assert_charts(&dir, &["page-load", "waterfall-h2", "waterfall-h3-seq"]);
    assert!(!dir.join("tls").exists(), "the run's keys are removed");
    assert_nothing_left();
    let _ = std::fs::remove_dir_all(&dir);
}

/// The client's first Initial (to UDP port 443) to its first short-header packet, ms, as
/// tshark reads the capture.
fn tshark_quic_handshake_ms(pcap: &std::path::Path) -> f64 {
    let o = std::process::Command::new("tshark")
        .args(["-r", pcap.to_str().unwrap(), "-Y", "udp.dstport == 443"])
        .args([
            "-T",
            "fields",
            "-e",
            "frame.time_relative",
            "-e",
            "quic.header_form",
        ])
        .output()
        .expect("tshark runs (apt-get install tshark)");
    assert!(o.status.success(), "tshark: {}", text(&o.stderr));
    let rows: Vec<(f64, String)> = text(&o.stdout)
        .lines()
        .map(|l| {
            let (t, form) = l.split_once('\t').unwrap();
            (t.parse().unwrap(), form.to_string())
        })
        .collect();
    let first = rows.first().expect("a packet to port 443").0;
    // A datagram of coalesced packets lists each one's header form: a short header is last.
    let short = rows
        .iter()
        .find(|(_, form)| form.split(',').any(|f| f == "0"))
        .expect("a short-header packet from the client")
        .0;
    (short - first) * 1e3
}
