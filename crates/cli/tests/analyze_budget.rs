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

/// The dead peer again, with the captures started after the handshake: no handshake and not
/// one packet from the server in them, only the client's request, sent again as its
/// retransmission timer backs off, and its RST when it gives up.
#[test]
fn a_dead_peer_captured_after_the_handshake_is_peer_unresponsive_and_no_loss() {
    let _g = lock();
    let dir = corpus();
    for fam in ["v4", "v6"] {
        let run = dir.join(format!("dead_peer_late-{fam}"));
        let truth = read_json(&run.join("truth.json"));
        let waited_ms = truth["result"]["waited_ms"].as_f64().unwrap();
        // The client program gave up 5 s after sending its request.
        within(waited_ms, 5000.0, "the client's wait");
        for point in ["client", "middle"] {
            let what = format!("dead_peer_late-{fam} at the {point}");
            let a = analyze(&run.join(format!("{point}.pcap")));
            let conns = a["connections"].as_array().unwrap();
            assert_eq!(conns.len(), 1, "{what}: one connection");
            let c = &conns[0];
            assert!(c["handshake_ms"].is_null(), "{what}: no handshake captured");
            assert_eq!(c["b2a"]["packets"], 0, "{what}: nothing from the server");
            let diags = c["diagnoses"].as_array().unwrap();
            let kinds: Vec<&str> = diags.iter().map(|d| d["kind"].as_str().unwrap()).collect();
            assert_eq!(kinds, ["peer_unresponsive"], "{what}: {diags:#?}");
            within(
                diags[0]["cost_ms"].as_f64().unwrap(),
                waited_ms,
                &format!("{what}: peer_unresponsive"),
            );
            let summary = diags[0]["summary"].as_str().unwrap();
            assert!(!summary.contains("recovery took"), "{what}: {summary}");
        }
        // The server never saw anything after its handshake.
        let a = analyze(&run.join("server.pcap"));
        assert_eq!(a["connections"].as_array().unwrap().len(), 0);
    }
}

/// `pcap` with an ARP request inserted after every second record, stamped as the record
/// before it: frames that are not IP, which Wireshark numbers too.
fn with_arp_frames(pcap: &Path, out: &Path) {
    let b = std::fs::read(pcap).unwrap();
    assert_eq!(
        &b[..4],
        &[0xd4, 0xc3, 0xb2, 0xa1],
        "a little-endian microsecond pcap"
    );
    assert_eq!(b[20], 1, "Ethernet");
    let mut o = b[..24].to_vec();
    let mut at = 24;
    let mut n = 0;
    while at + 16 <= b.len() {
        let incl = u32::from_le_bytes(b[at + 8..at + 12].try_into().unwrap()) as usize;
        let rec = &b[at..at + 16 + incl];
        o.extend_from_slice(rec);
        n += 1;
        if n % 2 == 0 {
            let mut arp = vec![0xff; 6];
            arp.extend_from_slice(&[2, 0, 0, 0, 0, 1, 0x08, 0x06]);
            arp.extend_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1, 2, 0, 0, 0, 0, 1]);
            arp.extend_from_slice(&[10, 99, 0, 1, 0, 0, 0, 0, 0, 0, 10, 99, 0, 2]);
            o.extend_from_slice(&rec[..8]);
            o.extend_from_slice(&(arp.len() as u32).to_le_bytes());
            o.extend_from_slice(&(arp.len() as u32).to_le_bytes());
            o.extend_from_slice(&arp);
        }
        at += 16 + incl;
    }
    std::fs::write(out, o).unwrap();
}

/// Every diagnosis names the frames that show it, as Wireshark numbers them: tshark finds
/// the connection's packets at those frame numbers, at the times the JSON gives, and as many
/// of them between the two as the JSON counts; also when frames that are not TCP lie between.
#[test]
fn diagnosis_frames_are_the_frame_numbers_tshark_shows() {
    let _g = lock();
    let dir = corpus();
    let scratch = Path::new(env!("CARGO_TARGET_TMPDIR")).join("frames-arp");
    std::fs::create_dir_all(&scratch).unwrap();
    let mut checked = 0;
    let mut cases: Vec<&str> = CASES.to_vec();
    cases.push("dead_peer_late");
    for case in cases {
        for fam in ["v4", "v6"] {
            for point in POINTS {
                let pcap = dir.join(format!("{case}-{fam}/{point}.pcap"));
                let mixed = scratch.join(format!("{case}-{fam}-{point}.pcap"));
                with_arp_frames(&pcap, &mixed);
                for file in [&pcap, &mixed] {
                    let what = format!("{}", file.display());
                    let a = analyze(file);
                    for c in a["connections"].as_array().unwrap() {
                        let port = |k: &str| -> String {
                            c[k].as_str()
                                .unwrap()
                                .rsplit(':')
                                .next()
                                .unwrap()
                                .to_string()
                        };
                        let (pa, pb) = (port("a"), port("b"));
                        let mut spans = vec![&c["frames"]];
                        spans.extend(
                            c["diagnoses"]
                                .as_array()
                                .unwrap()
                                .iter()
                                .map(|d| &d["frames"]),
                        );
                        for f in spans {
                            if f.is_null() {
                                continue;
                            }
                            let (first, last) =
                                (f["first"].as_u64().unwrap(), f["last"].as_u64().unwrap());
                            let rows = tshark(
                                file,
                                &format!("frame.number == {first} || frame.number == {last}"),
                                &[
                                    "frame.number",
                                    "frame.time_relative",
                                    "tcp.srcport",
                                    "tcp.dstport",
                                ],
                            );
                            assert!(!rows.is_empty(), "{what}: frames {first}-{last}");
                            for r in &rows {
                                let n: u64 = r[0].parse().unwrap();
                                let t: f64 = r[1].parse().unwrap();
                                let want = if n == first {
                                    f["first_s"].as_f64()
                                } else {
                                    f["last_s"].as_f64()
                                };
                                assert!(
                                    (t - want.unwrap()).abs() < 2e-6,
                                    "{what}: frame {n} at {t} s, the JSON says {want:?}"
                                );
                                let ports = [r[2].as_str(), r[3].as_str()];
                                assert!(
                                    ports.contains(&pa.as_str()) && ports.contains(&pb.as_str()),
                                    "{what}: frame {n} is {ports:?}, not {pa} <-> {pb}"
                                );
                            }
                            let between = tshark(
                                file,
                                &format!(
                                    "frame.number >= {first} && frame.number <= {last} && tcp.port == {pa} && tcp.port == {pb}"
                                ),
                                &["frame.number"],
                            );
                            assert_eq!(
                                between.len() as u64,
                                f["packets"].as_u64().unwrap(),
                                "{what}"
                            );
                            checked += 1;
                        }
                    }
                }
            }
        }
    }
    assert!(checked > 50, "{checked}");
}
