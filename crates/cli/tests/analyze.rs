//! End-to-end tests of `latencylab analyze` on captures of real traffic: each test runs a
//! lab in network namespaces through the `latencylab` binary (root, /dev/net/tun), analyses
//! the pcaps the lab wrote, and checks a statistic or a diagnosis against what the lab was
//! told to do, and the per-connection counters against `tcptrace -l -r` on the same file.
//! tcptrace must be installed (CI installs it); without it the agreement tests fail.
//!
//! Labs run one at a time (a lock) and every test ends by checking that nothing was left
//! behind. Thresholds are about what the lab was set up to do, never about how fast this
//! machine is.

mod common;

use common::*;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

/// Runs a two-host lab (`latencylab shell LAB_ARGS -o DIR --server SERVER -- CLIENT...`) and
/// returns the directory with its captures.
fn lab(name: &str, lab_args: &[&str], server: &str, client: &[&str]) -> PathBuf {
    let dir = out_dir(name);
    let mut args: Vec<&str> = vec!["shell", "-q"];
    args.extend_from_slice(lab_args);
    let d = dir.to_str().unwrap().to_string();
    args.extend_from_slice(&["-o", &d, "--server", server, "--"]);
    args.extend_from_slice(client);
    let o: Output = Command::new(bin())
        .args(&args)
        .stdin(Stdio::null())
        .output()
        .expect("latencylab runs");
    assert!(
        o.status.success(),
        "lab {args:?} failed:\n{}{}",
        text(&o.stdout),
        text(&o.stderr)
    );
    dir
}

fn pcap(dir: &Path, host: &str) -> PathBuf {
    let p = dir.join("captures").join(format!("{host}-eth0.pcap"));
    assert!(p.exists(), "{} missing", p.display());
    p
}

/// `latencylab analyze --json` on the captures.
fn analyze(pcaps: &[&Path]) -> Value {
    let o = Command::new(bin())
        .arg("analyze")
        .arg("--json")
        .args(pcaps)
        .output()
        .expect("latencylab analyze runs");
    assert!(o.status.success(), "analyze failed: {}", text(&o.stderr));
    serde_json::from_slice(&o.stdout).expect("analyze --json prints JSON")
}

/// The one connection that carried the bulk data (the bulk client's control exchange, if
/// any, is smaller).
fn bulk_conn(v: &Value) -> &Value {
    v["connections"]
        .as_array()
        .unwrap()
        .iter()
        .max_by_key(|c| c["b2a"]["data_bytes"].as_u64().unwrap_or(0))
        .expect("a TCP connection")
}

fn diagnoses<'a>(c: &'a Value, kind: &str) -> Vec<&'a Value> {
    c["diagnoses"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["kind"] == kind)
        .collect()
}

fn download(secs: u32) -> Vec<String> {
    [
        "latencylab",
        "bulk-client",
        "server",
        "--duration",
        &format!("{secs}s"),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

// ---- tcptrace ----

/// Per-direction values tcptrace printed: label -> [a->b, b->a].
type Block = BTreeMap<String, [f64; 2]>;

/// `tcptrace -l -r -n` on one capture: per connection, the two ports and the values.
fn tcptrace(pcap: &Path) -> Vec<((u16, u16), Block)> {
    let o = Command::new("tcptrace")
        .args(["-l", "-r", "-n"])
        .arg(pcap)
        .output()
        .unwrap_or_else(|e| {
            panic!("tcptrace is needed for this test (apt install tcptrace) and could not run: {e}")
        });
    assert!(o.status.success(), "tcptrace failed: {}", text(&o.stderr));
    let mut conns: Vec<((u16, u16), Block)> = Vec::new();
    let mut ports: Vec<u16> = Vec::new();
    for line in text(&o.stdout).lines() {
        let t = line.trim();
        // "host a:        fd4c:6c61:6200:0001::0001:54190": tcptrace prints IPv6 addresses
        // in its own long form, so connections are matched by port.
        if let Some((letters, addr)) = t.strip_prefix("host ").and_then(|r| r.split_once(':')) {
            if letters.len() <= 3 {
                let port = addr.trim().rsplit(':').next().and_then(|p| p.parse().ok());
                ports.push(port.expect("a port after the host"));
                if ports.len() == 2 {
                    conns.push(((ports[0], ports[1]), Block::new()));
                    ports.clear();
                }
                continue;
            }
        }
        let Some(c) = conns.last_mut() else { continue };
        // Two columns: "label: value [unit]   label: value [unit]".
        let parts: Vec<&str> = t.split(':').collect();
        if parts.len() == 3 {
            let num = |s: &str| s.split_whitespace().next().and_then(|x| x.parse().ok());
            if let (Some(x), Some(y)) = (num(parts[1]), num(parts[2])) {
                c.1.entry(parts[0].trim().to_string()).or_insert([x, y]);
            }
        }
    }
    conns
}

fn port(addr: &Value) -> u16 {
    addr.as_str()
        .unwrap()
        .rsplit(':')
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// Within 2 %, or within tcptrace's printed precision (0.1 ms for RTTs).
fn close(ours: f64, theirs: f64) -> bool {
    (ours - theirs).abs() <= 0.02 * theirs.abs() || (ours - theirs).abs() < 0.051
}

/// Compares every connection tcptrace found in `pcap` with ours; returns how many values
/// were compared.
fn agree_with_tcptrace(pcap: &Path) -> usize {
    let ours = analyze(&[pcap]);
    let theirs = tcptrace(pcap);
    assert!(
        !theirs.is_empty(),
        "tcptrace found no connection in {}",
        pcap.display()
    );
    let mut checked = 0;
    for ((pa, pb), vals) in &theirs {
        let c = ours["connections"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| port(&c["a"]) == *pa && port(&c["b"]) == *pb)
            .unwrap_or_else(|| panic!("{}: no connection {pa} -> {pb} in ours", pcap.display()));
        for (k, dir) in ["a2b", "b2a"].into_iter().enumerate() {
            let d = &c[dir];
            let f = |key: &str| d[key].as_f64().unwrap_or(f64::NAN);
            let mut pairs = vec![
                ("total packets", f("packets")),
                ("actual data pkts", f("data_packets")),
                ("actual data bytes", f("data_bytes")),
                ("rexmt data pkts", f("retransmitted_packets")),
            ];
            if vals["RTT samples"][k] > 0.0 && f("rtt_samples") > 0.0 {
                pairs.push(("RTT min", f("rtt_min_ms")));
                pairs.push(("RTT avg", f("rtt_avg_ms")));
            }
            for (label, v) in pairs {
                let t = vals
                    .get(label)
                    .unwrap_or_else(|| panic!("'{label}' not in tcptrace's output"))[k];
                assert!(
                    close(v, t),
                    "{} {pa}->{pb} {dir} {label}: ours {v}, tcptrace {t}",
                    pcap.display()
                );
                checked += 1;
            }
        }
    }
    checked
}

// ---- leftovers (as crates/cli/tests/lab.rs checks them) ----

fn assert_nothing_left(dir: &Path) {
    common::assert_nothing_left();
    let _ = fs::remove_dir_all(dir);
}

// ---- the tests ----

#[test]
fn a_bloated_download_agrees_with_tcptrace_and_each_end_sees_the_same_standing_queue() {
    let _g = lock();
    let client = download(4);
    let dir = lab(
        "bloat",
        &[
            "--rate",
            "10mbit",
            "--rtt",
            "40ms",
            "--queue",
            "fifo limit 1000",
        ],
        "latencylab bulk-server",
        &strs(&client),
    );
    let (cp, sp) = (pcap(&dir, "client"), pcap(&dir, "server"));
    assert!(agree_with_tcptrace(&cp) >= 8);
    assert!(agree_with_tcptrace(&sp) >= 8);

    // The server sends: its capture is the sender's view, and the RTTs show the FIFO.
    let server = analyze(&[&sp]);
    let s = bulk_conn(&server);
    assert_eq!(s["b2a"]["vantage"], "sender", "{s:#}");
    let bb = diagnoses(s, "bufferbloat");
    assert_eq!(bb.len(), 1, "{:#}", s["diagnoses"]);
    let queue_at_sender = bb[0]["delay_ms"].as_f64().unwrap();
    // 1000 packets at 10 Mbit/s is 1.2 s of buffer; CUBIC keeps a good part of it full.
    assert!(queue_at_sender > 100.0, "{:#}", bb[0]);
    assert!(
        s["a"].as_str().unwrap().starts_with('['),
        "lab traffic is IPv6: {}",
        s["a"]
    );

    // The client receives: no sender-side diagnoses, the same queue from the timestamps.
    let client = analyze(&[&cp]);
    let c = bulk_conn(&client);
    assert_eq!(c["b2a"]["vantage"], "receiver", "{c:#}");
    assert!(
        diagnoses(c, "app_limited").is_empty(),
        "{:#}",
        c["diagnoses"]
    );
    let not_judged = c["b2a"]["not_judged"].as_array().unwrap();
    assert!(not_judged.contains(&Value::from("app_limited")));
    let bb = diagnoses(c, "bufferbloat");
    assert_eq!(bb.len(), 1, "{:#}", c["diagnoses"]);
    let queue_at_receiver = bb[0]["delay_ms"].as_f64().unwrap();
    assert!(
        (queue_at_receiver - queue_at_sender).abs() < 0.15 * queue_at_sender,
        "standing queue {queue_at_receiver} ms at the receiver, {queue_at_sender} ms at the sender"
    );
    assert_nothing_left(&dir);
}

#[test]
fn a_lossy_download_agrees_with_tcptrace_and_shows_retransmissions_and_sack() {
    let _g = lock();
    let client = download(4);
    let dir = lab(
        "loss",
        &[
            "--rate", "10mbit", "--rtt", "40ms", "--loss", "2%", "--seed", "3",
        ],
        "latencylab bulk-server",
        &strs(&client),
    );
    let (cp, sp) = (pcap(&dir, "client"), pcap(&dir, "server"));
    assert!(agree_with_tcptrace(&cp) >= 8);
    assert!(agree_with_tcptrace(&sp) >= 8);
    let server = analyze(&[&sp]);
    let s = bulk_conn(&server);
    let (data, rexmt) = (
        s["b2a"]["data_packets"].as_f64().unwrap(),
        s["b2a"]["retransmitted_packets"].as_f64().unwrap(),
    );
    // 2 % of the data is dropped on its way to the client and must be sent again.
    assert!(
        rexmt >= 0.01 * data,
        "{rexmt} retransmissions of {data} data packets"
    );
    assert!(s["a2b"]["sack_packets"].as_u64().unwrap() > 0, "{s:#}");
    assert!(s["a_options"]["sack_permitted"].as_bool().unwrap());
    // At the receiver the lost segments were never seen: their repairs fill holes.
    let client = analyze(&[&cp]);
    let c = bulk_conn(&client);
    assert!(
        c["b2a"]["out_of_order_packets"].as_u64().unwrap() > 0,
        "{c:#}"
    );
    assert_nothing_left(&dir);
}

#[test]
fn an_ecn_download_through_codel_shows_ce_at_the_receiver_then_ece_and_cwr() {
    let _g = lock();
    let client = download(4);
    let dir = lab(
        "ecn",
        &[
            "--rate",
            "10mbit",
            "--rtt",
            "40ms",
            "--ecn",
            "on",
            "--queue",
            "codel ecn",
        ],
        "latencylab bulk-server",
        &strs(&client),
    );
    let (cp, sp) = (pcap(&dir, "client"), pcap(&dir, "server"));
    let client = analyze(&[&cp]);
    let c = bulk_conn(&client);
    assert_eq!(c["ecn"], "classic", "{c:#}");
    assert!(
        c["b2a"]["ce"].as_u64().unwrap() > 0,
        "no CE at the receiver: {c:#}"
    );
    assert!(
        c["a2b"]["ece"].as_u64().unwrap() > 0,
        "no ECE from the receiver: {c:#}"
    );
    let server = analyze(&[&sp]);
    let s = bulk_conn(&server);
    // CE is set after the server's capture point, on the link.
    assert_eq!(s["b2a"]["ce"], 0, "{s:#}");
    assert!(
        s["b2a"]["cwr"].as_u64().unwrap() > 0,
        "no CWR from the sender: {s:#}"
    );
    assert!(diagnoses(s, "ecn_unused").is_empty());
    assert_nothing_left(&dir);
}

#[test]
fn a_path_that_clears_ecn_is_ecn_bleached_when_both_captures_are_analysed_together() {
    let _g = lock();
    let client = download(2);
    let dir = lab(
        "bleach",
        &[
            "--rate",
            "10mbit",
            "--rtt",
            "20ms",
            "--ecn",
            "on",
            "--bleach-ecn",
        ],
        "latencylab bulk-server",
        &strs(&client),
    );
    let (cp, sp) = (pcap(&dir, "client"), pcap(&dir, "server"));
    let both = analyze(&[&cp, &sp]);
    let conns = both["connections"].as_array().unwrap();
    // The server's data left ECT(0) and arrived Not-ECT: named at the client's capture.
    let at_client: Vec<&Value> = conns
        .iter()
        .filter(|c| c["capture"].as_str().unwrap().contains("client"))
        .flat_map(|c| diagnoses(c, "ecn_bleached"))
        .collect();
    assert!(
        at_client.iter().any(|d| d["direction"] == "b2a"),
        "{:#}",
        both["connections"]
    );
    // Each capture alone cannot tell.
    let alone = analyze(&[&cp]);
    assert!(diagnoses(bulk_conn(&alone), "ecn_bleached").is_empty());
    assert_nothing_left(&dir);
}

#[test]
fn an_ipv4_download_by_address_is_analysed_as_ipv4() {
    let _g = lock();
    let dir = lab(
        "ipv4",
        &["--rate", "10mbit", "--rtt", "20ms"],
        "latencylab bulk-server",
        &["latencylab", "bulk-client", "10.77.2.1", "--duration", "2s"],
    );
    let cp = pcap(&dir, "client");
    assert!(agree_with_tcptrace(&cp) >= 8);
    let v = analyze(&[&cp]);
    let c = bulk_conn(&v);
    assert!(
        c["b"].as_str().unwrap().starts_with("10.77.2.1:"),
        "{}",
        c["b"]
    );
    assert!(
        c["b2a"]["data_bytes"].as_u64().unwrap() > 1_000_000,
        "{c:#}"
    );
    assert_nothing_left(&dir);
}

/// A request/response server: reads 70-byte messages and answers each with 100 bytes.
const NAGLE_SERVER: &str = r#"
import socket, sys
s = socket.socket(socket.AF_INET6)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("::", 7000))
s.listen()
c, _ = s.accept()
while True:
    buf = b""
    while len(buf) < 70:
        d = c.recv(70 - len(buf))
        if not d:
            sys.exit(0)
        buf += d
    c.sendall(b"r" * 100)
"#;

/// The client writes each 70-byte message in two write() calls, Nagle on (the default).
const NAGLE_CLIENT: &str = r#"
import socket, time
for _ in range(100):
    try:
        c = socket.create_connection(("server", 7000))
        break
    except OSError:
        time.sleep(0.05)
for _ in range(3):
    c.send(b"a" * 35)
    c.send(b"b" * 35)
    got = 0
    while got < 100:
        got += len(c.recv(100 - got))
c.close()
"#;

#[test]
fn a_message_written_in_two_parts_over_a_long_rtt_is_a_nagle_stall() {
    let _g = lock();
    let scripts = out_dir("nagle-scripts");
    fs::create_dir_all(&scripts).unwrap();
    let (srv, cli) = (scripts.join("server.py"), scripts.join("client.py"));
    fs::write(&srv, NAGLE_SERVER).unwrap();
    fs::write(&cli, NAGLE_CLIENT).unwrap();
    let server_cmd = format!("python3 {}", srv.display());
    let dir = lab(
        "nagle",
        &["--rtt", "500ms"],
        &server_cmd,
        &["python3", cli.to_str().unwrap()],
    );
    let cp = pcap(&dir, "client");
    let v = analyze(&[&cp]);
    let c = v["connections"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| port(&c["b"]) == 7000)
        .expect("the request/response connection");
    assert_eq!(c["a2b"]["vantage"], "sender");
    let n = diagnoses(c, "nagle_delayed_ack");
    assert_eq!(n.len(), 1, "{:#}", c["diagnoses"]);
    assert_eq!(n[0]["direction"], "a2b");
    // Each of the three second halves waited for the ACK of the first: a round trip.
    let lost = n[0]["delay_ms"].as_f64().unwrap();
    assert!(lost >= 3.0 * 450.0, "{:#}", n[0]);
    assert!(
        n[0]["summary"].as_str().unwrap().starts_with("3 times"),
        "{:#}",
        n[0]
    );
    assert_nothing_left(&dir);
    let _ = fs::remove_dir_all(&scripts);
}

// ---- ladder diagrams (two captures) ----

/// The number just after `before` in `text` ("a median 40.1 ms" after "a median ").
fn number_after(text: &str, before: &str) -> f64 {
    let rest = &text[text
        .find(before)
        .unwrap_or_else(|| panic!("no {before:?} in {text}"))
        + before.len()..];
    let end = rest
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(rest.len());
    rest[..end]
        .parse()
        .unwrap_or_else(|_| panic!("no number after {before:?} in {text}"))
}

/// A PNG file's width and height, after checking its signature, header and end.
fn png_size(bytes: &[u8]) -> (u32, u32) {
    assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    assert_eq!(&bytes[12..16], b"IHDR", "no header first");
    assert!(
        bytes.ends_with(b"IEND\xae\x42\x60\x82"),
        "no IEND at the end"
    );
    let be = |i: usize| u32::from_be_bytes(bytes[i..i + 4].try_into().unwrap());
    (be(16), be(20))
}

#[test]
fn two_captures_of_one_exchange_draw_its_ladder_from_the_syn_at_the_paths_one_way_delay() {
    let _g = lock();
    let dir = lab(
        "ladder",
        &["--rtt", "80ms"],
        "latencylab rr-server",
        &["latencylab", "rr-client", "server", "--duration", "1s"],
    );
    let (cp, sp) = (pcap(&dir, "client"), pcap(&dir, "server"));
    let (c, s) = (cp.to_str().unwrap(), sp.to_str().unwrap());
    let [plots, page, zoom, one] = ["plots", "report.html", "zoom", "one"].map(|n| dir.join(n));
    let [plots_arg, page_arg, zoom_arg, one_arg] =
        [&plots, &page, &zoom, &one].map(|p| p.to_str().unwrap());
    let analyze_ok = |args: &[&str]| {
        let o = run(&[&["analyze"], args].concat());
        assert!(o.status.success(), "analyze {args:?}: {}", text(&o.stderr));
    };
    analyze_ok(&["--plots", plots_arg, "--html", page_arg, c, s]);
    let v = analyze(&[&cp, &sp]);
    let conn = &v["connections"][0];
    assert_eq!(port(&conn["b"]), 5206, "{conn:#}");

    // Connection 1 is the client's view (it saw the SYN first): its hosts are a and b.
    let svg = fs::read_to_string(plots.join("a_b_ladder.svg")).expect("a_b_ladder.svg");
    assert!(svg.starts_with("<svg ") && svg.trim_end().ends_with("</svg>"));
    let png = fs::read(plots.join("a_b_ladder.png")).expect("a_b_ladder.png");
    assert_eq!(png_size(&png), (900, 420));
    assert!(png.len() > 10_000, "{} bytes", png.len());

    let texts = report::svg_texts(&svg);
    let hosts = [
        format!("client {} (client-eth0.pcap)", conn["a"].as_str().unwrap()),
        format!("server {} (server-eth0.pcap)", conn["b"].as_str().unwrap()),
    ];
    for h in &hosts {
        assert!(texts.contains(h), "no {h:?} in {texts:?}");
    }
    // The arrows' labels, in order of departure, start with the handshake; each message
    // leaves in its two writes, 28 and 42 bytes.
    let syn = texts.iter().position(|t| t == "SYN").expect("SYN");
    assert_eq!(texts[syn + 1], "SYN-ACK", "{texts:?}");
    for part in ["28 B", "42 B"] {
        assert!(
            texts.iter().any(|t| t.ends_with(part)),
            "no {part}: {texts:?}"
        );
    }
    // Each arrow pairs a packet's departure in one capture with its arrival in the other:
    // the lab was told 40 ms each way.
    let late_ms = lab_lateness_ms(&dir, "max");
    let caption = texts.join(" ");
    let there = number_after(&caption, "a median ");
    let back = number_after(&caption, "client→server and ");
    for ms in [there, back] {
        assert!((40.0..=41.0 + late_ms).contains(&ms), "{ms} ms: {caption}");
    }
    let html = fs::read_to_string(&page).unwrap();
    assert!(
        html.contains("<figure id=\"conn1-ladder\""),
        "no ladder on the page"
    );

    // A window of the exchanges: no handshake in it.
    analyze_ok(&["--plots", zoom_arg, "--ladder-window", "0.3s..0.5s", c, s]);
    let texts = report::svg_texts(&fs::read_to_string(zoom.join("a_b_ladder.svg")).unwrap());
    assert!(
        texts[0].starts_with("Connection 1, its ")
            && texts[0].ends_with(" packets from 0.300 to 0.500 s, at both ends"),
        "{}",
        texts[0]
    );
    assert!(!texts.iter().any(|t| t.contains("SYN")), "{texts:?}");
    assert!(texts.iter().any(|t| t.ends_with(" B")), "{texts:?}");

    // One capture: no ladder, and no window to ask for.
    analyze_ok(&["--plots", one_arg, c]);
    let names: Vec<String> = fs::read_dir(&one)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().any(|n| n == "a2b_tsg.png"), "{names:?}");
    assert!(!names.iter().any(|n| n.contains("ladder")), "{names:?}");
    let refused = |args: &[&str], why: &str| {
        let o = run(&[&["analyze"], args].concat());
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains(why) && err.lines().count() == 1,
            "{args:?}: {err}"
        );
    };
    let window = ["--ladder-window", "0.3s..0.5s"];
    refused(
        &[&["--plots", one_arg], &window[..], &[c]].concat(),
        "needs two captures of the same traffic",
    );
    refused(
        &[&window[..], &[c, s]].concat(),
        "--plots DIR or --html FILE",
    );
    refused(
        &["--plots", one_arg, "--ladder-window", "0.3..0.5", c, s],
        "cannot read '0.3..0.5' as a time window: '0.3' is no time with a unit (try 1.2s..1.5s",
    );
    assert_nothing_left(&dir);
}
