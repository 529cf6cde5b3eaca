//! End-to-end tests of `--nat64` labs in real network namespaces: an
//! IPv6-only client that reaches an IPv4-only server through the lab's DNS64 and NAT64. They
//! need root, /dev/net/tun, tcpdump, ping, getent, python3 and strace. Each test runs the real
//! `latencylab` binary and then checks that nothing was left behind.

mod common;

use common::*;

use std::fs;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

// --- Helpers ---

/// The resolved lab of a run with `-o`.
fn lab_json(dir: &Path) -> serde_json::Value {
    read_json(&dir.join("lab.json"))
}

fn summary_json(dir: &Path) -> serde_json::Value {
    read_json(&dir.join("summary.json"))
}

/// The server's IPv4 address as the lab configured it, and its address under 64:ff9b::/96
/// (RFC 6052 §2.2: the IPv4 address in the last 32 bits).
fn server_addrs(dir: &Path) -> (Ipv4Addr, Ipv6Addr) {
    let lab = lab_json(dir);
    let server = lab["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["name"] == "server")
        .unwrap();
    let v4: Ipv4Addr = server["interfaces"][0]["ipv4"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let [a, b, c, d] = v4.octets();
    let v6 = Ipv6Addr::new(
        0x64,
        0xff9b,
        0,
        0,
        0,
        0,
        u16::from_be_bytes([a, b]),
        u16::from_be_bytes([c, d]),
    );
    (v4, v6)
}

/// Runs `script` (sh) as COMMAND in a `--nat64` lab with `probe-server` on the server.
fn nat64_lab(name: &str, script: &str) -> (PathBuf, Output) {
    let dir = out_dir(name);
    let o = run(&[
        "shell",
        "--nat64",
        "--rtt",
        "10ms",
        "-q",
        "-o",
        dir.to_str().unwrap(),
        "--server",
        "latencylab probe-server",
        "--",
        "sh",
        "-c",
        script,
    ]);
    (dir, o)
}

/// Addresses in the first column of `getent ahosts*` output.
fn getent_addrs(out: &str, section: &str) -> Vec<String> {
    let mut addrs: Vec<String> = out
        .split("== ")
        .find_map(|s| s.strip_prefix(section))
        .unwrap_or_else(|| panic!("no section {section} in {out}"))
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next().map(String::from))
        .collect();
    addrs.sort();
    addrs.dedup();
    addrs
}

// --- Tests ---

#[test]
fn the_client_resolves_the_ipv4_only_server_to_its_synthesised_address_and_ipv4only_arpa_to_the_well_known_pair(
) {
    let _g = lock();
    let (dir, o) = nat64_lab(
        "getent",
        "echo '== server'; getent ahosts server; echo '== ipv4only'; getent ahostsv6 ipv4only.arpa",
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    let (_, synthesised) = server_addrs(&dir);
    assert_eq!(
        getent_addrs(&out, "server"),
        vec![synthesised.to_string()],
        "{out}"
    );
    assert_eq!(
        getent_addrs(&out, "ipv4only"),
        vec![
            "64:ff9b::c000:aa".to_string(),
            "64:ff9b::c000:ab".to_string()
        ],
        "{out}"
    );
    let s = summary_json(&dir);
    let asked: Vec<String> = s["nat64"]["dns"]["queries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| {
            format!(
                "{} {}",
                q["name"].as_str().unwrap(),
                q["type"].as_str().unwrap()
            )
        })
        .collect();
    assert!(asked.contains(&"server AAAA".to_string()), "{asked:?}");
    let _ = fs::remove_dir_all(&dir);
    assert_nothing_left();
}

#[test]
fn the_dns64_answers_over_tcp_too() {
    let _g = lock();
    // RES_OPTIONS=use-vc makes glibc's resolver use TCP (resolv.conf(5)).
    let (dir, o) = nat64_lab(
        "tcp-dns",
        "echo '== ipv4only'; RES_OPTIONS=use-vc getent ahostsv6 ipv4only.arpa",
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert_eq!(
        getent_addrs(&out, "ipv4only"),
        vec![
            "64:ff9b::c000:aa".to_string(),
            "64:ff9b::c000:ab".to_string()
        ],
        "{out}"
    );
    let s = summary_json(&dir);
    let dns = &s["nat64"]["dns"];
    assert!(dns["answered_tcp"].as_u64().unwrap() >= 1, "{s}");
    assert_eq!(dns["answered"].as_u64(), Some(0), "no UDP: {s}");
    let _ = fs::remove_dir_all(&dir);
    assert_nothing_left();
}

#[test]
fn tcp_and_udp_reach_the_ipv4_only_server_by_name_and_the_server_sees_the_nat64_address() {
    let _g = lock();
    let (dir, o) = nat64_lab(
        "probe",
        "latencylab probe-client server --duration 1s --interval 100ms",
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    for proto in ["tcp", "udp"] {
        let summary: serde_json::Value = out
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find(|v| v["type"] == "probe_summary" && v["proto"] == proto)
            .unwrap_or_else(|| panic!("no {proto} summary in {out}"));
        assert!(summary["received"].as_u64().unwrap() >= 5, "{summary}");
    }
    // What the server saw: IPv4 only, every packet between it and the NAT64's pool address.
    let lab = lab_json(&dir);
    let pool4 = lab["nat64"]["pool4"].as_str().unwrap().to_string();
    let (server4, _) = server_addrs(&dir);
    let pcap = dir.join("captures/server-eth0.pcap");
    let t = Command::new("tcpdump")
        .args(["-nr", pcap.to_str().unwrap()])
        .output()
        .expect("tcpdump is installed");
    assert!(t.status.success(), "{}", text(&t.stderr));
    let lines = text(&t.stdout);
    assert!(lines.lines().count() >= 20, "{lines}");
    for l in lines.lines() {
        assert!(l.contains(" IP "), "not IPv4: {l}");
        let from_nat = l.contains(&format!("{pool4}.")) && l.contains(&format!("> {server4}."));
        let to_nat = l.contains(&format!("{server4}.")) && l.contains(&format!("> {pool4}."));
        assert!(from_nat || to_nat, "{l}");
    }
    assert!(lines.contains("UDP"), "{lines}");
    assert!(lines.contains("Flags [S]"), "{lines}");
    let s = summary_json(&dir);
    assert!(s["nat64"]["translated_6to4"].as_u64().unwrap() >= 20, "{s}");
    assert!(s["nat64"]["translated_4to6"].as_u64().unwrap() >= 20, "{s}");
    let _ = fs::remove_dir_all(&dir);
    assert_nothing_left();
}

#[test]
fn connecting_to_the_servers_ipv4_literal_fails_at_once_on_the_client() {
    let _g = lock();
    let dir = out_dir("literal-probe");
    // The address comes from a first lab's lab.json, so nothing here is written in.
    let (d0, o0) = nat64_lab("literal-addr", "true");
    assert!(o0.status.success(), "{}", text(&o0.stderr));
    let (server4, _) = server_addrs(&d0);
    let _ = fs::remove_dir_all(&d0);
    let script = format!(
        "import socket, errno\ntry:\n    socket.create_connection(('{server4}', 5202), timeout=3)\n    print('connected')\nexcept OSError as e:\n    print(errno.errorcode.get(e.errno, e.errno))\n"
    );
    let o = run(&[
        "shell",
        "--nat64",
        "-q",
        "-o",
        dir.to_str().unwrap(),
        "--server",
        "latencylab probe-server",
        "--",
        "python3",
        "-c",
        &script,
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout).trim(), "ENETUNREACH");
    let _ = fs::remove_dir_all(&dir);
    assert_nothing_left();
}

#[test]
fn ping_to_the_synthesised_address_is_answered() {
    let _g = lock();
    let (d0, o0) = nat64_lab("ping-addr", "true");
    assert!(o0.status.success(), "{}", text(&o0.stderr));
    let (_, synthesised) = server_addrs(&d0);
    let _ = fs::remove_dir_all(&d0);
    let (dir, o) = nat64_lab("ping", &format!("ping -c 3 -i 0.2 -W 2 {synthesised}"));
    assert!(
        o.status.success(),
        "{}\n{}",
        text(&o.stdout),
        text(&o.stderr)
    );
    assert!(
        text(&o.stdout).contains("3 received"),
        "{}",
        text(&o.stdout)
    );
    let s = summary_json(&dir);
    assert_eq!(s["nat64"]["sessions_created"].as_u64(), Some(1), "{s}");
    let _ = fs::remove_dir_all(&dir);
    assert_nothing_left();
}

#[test]
fn bad_packets_are_dropped_and_counted_and_the_lab_carries_on() {
    let _g = lock();
    // Raw sockets send what they are given: a UDP header claiming more bytes than follow, and
    // an ESP packet (an extension the translator does not handle), both to the server's
    // synthesised address; then a normal exchange.
    let script = r#"
import socket, struct, subprocess, sys
dst = socket.getaddrinfo('server', 9, socket.AF_INET6)[0][4][0]
udp = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_UDP)
udp.sendto(struct.pack('!HHHH', 40000, 9, 200, 0) + b'short', (dst, 0))
esp = socket.socket(socket.AF_INET6, socket.SOCK_RAW, 50)
esp.sendto(b'\x00\x00\x01\x00' * 4, (dst, 0))
sys.exit(subprocess.call(['latencylab', 'probe-client', 'server', '--duration', '0.5s', '-o', '/dev/null']))
"#;
    let (dir, o) = nat64_lab(
        "bad",
        &format!("python3 -c \"{}\"", script.replace('"', "\\\"")),
    );
    assert!(
        o.status.success(),
        "{}\n{}",
        text(&o.stdout),
        text(&o.stderr)
    );
    let s = summary_json(&dir);
    let drops = &s["nat64"]["drops"];
    assert!(
        drops["unsupported-extension"].as_u64().unwrap_or(0) >= 1,
        "{s}"
    );
    let total: u64 = drops
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert!(total >= 2, "{s}");
    assert!(s["nat64"]["translated_4to6"].as_u64().unwrap() > 0, "{s}");
    let _ = fs::remove_dir_all(&dir);
    assert_nothing_left();
}

#[test]
fn a_run_file_puts_the_translator_at_a_router_between_links() {
    let _g = lock();
    let dir = out_dir("runfile");
    fs::create_dir_all(&dir).unwrap();
    let file = dir.join("n.toml");
    fs::write(
        &file,
        r#"
[[host]]
name = "phone"
[[host]]
name = "web"
[[router]]
name = "carrier"
[[link]]
name = "access"
a = "phone"
b = "carrier"
rtt = "20ms"
[[link]]
name = "core"
a = "carrier"
b = "web"
[nat64]
at = "carrier"
ipv6_only = ["phone"]
ipv4_only = ["web"]
[[program]]
host = "web"
run = "latencylab probe-server"
[[program]]
host = "phone"
at = "0.3s"
run = "latencylab probe-client web --proto tcp --duration 0.5s"
wait = true
"#,
    )
    .unwrap();
    let out = dir.join("out");
    let o = run(&[
        "run",
        file.to_str().unwrap(),
        "-q",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let probe = fs::read_to_string(out.join("programs/phone-2.out")).unwrap();
    assert!(probe.contains("\"proto\":\"tcp\",\"seq\""), "{probe}");
    // Both links carried traffic: IPv6 on the access link, IPv4 on the core.
    let s = summary_json(&out);
    for l in s["links"].as_array().unwrap() {
        assert!(l["packets_out"].as_u64().unwrap() > 0, "{l}");
    }
    let _ = fs::remove_dir_all(&dir);
    assert_nothing_left();
}

// --- ipv6-check ---

/// `latencylab ipv6-check -o DIR --server probe-server -- python3 -c SCRIPT`.
fn ipv6_check(name: &str, script: &str) -> (PathBuf, Output) {
    let dir = out_dir(name);
    let o = run(&[
        "ipv6-check",
        "-q",
        "-o",
        dir.to_str().unwrap(),
        "--server",
        "latencylab probe-server",
        "--",
        "sh",
        "-c",
        &format!("exec python3 -c \"{}\"", script.replace('"', "\\\"")),
    ]);
    (dir, o)
}

#[test]
fn ipv6_check_names_an_ipv4_literal_as_the_failure() {
    let _g = lock();
    // The literal is the server's own address, handed to the program by the lab.
    let (dir, o) = ipv6_check(
        "check-literal",
        "import os, socket\ntry:\n    socket.create_connection((os.environ['LATENCYLAB_SERVER'], 5202), timeout=2)\nexcept OSError:\n    raise SystemExit(1)",
    );
    let out = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{out}\n{}", text(&o.stdout));
    let (server4, _) = server_addrs(&dir);
    assert!(
        out.contains(&format!(
            "connect() to the IPv4 literal {server4}:5202 failed (ENETUNREACH)"
        )),
        "{out}"
    );
    assert!(out.contains("hint: "), "{out}");
    assert!(out.contains("evidence: strace of the client"), "{out}");
    let _ = fs::remove_dir_all(&dir);
    assert_nothing_left();
}

#[test]
fn ipv6_check_passes_a_program_that_connects_by_name() {
    let _g = lock();
    let (dir, o) = ipv6_check(
        "check-name",
        "import socket\ns = socket.create_connection(('server', 5202), timeout=2)\ns.sendall(b'x' * 24)\ns.close()",
    );
    let out = text(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{out}\n{}", text(&o.stdout));
    assert!(out.contains("no findings"), "{out}");
    let _ = fs::remove_dir_all(&dir);
    assert_nothing_left();
}

#[test]
fn ipv6_check_traces_a_failed_connect_back_to_an_a_only_lookup() {
    let _g = lock();
    let (dir, o) = ipv6_check(
        "check-a-only",
        "import socket\nai = socket.getaddrinfo('server', 5202, socket.AF_INET, socket.SOCK_STREAM)\ns = socket.socket(socket.AF_INET)\ntry:\n    s.connect(ai[0][4])\nexcept OSError:\n    raise SystemExit(1)",
    );
    let out = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{out}\n{}", text(&o.stdout));
    assert!(
        out.contains("the lookup of 'server' asked for A records only"),
        "{out}"
    );
    assert!(out.contains("evidence: the DNS64's query log"), "{out}");
    assert!(
        out.contains("from a lookup that asked for A records only"),
        "{out}"
    );
    let _ = fs::remove_dir_all(&dir);
    assert_nothing_left();
}
