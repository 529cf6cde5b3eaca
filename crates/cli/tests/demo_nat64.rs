//! End-to-end test of `latencylab demo nat64`: the demo runs for real, in namespaces, with its
//! defaults, and its `results.json` must show what the talk says of each class of app on an
//! IPv6-only network (the host name and local synthesis work with no finding; the IPv4
//! literal, AF_INET-only code and the "is IPv4 up?" preflight break, each with
//! `ipv6-check`'s right finding) and every sample working with 464XLAT, with no finding. The report is then
//! opened in headless Chromium. Needs root, /dev/net/tun, strace and /usr/bin/chromium.

mod common;

use common::*;

use std::path::PathBuf;
use std::sync::OnceLock;

static DEMO: OnceLock<(PathBuf, String)> = OnceLock::new();

/// Runs `latencylab demo nat64 -o DIR` once; returns DIR and stdout.
fn demo() -> &'static (PathBuf, String) {
    DEMO.get_or_init(|| run_demo_in_tempdir("nat64", &["nat64"]))
}

/// The `apps` entry of the sample `name`.
fn app<'a>(r: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    r["apps"]
        .as_array()
        .expect("results.json: apps is a list")
        .iter()
        .find(|a| a["name"] == name)
        .unwrap_or_else(|| panic!("results.json: no app {name}: {r}"))
}

#[test]
fn the_samples_break_on_ipv6_only_as_the_talk_says_with_the_right_finding() {
    let (dir, stdout) = demo();
    let r = read_json(&dir.join("results.json"));
    assert_eq!(r["apps"].as_array().map(Vec::len), Some(5), "{r}");
    for (name, finding) in [
        ("v4-literal", "ipv4-literal"),
        ("af-inet-only", "af-inet-only"),
        ("preflight", "ipv4-preflight"),
    ] {
        let a = app(&r, name);
        assert_eq!(a["nat64_ok"], false, "{a}");
        assert_eq!(a["finding"], finding, "{a}");
    }
    for name in ["getaddrinfo", "local-synthesis"] {
        let a = app(&r, name);
        assert_eq!(a["nat64_ok"], true, "{a}");
        assert!(a["finding"].is_null(), "{a}");
        // Through the NAT64: an address under the Well-Known Prefix.
        let addr = a["ipv6_only"]["addr"].as_str().unwrap_or_default();
        assert!(addr.starts_with("[64:ff9b::"), "{a}");
        assert!(
            a["ipv6_only"]["ttfb_ms"].as_f64().unwrap_or(0.0) > 40.0,
            "{a}"
        );
    }
    // The A-only lookup behind the AF_INET-only code is named too.
    let findings = &app(&r, "af-inet-only")["ipv6_only"]["findings"];
    assert!(
        findings
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f == "a-only-lookup"),
        "{findings}"
    );
    assert!(
        stdout.contains("ok  v4-literal: breaks on IPv6-only and ipv6-check names ipv4-literal"),
        "{stdout}"
    );
    assert!(
        dir.join("ipv6-only/preflight/strace.txt").exists(),
        "the evidence is kept"
    );
    assert_nothing_left();
}

#[test]
fn every_sample_works_with_464xlat_and_what_the_clat_hides_is_a_note() {
    let (dir, stdout) = demo();
    let r = read_json(&dir.join("results.json"));
    for a in r["apps"].as_array().unwrap() {
        assert_eq!(a["clat_ok"], true, "{a}");
        let findings = a["clat"]["findings"].as_array().expect("clat findings");
        assert!(findings.is_empty(), "{a}");
    }
    // The literal went through the CLAT, which ipv6-check says would fail without one.
    let report = std::fs::read_to_string(dir.join("clat/v4-literal/ipv6-check.txt")).unwrap();
    assert!(
        report.contains("the IPv4 literal 10.77.2.1:5202 went through the CLAT"),
        "{report}"
    );
    assert!(
        stdout.contains("ok  every sample works with 464XLAT (5 of 5)"),
        "{stdout}"
    );
    assert_nothing_left();
}

#[test]
fn nat64_report_renders_in_headless_chromium() {
    let (dir, _) = demo();
    let dom = check_renders(&dir.join("report.html"), &[]);
    assert!(dom.contains("464XLAT"));
    assert!(dom.contains("ipv4only.arpa"));
}

#[test]
fn a_v4_literal_sample_given_a_name_is_a_usage_error_quoting_it() {
    let out = run(&["nat64-sample", "--class", "v4-literal", "server", "5202"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(err.contains("'server' is not an IPv4 address"), "{err}");
}
