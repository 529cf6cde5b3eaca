//! End-to-end test of `latencylab analyze`'s handshake times over all connections: a lab whose
//! path delay varies packet by packet (so that handshakes differ), many short connections, and
//! the client's and the server's captures analysed; every sample, the percentiles and the
//! share under 100 ms are checked against the SYN, SYN-ACK and ACK times tshark reads from the
//! same files. tshark must be installed (CI installs it).

mod common;

use common::*;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::Value;

const CONNECTIONS: usize = 24;

/// `latencylab analyze --json` on one capture.
fn analyze(pcap: &Path) -> Value {
    let o = run(&["analyze", "--json", pcap.to_str().unwrap()]);
    assert!(o.status.success(), "analyze failed: {}", text(&o.stderr));
    serde_json::from_slice(&o.stdout).expect("analyze --json prints JSON")
}

/// Which part of the handshake to read from tshark's view of a capture.
#[derive(Copy, Clone)]
enum Part {
    SynToSynack,
    SynackToAck,
}

/// Per TCP stream, the handshake part in milliseconds, from tshark's own dissection: the
/// first SYN, the first SYN-ACK, and the first packet from the SYN's sender acknowledging the
/// SYN-ACK (relative ACK number 1, no SYN), by `frame.time_relative`.
fn tshark_handshakes(pcap: &Path, part: Part) -> Vec<f64> {
    let o = Command::new("tshark")
        .args(["-n", "-r"])
        .arg(pcap)
        .args(["-Y", "tcp", "-T", "fields", "-E", "separator=,"])
        .args(["-e", "tcp.stream", "-e", "frame.time_relative"])
        .args([
            "-e",
            "tcp.flags.syn",
            "-e",
            "tcp.flags.ack",
            "-e",
            "tcp.ack",
        ])
        .args(["-e", "tcp.srcport"])
        .stdin(Stdio::null())
        .output()
        .expect("tshark runs (apt-get install tshark)");
    assert!(o.status.success(), "tshark failed: {}", text(&o.stderr));
    #[derive(Default)]
    struct Hs {
        syn: Option<(f64, String)>,
        synack: Option<f64>,
        ack: Option<f64>,
    }
    let mut streams: BTreeMap<u64, Hs> = BTreeMap::new();
    for line in text(&o.stdout).lines() {
        let f: Vec<&str> = line.split(',').collect();
        let (Ok(stream), Ok(t)) = (f[0].parse::<u64>(), f[1].parse::<f64>()) else {
            continue;
        };
        let flag = |s: &str| s == "1" || s == "True";
        let (syn, ack) = (flag(f[2]), flag(f[3]));
        let h = streams.entry(stream).or_default();
        match (syn, ack) {
            (true, false) if h.syn.is_none() => h.syn = Some((t, f[5].to_string())),
            (true, true) if h.synack.is_none() => h.synack = Some(t),
            (false, true)
                if h.ack.is_none()
                    && h.synack.is_some()
                    && f[4] == "1"
                    && h.syn.as_ref().is_some_and(|s| s.1 == f[5]) =>
            {
                h.ack = Some(t)
            }
            _ => {}
        }
    }
    let mut v: Vec<f64> = streams
        .values()
        .filter_map(|h| match part {
            Part::SynToSynack => Some(h.synack? - h.syn.as_ref()?.0),
            Part::SynackToAck => Some(h.ack? - h.synack?),
        })
        .map(|s| s * 1e3)
        .collect();
    v.sort_by(f64::total_cmp);
    v
}

/// Nearest rank, as the analyzer documents it.
fn percentile(sorted: &[f64], p: f64) -> f64 {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// `late_ms`: the longest the lab delivered a packet after its time (summary.json), which a busy
/// machine adds to a sample on top of the path's delay.
fn check_against_tshark(pcap: &Path, part: Part, at: &str, late_ms: f64) {
    let v = analyze(pcap);
    let h = &v["handshakes"];
    let theirs = tshark_handshakes(pcap, part);
    assert_eq!(theirs.len(), CONNECTIONS, "tshark saw {theirs:?}");
    assert_eq!(h["count"], CONNECTIONS, "{h:#}");
    assert_eq!(h[at], CONNECTIONS, "every sample measured {at}: {h:#}");
    let ours: Vec<f64> = h["cdf"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["ms"].as_f64().unwrap())
        .collect();
    assert_eq!(ours.len(), theirs.len());
    for (o, t) in ours.iter().zip(&theirs) {
        assert!((o - t).abs() < 0.002, "ours {ours:?}\ntshark {theirs:?}");
    }
    let close = |key: &str, want: f64| {
        let got = h[key].as_f64().unwrap();
        assert!(
            (got - want).abs() < 0.002,
            "{key}: ours {got}, from tshark {want}"
        );
    };
    close("p50_ms", percentile(&theirs, 50.0));
    close("p90_ms", percentile(&theirs, 90.0));
    let under = theirs.iter().filter(|&&x| x < 100.0).count() as f64 * 100.0 / theirs.len() as f64;
    close("under_100ms_pct", under);
    // The path was told 80 ms ± 40 ms per direction's share: the samples spread across it.
    assert!(
        theirs[0] >= 40.0 && theirs[theirs.len() - 1] <= 125.0 + late_ms,
        "{theirs:?} (the lab was up to {late_ms} ms late)"
    );
    assert!(
        theirs[theirs.len() - 1] - theirs[0] > 10.0,
        "no spread: {theirs:?}"
    );
}

#[test]
fn handshake_times_over_many_connections_match_tshark_at_the_client_and_the_server() {
    let _g = lock();
    let dir = out_dir("handshakes");
    let d = dir.to_str().unwrap();
    let count = CONNECTIONS.to_string();
    let o = run(&[
        "shell",
        "-q",
        "--rtt",
        "80ms",
        "--jitter",
        "20ms",
        "uniform",
        "-o",
        d,
        "--server",
        "latencylab tfo-server",
        "--",
        "latencylab",
        "tfo-client",
        "server",
        "--count",
        &count,
        "--interval",
        "40ms",
    ]);
    assert!(o.status.success(), "lab failed: {}", text(&o.stderr));
    let captures = dir.join("captures");
    let (cp, sp) = (
        captures.join("client-eth0.pcap"),
        captures.join("server-eth0.pcap"),
    );
    let late_ms = lab_lateness_ms(&dir, "max");
    check_against_tshark(&cp, Part::SynToSynack, "measured_at_client", late_ms);
    check_against_tshark(&sp, Part::SynackToAck, "measured_at_server", late_ms);

    // The text report's line names what was measured.
    let o = run(&["analyze", cp.to_str().unwrap()]);
    let out = text(&o.stdout);
    let line = out
        .lines()
        .find(|l| l.starts_with("handshakes: "))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        line.starts_with(&format!(
            "handshakes: {CONNECTIONS} connections (SYN to SYN-ACK at the client): median "
        )),
        "{line}"
    );
    assert_nothing_left();
    let _ = std::fs::remove_dir_all(&dir);
}
