//! End-to-end tests of the lab in real network namespaces. They need
//! root, /dev/net/tun, and tcpdump and ping (installed by .ci/run). Each test runs the real
//! `latencylab` binary and then checks that nothing was left behind: no namespace, no TUN
//! device, no process.
//!
//! The tests take a lock so that only one lab runs at a time: two labs on two cores would
//! disturb each other's throughput.

mod common;

use common::*;

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use labnet::run_dir::{parse_link_log, LogLine, RunDir};
use labnet::spec::Side;
use link::EventKind;

fn total_goodput_mbps(lines: &[serde_json::Value], role: &str) -> f64 {
    lines
        .iter()
        .find(|v| v["type"] == "total" && v["role"] == role)
        .unwrap_or_else(|| panic!("no total line for {role} in {lines:?}"))["goodput_mbps"]
        .as_f64()
        .unwrap()
}

/// TCP payload rate of a link: IPv6 + TCP with timestamps take 40 + 32 of each 1500 bytes.
fn payload_mbps(link_mbit: f64) -> f64 {
    link_mbit * (1500.0 - 72.0) / 1500.0
}

/// Every event of one direction of a link, read through the run directory's own reader.
fn link_log(dir: &Path, link: &str, side: Side) -> Vec<LogLine> {
    let path = RunDir::new(dir).link_log(link, side);
    parse_link_log(
        &path.display().to_string(),
        &fs::read_to_string(&path).unwrap(),
    )
    .unwrap()
}

/// The downlink's entry in a summary.json.
fn down_link(summary: &serde_json::Value) -> &serde_json::Value {
    summary["links"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["direction"] == "down")
        .unwrap_or_else(|| panic!("no downlink in {summary}"))
}

fn cause(l: &LogLine) -> &str {
    l.cause.as_deref().unwrap_or("-")
}

#[test]
fn bulk_download_fills_the_link_but_never_exceeds_it_and_pcaps_open_in_tcpdump() {
    let _g = lock();
    let dir = out_dir("bulk");
    let client_out = dir.join("client.jsonl");
    let o = bulk_shell(
        &[
            "--rate",
            "10mbit",
            "--rtt",
            "40ms",
            "--queue",
            "fifo limit 1000",
            "-o",
            dir.to_str().unwrap(),
        ],
        "latencylab bulk-server",
        "10s",
        &client_out,
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let goodput = total_goodput_mbps(&json_lines(&client_out), "receiver");
    let limit = payload_mbps(10.0);
    assert!(
        goodput >= 0.96 * limit,
        "goodput {goodput:.3} Mbit/s < 96 % of {limit:.3}"
    );
    assert!(
        goodput <= limit * 1.005,
        "goodput {goodput:.3} Mbit/s above the link's {limit:.3}"
    );
    let summary = read_json(&dir.join("summary.json"));
    let down = down_link(&summary);
    assert!(
        down["throughput_bps"].as_f64().unwrap() <= 10e6 * 1.001,
        "{down}"
    );
    assert!(
        down["queue_delay_ms"]["p95"].as_f64().unwrap() > 100.0,
        "a 1000-packet FIFO bloats: {down}"
    );
    for cap in ["client-eth0", "server-eth0"] {
        let p = dir.join("captures").join(format!("{cap}.pcap"));
        let lines = tcpdump_read(&p).lines().count();
        assert!(lines > 5000, "{cap}: only {lines} packets");
    }
    let resolved: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(RunDir::new(&dir).lab_json()).unwrap()).unwrap();
    assert_eq!(resolved["links"][0]["down"]["capacity"], "10mbit");
    assert_nothing_left();
}

#[test]
fn a_lab_without_a_rate_counts_the_hosts_super_packets_as_the_datagrams_they_carry() {
    // No rate, no impairment, no capture: the hosts' TSO super-packets cross whole; the
    // transfer must arrive, and the links must count datagrams of at most the MTU.
    let _g = lock();
    let dir = out_dir("whole");
    let client_out = dir.join("client.jsonl");
    let o = bulk_shell(
        &["--rtt", "10ms", "-o", dir.to_str().unwrap(), "--no-capture"],
        "latencylab bulk-server",
        "3s",
        &client_out,
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let lines = json_lines(&client_out);
    let received = lines
        .iter()
        .find(|v| v["type"] == "total" && v["role"] == "receiver")
        .unwrap_or_else(|| panic!("no receiver total in {lines:?}"))["bytes"]
        .as_u64()
        .unwrap();
    assert!(received > 10_000_000, "only {received} bytes in 3 s");
    let summary = read_json(&dir.join("summary.json"));
    let down = down_link(&summary);
    let (bytes, packets) = (
        down["bytes_out"].as_u64().unwrap(),
        down["packets_out"].as_u64().unwrap(),
    );
    assert!(
        bytes >= received,
        "{bytes} IP bytes carried {received}: {down}"
    );
    assert!(
        bytes <= packets * 1500,
        "{bytes} bytes in {packets} packets: more than 1500 bytes a datagram: {down}"
    );
    assert_nothing_left();
}

/// (time of SYN, time of SYN-ACK) per connection in a LINKTYPE_RAW pcap, in seconds.
fn syn_synack_times(pcap: &Path) -> Vec<(f64, f64)> {
    use std::collections::HashMap;
    use wire::packet::{parse, TcpHeader, Transport};
    let b = fs::read(pcap).unwrap();
    let mut syn: HashMap<(std::net::IpAddr, u16), f64> = HashMap::new();
    let mut pairs = Vec::new();
    let mut off = 24;
    while off + 16 <= b.len() {
        let u = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
        let t = f64::from(u(off)) + f64::from(u(off + 4)) / 1e9;
        let len = u(off + 8) as usize;
        let Ok(h) = parse(&b[off + 16..off + 16 + len]) else {
            panic!("unreadable packet in {}", pcap.display())
        };
        if let Transport::Tcp(tcp) = &h.transport {
            if tcp.has(TcpHeader::SYN) && !tcp.has(TcpHeader::ACK) {
                syn.insert((h.ip.src, tcp.src_port), t);
            } else if tcp.has(TcpHeader::SYN) {
                if let Some(t0) = syn.remove(&(h.ip.dst, tcp.dst_port)) {
                    pairs.push((t0, t));
                }
            }
        }
        off += 16 + len;
    }
    pairs
}

#[test]
fn idle_connect_time_is_the_configured_rtt() {
    let _g = lock();
    let dir = out_dir("connect");
    // 30 sequential connects to a listening server. The name is resolved once, outside the
    // timing: only connect() is measured.
    let script = "import socket,time\nai=socket.getaddrinfo('server',5201,type=socket.SOCK_STREAM)[0]\nfor i in range(30):\n s=socket.socket(ai[0],ai[1]); t=time.perf_counter(); s.connect(ai[4]); print((time.perf_counter()-t)*1000); s.close(); time.sleep(0.05)";
    let o = run(&[
        "shell",
        "--rtt",
        "40ms",
        "-q",
        "-o",
        dir.to_str().unwrap(),
        "--server",
        "latencylab bulk-server -o /dev/null",
        "--",
        "python3",
        "-c",
        script,
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    // What the lab delivers, seen at the client's interface: SYN out to SYN-ACK in. This is
    // the emulated path plus the server host's turnaround, free of the client's scheduling.
    let wire_ms: Vec<f64> = syn_synack_times(&dir.join("captures/client-eth0.pcap"))
        .iter()
        .map(|(a, b)| (b - a) * 1000.0)
        .collect();
    assert_eq!(wire_ms.len(), 30);
    let at_interface = median(wire_ms.clone());
    // A busy machine delays the lab's engine: what the lab measured of its own lateness (a
    // handshake crosses it twice) is allowed on top.
    let late_ms = lab_lateness_ms(&dir, "p99");
    assert!(
        (at_interface - 40.0).abs() <= 0.5 + 2.0 * late_ms,
        "median SYN→SYN-ACK {at_interface:.3} ms, the lab's lateness p99 {late_ms} ms: {wire_ms:?}"
    );
    // What the application sees adds its own host's stack and scheduling (a busy machine adds
    // a few hundred microseconds); it must still be the path's RTT, not more.
    let app_ms: Vec<f64> = text(&o.stdout)
        .lines()
        .map(|l| l.trim().parse().unwrap())
        .collect();
    assert_eq!(app_ms.len(), 30);
    let app = median(app_ms.clone());
    assert!(
        app >= at_interface && app - 40.0 <= 2.0 + 2.0 * late_ms,
        "median connect() {app:.3} ms: {app_ms:?}"
    );
    assert_nothing_left();
}

#[test]
fn a_precision_is_in_force_where_the_lab_and_its_summary_say() {
    let _g = lock();
    let dir = out_dir("precision");
    let o = run(&[
        "shell",
        "--rate",
        "20mbit",
        "--precision",
        "1ms",
        "-o",
        dir.to_str().unwrap(),
        "--no-capture",
        "--server",
        "latencylab bulk-server -o /dev/null",
        "--",
        "latencylab",
        "bulk-client",
        "server",
        "--duration",
        "1s",
        "-o",
        "/dev/null",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let json = |f: &str| -> serde_json::Value {
        serde_json::from_str(&fs::read_to_string(dir.join(f)).unwrap()).unwrap()
    };
    assert_eq!(json("lab.json")["precision_ms"], 1.0);
    let engine = &json("summary.json")["engine"];
    assert_eq!(engine["precision_ms"], 1.0);
    assert!(engine["packets"].as_u64().unwrap() > 100, "{engine}");
    assert!(
        text(&o.stderr).contains("latencylab: engine precision 1 ms: packets delivered within"),
        "{}",
        text(&o.stderr)
    );
    assert_nothing_left();
}

#[test]
fn each_direction_gets_its_own_rate() {
    let _g = lock();
    let dir = out_dir("asym");
    let script = "latencylab bulk-client server --duration 6s -o $LATENCYLAB_OUT/down.jsonl && latencylab bulk-client server --direction upload --duration 6s -o /dev/null";
    let o = run(&[
        "shell",
        "--down",
        "8mbit",
        "--up",
        "1mbit",
        "--rtt",
        "20ms",
        "-q",
        "-o",
        dir.to_str().unwrap(),
        "--server",
        "latencylab bulk-server -o $LATENCYLAB_OUT/server.jsonl",
        "--",
        "sh",
        "-c",
        script,
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let down = total_goodput_mbps(&json_lines(&dir.join("down.jsonl")), "receiver");
    assert!(
        down > 0.9 * payload_mbps(8.0) && down <= payload_mbps(8.0) * 1.01,
        "down {down}"
    );
    // Upstream, what the server received each second once the transfer got going (a sender's
    // own count would include what still sits in its socket buffer and the 1000-packet queue).
    let server = json_lines(&dir.join("server.jsonl"));
    let up: Vec<f64> = server
        .iter()
        .filter(|v| v["type"] == "interval" && v["role"] == "receiver")
        .map(|v| v["goodput_mbps"].as_f64().unwrap())
        .skip(1)
        .collect();
    assert!(up.len() >= 4, "{server:?}");
    // Each second is counted when the server reads, so a server woken late moves a few tens
    // of milliseconds of data from one second to the next: each within 10 %, their mean
    // within 1 %.
    assert!(
        up.iter().all(|m| *m <= payload_mbps(1.0) * 1.10),
        "up {up:?}"
    );
    let mean = up.iter().sum::<f64>() / up.len() as f64;
    assert!(
        mean > 0.9 * payload_mbps(1.0) && mean <= payload_mbps(1.0) * 1.01,
        "up {up:?}"
    );
    assert_nothing_left();
}

#[test]
fn loss_drops_about_the_given_share_in_the_direction_asked() {
    let _g = lock();
    let dir = out_dir("loss");
    let o = run(&[
        "shell",
        "--up-loss",
        "5%",
        "--seed",
        "1",
        "-q",
        "-o",
        dir.to_str().unwrap(),
        "--",
        "ping",
        "-n",
        "-q",
        "-i",
        "0.002",
        "-c",
        "2000",
        "-W",
        "1",
        "server",
    ]);
    // ping exits 0 when some replies came back, 1 when none did.
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let up = link_log(&dir, "path", Side::Up);
    let offered = up
        .iter()
        .filter(|l| l.event == EventKind::Enqueue || cause(l) == "loss")
        .count();
    let lost = up.iter().filter(|l| cause(l) == "loss").count();
    let share = lost as f64 / offered as f64;
    assert!(offered >= 2000, "{offered}");
    assert!(
        (share - 0.05).abs() < 0.015,
        "lost {lost} of {offered} = {share:.4}"
    );
    let down = link_log(&dir, "path", Side::Down);
    assert!(
        down.iter().all(|l| cause(l) != "loss"),
        "no loss was asked downstream"
    );
    assert_nothing_left();
}

#[test]
fn two_clients_share_a_bottleneck_roughly_fairly() {
    let _g = lock();
    let dir = out_dir("shared");
    let example = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/shared-bottleneck.toml"
    );
    let o = run(&["run", example, "-q", "-o", dir.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let a = total_goodput_mbps(&json_lines(&dir.join("programs/alice.out")), "receiver");
    let b = total_goodput_mbps(&json_lines(&dir.join("programs/bob.out")), "receiver");
    let total = a + b;
    assert!(
        total > 0.9 * payload_mbps(10.0) && total <= payload_mbps(10.0) * 1.01,
        "total {total}"
    );
    let (lo, hi) = (a.min(b), a.max(b));
    assert!(lo / hi > 0.6, "unfair: alice {a:.2} bob {b:.2} Mbit/s");
    assert_nothing_left();
}

#[test]
fn wifi_goes_dark_between_5_and_20_seconds_while_cellular_keeps_working() {
    let _g = lock();
    let dir = out_dir("wifi");
    let example = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/wifi-cellular.toml"
    );
    // As README.md and docs/guide.md print it (docs_examples.rs leaves this run to here).
    let o = run(&["run", example, "-o", dir.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("wifi"), "{}", text(&o.stderr));
    let wifi = link_log(&dir, "wifi", Side::Up);
    let sent: Vec<f64> = wifi
        .iter()
        .filter(|l| l.event == EventKind::Dequeue)
        .map(|l| l.time_s())
        .collect();
    let dark: Vec<f64> = wifi
        .iter()
        .filter(|l| cause(l) == "down")
        .map(|l| l.time_s())
        .collect();
    assert!(
        sent.iter().any(|t| *t < 5.0) && sent.iter().any(|t| *t > 20.0),
        "wifi works before and after"
    );
    assert!(
        sent.iter().all(|t| *t < 5.0 || *t >= 20.0),
        "nothing crosses wifi while dark"
    );
    assert!(
        dark.len() > 100 && dark.iter().all(|t| (5.0..20.0).contains(t)),
        "{} dark drops",
        dark.len()
    );
    let cell = link_log(&dir, "cell", Side::Up);
    let cell_mid = cell
        .iter()
        .filter(|l| l.event == EventKind::Dequeue && (5.0..20.0).contains(&l.time_s()))
        .count();
    assert!(cell_mid > 100, "cellular carries on: {cell_mid}");
    assert!(cell.iter().all(|l| l.event != EventKind::Drop));
    assert_nothing_left();
}

#[test]
fn command_exit_status_is_the_labs_and_nothing_is_left_when_it_fails() {
    let _g = lock();
    let o = run(&["shell", "-q", "--", "sh", "-c", "exit 7"]);
    assert_eq!(o.status.code(), Some(7));
    assert_nothing_left();
    // stdout is COMMAND's alone: the lab talks on stderr.
    let o = run(&["shell", "--", "echo", "hello"]);
    assert_eq!(text(&o.stdout), "hello\n");
    assert!(text(&o.stderr).contains("lab up"));
    assert_nothing_left();
}

#[test]
fn bad_options_are_refused_with_status_2_before_anything_is_built() {
    let _g = lock();
    let cases: BTreeMap<&str, Vec<&str>> = BTreeMap::from([
        (
            "--rate: cannot read '10mbits' (try 10mbit, 500kbit, 1gbit)",
            vec!["shell", "--rate", "10mbits"],
        ),
        (
            "--queue: fifo: unknown keyword 'lim'",
            vec!["shell", "--queue", "fifo lim 5"],
        ),
        (
            "--queue: unknown queue discipline 'redq'",
            vec!["shell", "--queue", "redq"],
        ),
        (
            "--loss: cannot read '5' as a percentage",
            vec!["shell", "--loss", "5"],
        ),
        (
            "--down-trace: cannot read trace file '/nonexistent'",
            vec!["shell", "--down-trace", "/nonexistent"],
        ),
        (
            "--cc: 'warp' (host client) is not available in this kernel",
            vec!["shell", "--cc", "warp"],
        ),
        (
            "cannot read run file '/nonexistent.toml'",
            vec!["run", "/nonexistent.toml"],
        ),
        (
            "--precision: cannot read 'soon' (try 10us, 100us, 1ms, or 0)",
            vec!["shell", "--precision", "soon"],
        ),
    ]);
    for (want, args) in cases {
        let o = run(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o.stderr));
        let err = text(&o.stderr);
        assert!(err.contains(want), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "one line: {err}");
    }
    let bad = out_dir("bad.toml");
    fs::write(&bad, "[[host]]\nname = \"a\"\n[[host]]\nname = \"b\"\n[[link]]\nname = \"l\"\na = \"a\"\nb = \"c\"\n").unwrap();
    let o = run(&["run", bad.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("link 'l': b: 'c' is neither a host"),
        "{}",
        text(&o.stderr)
    );
    assert_nothing_left();
}

#[test]
fn a_lab_that_fails_half_way_leaves_nothing() {
    let _g = lock();
    // The output directory cannot be made, but only after the hosts exist.
    let o = run(&[
        "shell",
        "-o",
        "/proc/latencylab-cannot-be-here",
        "--",
        "true",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("/proc/latencylab-cannot-be-here"),
        "{}",
        text(&o.stderr)
    );
    assert_nothing_left();
}

fn spawn_lab(args: &[&str]) -> std::process::Child {
    let child = Command::new(bin())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the lab is up (its namespaces exist and COMMAND runs).
    let mine = |pid: u32| {
        lab_namespaces()
            .into_iter()
            .filter(|n| n.starts_with(&format!("ll-{pid}-")))
            .count()
    };
    // Seconds on a loaded machine; a lab that never comes up fails here, not in what follows.
    let t0 = std::time::Instant::now();
    while mine(child.id()) < 2 {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the lab's namespaces never appeared"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    child
}

#[test]
fn sigterm_and_sigint_end_the_lab_and_clean_up() {
    let _g = lock();
    for (sig, code) in [(libc::SIGTERM, 143), (libc::SIGINT, 130)] {
        let child = spawn_lab(&["shell", "--server", "sleep 60", "--", "sleep", "60"]);
        // SAFETY: kill with a plain pid and signal number.
        unsafe { libc::kill(child.id() as i32, sig) };
        let o = child.wait_with_output().unwrap();
        assert_eq!(
            o.status.code(),
            Some(code),
            "signal {sig}: {}",
            text(&o.stderr)
        );
        assert_nothing_left();
    }
}

#[test]
fn a_killed_labs_leftovers_are_removed_by_the_next_one() {
    let _g = lock();
    let mut child = spawn_lab(&["shell", "-q", "--", "sleep", "60"]);
    // SAFETY: kill with a plain pid and signal number.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    child.wait().unwrap();
    let left = lab_namespaces();
    assert!(
        left.iter()
            .any(|n| n.starts_with(&format!("ll-{}-", child.id()))),
        "SIGKILL leaves namespaces: {left:?}"
    );
    let o = run(&["shell", "--", "true"]);
    assert!(o.status.success());
    assert!(
        text(&o.stderr).contains("removed what an earlier lab left behind"),
        "{}",
        text(&o.stderr)
    );
    assert_nothing_left();
}

#[test]
fn programs_under_a_shell_get_to_write_their_results_when_the_lab_ends() {
    let _g = lock();
    let dir = out_dir("shell-child");
    let file = out_dir("shell-child.toml");
    // The probe runs for 30 s but the lab for 3: at the end it gets SIGTERM and must be allowed
    // to write its summary, even though its shell (`sh -c`, not the last command) exits first.
    fs::write(
        &file,
        r#"duration = "3s"
[[host]]
name = "a"
[[host]]
name = "b"
[[link]]
name = "l"
a = "a"
b = "b"
rtt = "10ms"
[[program]]
host = "b"
run = "latencylab probe-server -o /dev/null"
[[program]]
name = "probe"
host = "a"
at = "200ms"
run = "latencylab probe-client b --duration 30s -o $LATENCYLAB_OUT/p.jsonl; echo after"
"#,
    )
    .unwrap();
    let o = run(&[
        "run",
        file.to_str().unwrap(),
        "-q",
        "-o",
        dir.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let lines = json_lines(&dir.join("p.jsonl"));
    assert!(
        lines.iter().any(|v| v["type"] == "probe_summary"),
        "no summary: {lines:?}"
    );
    assert_nothing_left();
}

#[test]
fn without_root_the_lab_runs_in_a_user_namespace_of_its_own() {
    let _g = lock();
    // A copy the unprivileged user can reach, wherever the checkout is.
    let dir = out_dir("nobody");
    fs::create_dir_all(&dir).unwrap();
    let exe = dir.join("latencylab");
    fs::copy(real_bin(), &exe).unwrap();
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
    let o = Command::new("runuser")
        .args([
            "-u",
            "nobody",
            "--",
            exe.to_str().unwrap(),
            "shell",
            "--",
            "true",
        ])
        .current_dir(&dir)
        .stdin(Stdio::null())
        .output()
        .expect("runuser (util-linux) runs");
    // Where the machine forbids it, one line says which setting (more in tests/rootless.rs).
    let tun_open = fs::metadata("/dev/net/tun").unwrap().permissions().mode() & 0o006 == 0o006;
    if tun_open {
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
        assert!(text(&o.stderr).contains("lab up"), "{}", text(&o.stderr));
    } else {
        assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
        assert!(text(&o.stderr).contains("/dev/net/tun is not open to you"));
        assert_eq!(text(&o.stderr).lines().count(), 1);
    }
    let _ = fs::remove_dir_all(&dir);
    assert_nothing_left();
}
