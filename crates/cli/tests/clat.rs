//! End-to-end tests of `--clat` (464XLAT, RFC 6877) in real network namespaces: the IPv6-only
//! client of a `--nat64` lab also gets 192.0.0.2/29 and an IPv4 default route into a CLAT on
//! its side of the lab, so IPv4 literals reach the IPv4-only server through the CLAT and the
//! NAT64, while names still go over IPv6. They need root, /dev/net/tun, tcpdump, ping and
//! curl. Each test runs the real `latencylab` binary and then checks that nothing was left
//! behind.

mod common;

use common::*;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The server's address (interface 2 of the shell lab) and the NAT64's pool address.
const SERVER4: &str = "10.77.2.1";
const NAT64_POOL4: &str = "10.77.0.64";

/// The HTTP server: latencylab's own (hyper), serving an example page on port 8080.
fn http_server() -> String {
    let page = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/pages/portal.toml");
    format!(
        "exec {} web-server --page {} --port 8080",
        bin(),
        page.display()
    )
}

/// Runs `script` (sh) as COMMAND in a `--nat64` lab, with `--clat` when `clat`, the HTTP
/// server on the server.
fn lab(name: &str, clat: bool, script: &str) -> (PathBuf, Output) {
    let dir = out_dir(name);
    let server = http_server();
    let mut args = vec!["shell", "--nat64"];
    if clat {
        args.push("--clat");
    }
    args.extend_from_slice(&[
        "--rtt",
        "10ms",
        "-o",
        dir.to_str().unwrap(),
        "--server",
        &server,
        "--",
        "sh",
        "-c",
        script,
    ]);
    (dir.clone(), run(&args))
}

/// `tcpdump -nr` of one of the run's captures, one line per packet.
fn capture(dir: &Path, host: &str) -> String {
    let pcap = dir.join(format!("captures/{host}-eth0.pcap"));
    let t = Command::new("tcpdump")
        .args(["-nr", pcap.to_str().unwrap()])
        .output()
        .expect("tcpdump is installed");
    text(&t.stdout)
}

/// curl waits for the server to listen (it starts with the lab) and gives up after a while.
const CURL: &str = "curl -sf -m 10 --retry 10 --retry-connrefused --retry-delay 1 -o /dev/null";

#[test]
fn an_ipv4_literal_fails_on_an_ipv6_only_network_and_works_through_the_clat() {
    let _g = lock();
    let script = format!("ping -c1 -W2 {SERVER4} && {CURL} http://{SERVER4}:8080/");

    let (dir, o) = lab("clat-off", false, &script);
    assert!(!o.status.success(), "without a CLAT there is no IPv4 route");
    assert!(
        text(&o.stderr).contains("Network is unreachable"),
        "{}",
        text(&o.stderr)
    );
    let _ = fs::remove_dir_all(&dir);

    let (dir, o) = lab("clat-on", true, &script);
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("CLAT on client: 192.0.0.2/29"),
        "the lab says where the CLAT is: {err}"
    );
    let s = read_json(&dir.join("summary.json"));
    let c = &s["nat64"]["clat"][0];
    assert_eq!(c["host"], "client");
    assert_eq!(c["prefix"], "64:ff9b::/96");
    assert!(
        c["prefix_source"].as_str().unwrap().contains(
            "RFC 7050: the lab's DNS64 answered ipv4only.arpa AAAA with 64:ff9b::c000:aa"
        ),
        "{c}"
    );
    let n = |k: &str| c[k].as_u64().unwrap();
    assert!(n("translated_4to6") >= 4, "ping and a TCP connection: {c}");
    assert!(n("translated_6to4") >= 4, "{c}");
    // The CLAT's IPv6 went on to the NAT64 (packets still on the path when COMMAND ended are
    // not, so the counts need not be equal).
    assert!(s["nat64"]["translated_6to4"].as_u64().unwrap() >= 4, "{s}");
    // The IPv4 route's MTU leaves room for translation: neither translator had to answer a
    // packet as too big.
    assert_eq!(c["drops"], serde_json::json!({}), "{c}");
    assert_eq!(s["nat64"]["drops"], serde_json::json!({}), "{s}");
    // The client's kernel sent and got IPv4 from its private address...
    let client = capture(&dir, "client");
    assert!(
        client.contains(&format!("IP 192.0.0.2 > {SERVER4}: ICMP echo request")),
        "{client}"
    );
    assert!(
        client.contains(&format!("IP {SERVER4}.8080 > 192.0.0.2.")),
        "{client}"
    );
    // ... and the server met the NAT64's pool address, never 192.0.0.2.
    let server = capture(&dir, "server");
    assert!(
        server.contains(&format!("IP {NAT64_POOL4} > {SERVER4}: ICMP echo request")),
        "{server}"
    );
    assert!(!server.contains("192.0.0.2"), "{server}");
    let _ = fs::remove_dir_all(&dir);
    assert_nothing_left();
}

#[test]
fn a_name_still_goes_over_ipv6_when_the_client_has_a_clat() {
    let _g = lock();
    let (dir, o) = lab(
        "clat-name",
        true,
        &format!("getent ahosts server; {CURL} http://server:8080/"),
    );
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    let client = capture(&dir, "client");
    // The connection to the server went to its synthesised address, not through the CLAT.
    assert!(
        client.contains("> 64:ff9b::a4d:201.8080: Flags [S]"),
        "{client}"
    );
    assert!(!client.contains(".8080 > 192.0.0.2"), "{client}");
    let s = read_json(&dir.join("summary.json"));
    assert_eq!(
        s["nat64"]["clat"][0]["translated_4to6"], 0,
        "nothing went through the CLAT: {s}"
    );
    let _ = fs::remove_dir_all(&dir);
    assert_nothing_left();
}

#[test]
fn clat_without_nat64_or_with_a_bad_prefix_is_a_usage_error() {
    let o = run(&["shell", "--clat", "--", "true"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("--clat needs --nat64"),
        "{}",
        text(&o.stderr)
    );
    let o = run(&[
        "shell",
        "--nat64",
        "--clat-prefix",
        "64:ff9b::/95",
        "--",
        "true",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("--clat-prefix:"),
        "{}",
        text(&o.stderr)
    );
}
