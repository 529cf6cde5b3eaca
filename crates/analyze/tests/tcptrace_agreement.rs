//! Agreement with `tcptrace -l -r` on captures written by the synthetic model: per connection
//! and direction, packets, data packets, data bytes, retransmitted packets and RTT min/avg
//! must agree within 2 % (docs/analyze.md lists where the definitions differ). Skips, saying
//! why, when tcptrace is not installed.

use std::collections::BTreeMap;
use std::process::Command;

use analyze::synth::{self, Bulk};
use analyze::{analyze_bytes, Options};

/// Per-direction values tcptrace printed: label -> [a->b, b->a].
type Block = BTreeMap<String, [f64; 2]>;

/// Parses `tcptrace -l -r` output into (host a, host b, values) per connection.
fn parse_tcptrace(out: &str) -> Vec<(String, String, Block)> {
    let mut conns = Vec::new();
    let mut cur: Option<(String, String, Block)> = None;
    for line in out.lines() {
        let t = line.trim();
        // tcptrace names the hosts a/b, c/d, e/f… per connection.
        let host = t
            .strip_prefix("host ")
            .and_then(|r| r.split_once(':'))
            .filter(|(letters, _)| letters.len() <= 3)
            .map(|(_, v)| v.trim().to_string());
        if let Some(h) = host {
            match cur.as_mut() {
                Some(c) if c.1.is_empty() => c.1 = h,
                _ => {
                    if let Some(c) = cur.take() {
                        conns.push(c);
                    }
                    cur = Some((h, String::new(), Block::new()));
                }
            }
        } else if let Some(c) = cur.as_mut() {
            // Two columns: "label: value [unit]   label: value [unit]".
            let parts: Vec<&str> = t.split(':').collect();
            if parts.len() == 3 {
                let label = parts[0].trim().to_string();
                let v1 = parts[1]
                    .split_whitespace()
                    .next()
                    .and_then(|x| x.parse().ok());
                let v2 = parts[2]
                    .split_whitespace()
                    .next()
                    .and_then(|x| x.parse().ok());
                if let (Some(x), Some(y)) = (v1, v2) {
                    c.2.entry(label).or_insert([x, y]);
                }
            }
        }
    }
    conns.extend(cur);
    conns
}

fn close(ours: f64, theirs: f64) -> bool {
    (ours - theirs).abs() <= 0.02 * theirs.abs().max(1e-9) || (ours - theirs).abs() < 0.051
}

#[test]
fn statistics_agree_with_tcptrace_within_two_percent() {
    if Command::new("tcptrace").arg("-v").output().is_err() {
        eprintln!(
            "SKIPPED: tcptrace is not installed (apt install tcptrace); agreement not checked"
        );
        return;
    }
    let mut pkts = Vec::new();
    for (i, (drops, window, wrap, rate)) in [
        (
            vec![100u64, 101, 102, 103, 300],
            60u32,
            false,
            10_000_000u64,
        ),
        (
            vec![5, 50, 51, 400, 401, 402, 403, 404],
            40,
            true,
            2_000_000,
        ),
        (vec![], 200, false, 1_000_000),
    ]
    .into_iter()
    .enumerate()
    {
        let mut b = Bulk::new(
            format!("10.0.0.{}:{}", i + 1, 40000 + i).parse().unwrap(),
            "10.0.0.100:5201".parse().unwrap(),
        );
        b.drop_first_tx = drops.into_iter().collect();
        b.window_segments = window;
        b.rate_bytes_per_s = rate;
        b.start_ns += i as u64 * 300_000_000;
        if wrap {
            b.isn_client = u32::MAX - 200_000;
        }
        if i == 1 {
            b.drop_second_tx = [400u64].into_iter().collect();
        }
        pkts.extend(b.run());
    }
    let bytes = synth::pcap(pkts);
    let path =
        std::env::temp_dir().join(format!("latencylab-tcptrace-{}.pcap", std::process::id()));
    std::fs::write(&path, &bytes).unwrap();
    let out = Command::new("tcptrace")
        .args(["-l", "-r", "-n"])
        .arg(&path)
        .output()
        .unwrap();
    if std::env::var_os("KEEP_PCAP").is_none() {
        let _ = std::fs::remove_file(&path);
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let theirs = parse_tcptrace(&text);
    let ours = analyze_bytes("t", &bytes, Options::default()).unwrap();
    assert_eq!(theirs.len(), 3, "tcptrace output:\n{text}");
    assert_eq!(ours.connections.len(), 3);
    let mut checked = 0;
    for (ha, hb, vals) in &theirs {
        let c = ours
            .connections
            .iter()
            .find(|c| &c.a.to_string() == ha && &c.b.to_string() == hb)
            .unwrap_or_else(|| panic!("no connection {ha} - {hb}"));
        for (k, d) in [&c.a2b.stats, &c.b2a.stats].into_iter().enumerate() {
            let pairs = [
                ("total packets", d.packets as f64),
                ("actual data pkts", d.data_packets as f64),
                ("actual data bytes", d.data_bytes as f64),
                ("rexmt data pkts", d.retransmitted_packets as f64),
                ("unique bytes sent", d.unique_bytes as f64),
            ];
            for (label, v) in pairs {
                let t = vals
                    .get(label)
                    .unwrap_or_else(|| panic!("{label} not in output"))[k];
                assert!(close(v, t), "{ha} dir {k} {label}: ours {v}, tcptrace {t}");
                checked += 1;
            }
            let samples = vals["RTT samples"][k];
            if samples > 0.0 && d.rtt_samples > 0 {
                for (label, v) in [
                    ("RTT min", d.rtt_min_ms.unwrap()),
                    ("RTT avg", d.rtt_avg_ms.unwrap()),
                ] {
                    let t = vals[label][k];
                    assert!(close(v, t), "{ha} dir {k} {label}: ours {v}, tcptrace {t}");
                    checked += 1;
                }
            }
        }
    }
    assert!(checked >= 30, "only {checked} values compared");
}
