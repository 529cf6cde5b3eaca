//! `latencylab fallback-check` on real clients: curl (which does Happy Eyeballs) gets through
//! the dual-stack and IPv6-only scenarios in time; `fallback-client --mode default`, which
//! connects to the first address only, fails the IPv6 blackhole and is too slow on a slow
//! IPv6, with verdicts that say so. Needs root, /dev/net/tun, tcpdump and curl (scripts/test
//! installs them). Each run ends with the check that nothing was left behind.

mod common;

use common::*;

/// The table's line for `scenario`.
fn line<'a>(report: &'a str, scenario: &str) -> &'a str {
    report
        .lines()
        .find(|l| l.starts_with(scenario))
        .unwrap_or_else(|| panic!("no line for {scenario} in:\n{report}"))
}

#[test]
fn curl_gets_through_the_dual_stack_and_ipv6_only_scenarios_in_time() {
    let _l = lock();
    let dir = out_dir("fallback-check-curl");
    let d = dir.display().to_string();
    let o = run(&[
        "fallback-check",
        "--scenario",
        "ipv6-blackhole",
        "--scenario",
        "ipv6-slow",
        "--scenario",
        "ipv6-only-nat64",
        "--timeout",
        "5s",
        "-o",
        &d,
        "--",
        "curl",
        "-s",
        "-o",
        "/dev/null",
        "http://server/",
    ]);
    let report = text(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{report}");
    for s in ["ipv6-blackhole", "ipv6-slow", "ipv6-only-nat64"] {
        let l = line(&report, s);
        assert!(l.contains(" ms  ok: within "), "{l}");
        let pcap = dir.join(s).join("captures").join("client-eth0.pcap");
        assert!(pcap.exists(), "{} missing", pcap.display());
    }
    // curl tried IPv6 first and raced IPv4 where IPv6 passed nothing.
    assert!(
        report.contains("attempts: IPv6 eth0 at +0 ms: no answer; IPv4 eth0 at +"),
        "{report}"
    );
    assert!(
        report.contains("IPv6 (NAT64) eth0 at +0 ms: got data"),
        "{report}"
    );
    assert!(report.contains("RFC 8305"), "{report}");
    assert!(report.contains("evidence is kept in"), "{report}");
    assert_nothing_left();
}

#[test]
fn a_client_that_tries_only_the_first_address_fails_the_ipv6_blackhole() {
    let _l = lock();
    let o = run(&[
        "fallback-check",
        "--scenario",
        "ipv6-blackhole",
        "--scenario",
        "ipv6-slow",
        "--timeout",
        "4s",
        "--server",
        "exec latencylab fallback-server --no-mptcp",
        "--",
        bin(),
        "fallback-client",
        "server",
        "--mode",
        "default",
        "--duration",
        "1s",
        "--timeout",
        "4s",
    ]);
    let report = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{report}");
    let l = line(&report, "ipv6-blackhole");
    assert!(l.contains("failed  NOT: no first byte in 4 s"), "{l}");
    assert!(
        l.contains("it kept trying IPv6 over eth0 only and never tried another address"),
        "{l}"
    );
    // On the slow IPv6 it gets through, two slow round trips later: too late.
    let l = line(&report, "ipv6-slow");
    assert!(l.contains("NOT: later than 340 ms"), "{l}");
    let ms: f64 = l
        .split_whitespace()
        .nth(1)
        .and_then(|x| x.parse().ok())
        .unwrap_or_else(|| panic!("{l}"));
    assert!(ms >= 600.0, "{l}");
    assert!(
        report.contains("now removed (give -o DIR to keep it)"),
        "{report}"
    );
    assert_nothing_left();
}

#[test]
fn bad_options_are_usage_errors() {
    let o = run(&["fallback-check", "--scenario", "ipv6-dead", "--", "true"]);
    assert_eq!(o.status.code(), Some(2));
    let e = text(&o.stderr);
    assert!(
        e.contains("ipv6-dead") && e.contains("ipv6-blackhole"),
        "{e}"
    );
    let o = run(&["fallback-check"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("needs a COMMAND"));
    let o = run(&["fallback-check", "--timeout", "0s", "--", "true"]);
    assert_eq!(o.status.code(), Some(2));
}
