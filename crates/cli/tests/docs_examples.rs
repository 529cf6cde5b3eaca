//! The docs cannot drift from the binary: every command in README.md and docs/*.md, and every
//! example in `--help`, is run here as printed (long runs shortened) with the exit status and
//! the lines its output must contain, or checked against `--help` (a usage synopsis such as
//! `latencylab bulk-server [--port 5201]`), or marked in the doc as illustrative by a visible
//! comment: a block whose first line is `# illustrative: WHY`, or a line ending in
//! `# illustrative: WHY`.
//!
//! A command found in no entry of `EXAMPLES` fails the test with the place it was found, so a
//! new doc section is tested or marked; an entry found nowhere fails too, so the table cannot
//! keep testing what the docs no longer say.
//!
//! A small harness of our own rather than `trycmd`: trycmd runs commands it finds in `.md`
//! files, but compares whole outputs (ours hold timings that change on every run) and runs each
//! command on its own, while ours need root, a scratch directory shared by a sequence
//! (`shell -o out/run1`, then `analyze out/run1/...`), fixtures (a pcapng.gz, `./my-app`) and
//! shortened durations.

mod common;

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{assert_nothing_left, bin, lock, tempdir, text};

/// What to do with one documented command.
enum Check {
    /// Run it (after `setup`, with each `(from, to)` of `shorten` applied, inside `wrap`) in the scratch
    /// directory: its status must be `exit` and its stdout + stderr must contain each string.
    Run {
        setup: &'static str,
        /// A command line around the example, `{}` standing for it: the lab a traffic
        /// program's example needs (its server, or its client), or `&& cat` of its output file.
        wrap: &'static str,
        shorten: &'static [(&'static str, &'static str)],
        exit: i32,
        contains: &'static [&'static str],
    },
    /// Too long to run here whole (a demo, a 25 s run file, a sweep): the command line must be
    /// accepted, which `latencylab ... --help` shows without running it; the command itself is
    /// run end to end by the test file named.
    Parses { run_by: &'static str },
    /// Not runnable as printed, and a `--help` text has no room for a marker: the reason.
    Illustrative(&'static str),
}

struct Example {
    cmd: &'static str,
    check: Check,
}

const fn run(exit: i32, contains: &'static [&'static str]) -> Check {
    Check::Run {
        setup: "",
        wrap: "",
        shorten: &[],
        exit,
        contains,
    }
}

/// A traffic program's example, run in a lab by `wrap`, shortened by `shorten`.
const fn in_lab(
    wrap: &'static str,
    shorten: &'static [(&'static str, &'static str)],
    contains: &'static [&'static str],
) -> Check {
    Check::Run {
        setup: "",
        wrap,
        shorten,
        exit: 0,
        contains,
    }
}

/// Every command of the docs and of `--help`, in the order they run (later ones read what
/// earlier ones leave in the scratch directory).
const EXAMPLES: &[Example] = &[
    Example {
        cmd: "sudo latencylab shell --down 10mbit --up 1mbit --rtt 40ms --queue fq_codel --server 'latencylab bulk-server' -o out/run1 -- latencylab bulk-client server",
        check: Check::Run {
            setup: "",
            wrap: "",
            shorten: &[("bulk-client server", "bulk-client server --duration 3s")],
            exit: 0,
            contains: &["\"total\"", "path-down:", "asked 10.000mbit"],
        },
    },
    Example {
        cmd: "sudo latencylab shell --down 10mbit --up 1mbit --rtt 40ms --server 'latencylab bulk-server' -o out/run1 -- latencylab bulk-client server",
        check: Check::Run {
            setup: "",
            wrap: "",
            shorten: &[("bulk-client server", "bulk-client server --duration 3s")],
            exit: 0,
            contains: &["\"total\""],
        },
    },
    Example {
        cmd: "sudo latencylab shell --down 10mbit --up 1mbit --rtt 40ms --queue 'fifo limit 1000' --server 'latencylab bulk-server' -o out/run1 -- latencylab bulk-client server --duration 10s",
        check: Check::Run {
            setup: "",
            wrap: "",
            shorten: &[("--duration 10s", "--duration 3s")],
            exit: 0,
            contains: &["\"total\""],
        },
    },
    Example {
        cmd: "sudo latencylab shell --down 10mbit --up 1mbit --rtt 40ms --server 'latencylab web-server --page examples/pages/portal.toml' -- curl -s http://server/",
        check: run(0, &["<html"]),
    },
    Example {
        cmd: "sudo latencylab run examples/wifi-cellular.toml -o out/wifi",
        check: Check::Parses { run_by: "lab.rs" },
    },
    Example {
        cmd: "sudo latencylab shell --nat64 -- getent ahosts server",
        check: run(0, &["64:ff9b::"]),
    },
    Example {
        cmd: "sudo latencylab ipv6-check --server 'latencylab probe-server' -- ./my-app server",
        check: run(0, &[]),
    },
    Example {
        cmd: "sudo latencylab fallback-check -- curl -s -o /dev/null http://server/",
        check: Check::Run {
            setup: "",
            wrap: "",
            shorten: &[("fallback-check --", "fallback-check --timeout 3s --")],
            // curl races IPv6 and IPv4, not interfaces: the dead first interface stops it.
            exit: 1,
            contains: &["ipv6-blackhole", "ok: within 340 ms", "NOT: no first byte in 3 s"],
        },
    },
    Example {
        cmd: "sudo latencylab shell --nat64 --clat --server 'latencylab probe-server' -- ping -c1 10.77.2.1",
        check: run(0, &["1 received", "CLAT on client: 192.0.0.2/29"]),
    },
    Example {
        cmd: "sudo latencylab shell --nat64 --rtt 40ms --server 'latencylab probe-server' -- latencylab probe-client server",
        check: Check::Run {
            setup: "",
            wrap: "",
            shorten: &[("probe-client server", "probe-client server --duration 2s")],
            exit: 0,
            contains: &["\"rtt_ms\""],
        },
    },
    Example {
        cmd: "latencylab analyze out/run1/captures/server-eth0.pcap",
        check: run(0, &["server-eth0.pcap"]),
    },
    Example {
        cmd: "latencylab analyze out/run1/captures/client-eth0.pcap",
        check: run(0, &["client-eth0.pcap"]),
    },
    Example {
        cmd: "latencylab analyze capture.pcapng.gz --json | jq .",
        check: Check::Run {
            setup: "editcap -F pcapng out/run1/captures/client-eth0.pcap capture.pcapng && gzip -f capture.pcapng",
            wrap: "",
            shorten: &[],
            exit: 0,
            contains: &["\"connections\""],
        },
    },
    Example {
        cmd: "latencylab analyze --json capture.pcapng.gz | jq '.connections[].diagnoses'",
        check: run(0, &["["]),
    },
    Example {
        cmd: "latencylab analyze a.pcap --html report.html --plots plots/ --xplot xpl/",
        check: Check::Run {
            setup: "cp out/run1/captures/client-eth0.pcap a.pcap",
            wrap: "",
            shorten: &[],
            exit: 0,
            contains: &["report.html"],
        },
    },
    Example {
        cmd: "latencylab analyze client.pcap server.pcap --filter 'port 5201'",
        check: Check::Run {
            setup: "cp out/run1/captures/client-eth0.pcap client.pcap && cp out/run1/captures/server-eth0.pcap server.pcap",
            wrap: "",
            shorten: &[],
            exit: 0,
            contains: &["5201"],
        },
    },
    Example {
        cmd: "latencylab analyze --filter 'port 5201' --html report.html --plots plots/ client.pcap server.pcap",
        check: run(0, &["report.html"]),
    },
    Example {
        cmd: "latencylab analyze --plots plots/ --ladder-window 0.2s..0.6s client.pcap server.pcap",
        check: Check::Run {
            setup: "rm -rf plots",
            wrap: "{} && ls plots/",
            shorten: &[],
            exit: 0,
            contains: &["a_b_ladder.png", "a_b_ladder.svg"],
        },
    },
    Example {
        cmd: "latencylab shell --rtt 80ms -o out/rr --server 'latencylab rr-server' -- latencylab rr-client server --duration 1s --interval 100ms",
        check: run(0, &["\"exchange_ms\""]),
    },
    Example {
        cmd: "latencylab analyze --plots plots/ out/rr/captures/client-eth0.pcap out/rr/captures/server-eth0.pcap",
        check: Check::Run {
            setup: "rm -rf plots",
            wrap: "{} && ls plots/",
            shorten: &[],
            exit: 0,
            contains: &["nagle_delayed_ack", "a_b_ladder.png"],
        },
    },
    Example {
        cmd: "latencylab analyze --plots zoom/ --ladder-window 0.3s..0.5s out/rr/captures/client-eth0.pcap out/rr/captures/server-eth0.pcap",
        check: Check::Run {
            setup: "",
            wrap: "{} && ls zoom/",
            shorten: &[],
            exit: 0,
            contains: &["a_b_ladder.png"],
        },
    },
    Example {
        cmd: "tcpdump -i eth0 -s 96 -w - | latencylab analyze -",
        check: Check::Illustrative("a live capture of the machine's own network, until Ctrl-C"),
    },
    Example {
        cmd: "latencylab bulk-server --port 5201 --out server.jsonl",
        check: in_lab("latencylab shell --server '{}' -- latencylab bulk-client server --duration 2s && cat server.jsonl", &[], &["\"total\""]),
    },
    Example {
        cmd: "latencylab bulk-client server:5201 --direction download --duration 10s --out bulk.jsonl",
        check: in_lab("latencylab shell --server 'latencylab bulk-server' -- {} && cat bulk.jsonl", &[("--duration 10s", "--duration 2s")], &["\"total\""]),
    },
    Example {
        cmd: "latencylab bulk-server --rcvbuf 8192 --quickack --out server.jsonl",
        check: in_lab("latencylab shell --server '{}' -- latencylab bulk-client server --direction upload --write-size 1000 --duration 2s && cat server.jsonl", &[], &["\"total\""]),
    },
    Example {
        cmd: "latencylab bulk-client server --direction upload --write-size 1000 --duration 10s --out up.jsonl",
        check: in_lab("latencylab shell --server 'latencylab bulk-server --rcvbuf 8192 --quickack' -- {} && cat up.jsonl", &[("--duration 10s", "--duration 2s")], &["\"total\""]),
    },
    Example {
        cmd: "latencylab probe-server --port 5202",
        check: in_lab("latencylab shell --server '{}' -- latencylab probe-client server --duration 1s", &[], &["rtt"]),
    },
    Example {
        cmd: "latencylab probe-client server:5202 --interval 100ms --duration 30s --out probe.jsonl",
        check: in_lab("latencylab shell --server 'latencylab probe-server' -- {} && cat probe.jsonl", &[("--duration 30s", "--duration 2s")], &["rtt"]),
    },
    Example {
        cmd: "latencylab stream-server --port 5203",
        check: in_lab("latencylab shell --server '{}' -- latencylab stream-client server --duration 3s", &[], &["stall"]),
    },
    Example {
        cmd: "latencylab stream-client server:5203 --bitrate 8mbit --chunk 250ms --ahead 30s --duration 30s",
        check: in_lab("latencylab shell --server 'latencylab stream-server' -- {}", &[("--duration 30s", "--duration 3s")], &["stall"]),
    },
    Example {
        cmd: "latencylab call --connect server:6000 --mode l4s --max-rate 8mbit --duration 30s --out call.jsonl",
        check: in_lab("latencylab shell --server 'latencylab call --listen 6000 --mode l4s' -- {} && cat call.jsonl", &[("--duration 30s", "--duration 3s")], &["rate"]),
    },
    Example {
        cmd: "latencylab screen-server --mode lowat --lowat 16kb --sndbuf 120kb --out screen-server.jsonl",
        check: in_lab("latencylab shell --server '{}' -- latencylab screen-viewer server --warmup 1s --duration 3s", &[], &["click"]),
    },
    Example {
        cmd: "latencylab screen-viewer server:5204 --click-every 1s --duration 30s --out viewer.jsonl",
        check: in_lab("latencylab shell --server 'latencylab screen-server' -- {} && cat viewer.jsonl", &[("--duration 30s", "--duration 4s")], &["click"]),
    },
    Example {
        cmd: "latencylab tfo-server --port 5205 --out tfo-server.jsonl",
        check: in_lab("latencylab shell --server '{}' -- latencylab tfo-client server --count 3 && cat tfo-server.jsonl", &[], &["{"]),
    },
    Example {
        cmd: "latencylab tfo-client server:5205 --fastopen --count 30 --interval 200ms --out tfo.jsonl",
        check: in_lab("latencylab shell --server 'latencylab tfo-server' -- {} && cat tfo.jsonl", &[("--count 30", "--count 3")], &["{"]),
    },
    Example {
        cmd: "latencylab rr-server --port 5206 --nodelay",
        check: in_lab("latencylab shell --server '{}' -- latencylab rr-client server --duration 2s", &[], &["{"]),
    },
    Example {
        cmd: "latencylab rr-client server:5206 --interval 200ms --duration 20s --out rr.jsonl",
        check: in_lab("latencylab shell --server 'latencylab rr-server' -- {} && cat rr.jsonl", &[("--duration 20s", "--duration 2s")], &["{"]),
    },
    Example {
        cmd: "latencylab chunk-server --rcvbuf 4096 --quickack",
        check: in_lab("latencylab shell --server '{}' -- latencylab chunk-client server --duration 2s", &[], &["{"]),
    },
    Example {
        cmd: "latencylab chunk-client server:5207 --chunk 1000 --nodelay --duration 10s --out chunk.jsonl",
        check: in_lab("latencylab shell --server 'latencylab chunk-server' -- {} && cat chunk.jsonl", &[("--duration 10s", "--duration 2s")], &["{"]),
    },
    Example {
        cmd: "latencylab web-server --page examples/pages/portal.toml --port 8080",
        check: in_lab("latencylab shell --server '{}' -- curl -s -o /dev/null -w 'status %{http_code}' http://server:8080/", &[], &["status 200"]),
    },
    Example {
        cmd: "latencylab web-server --page examples/pages/portal.toml --port 8443 --tls --ca-out ca.pem",
        check: in_lab("latencylab shell --server '{}' -- curl -s --cacert ca.pem -o /dev/null -w 'status %{http_code}' https://server:8443/", &[], &["status 200"]),
    },
    Example {
        cmd: "latencylab rpm-server",
        check: in_lab("latencylab shell --server '{}' -- curl -sk -o /dev/null -w 'status %{http_code}' https://server:4043/small", &[], &["status 200"]),
    },
    Example {
        cmd: "latencylab rpm-server --port 443 --ca-out ca.pem",
        check: in_lab("latencylab shell --server '{}' -- curl -s --cacert ca.pem https://server/.well-known/nq", &[], &["\"small_download_url\": \"https://server/small\""]),
    },
    Example {
        cmd: "latencylab rpm https://server:4043",
        check: in_lab("latencylab shell --rate 20mbit --rtt 20ms --server 'latencylab rpm-server' -- {}", &[("https://server:4043", "https://server:4043 --max-duration 3s")], &["Responsiveness: ", "foreign probes"]),
    },
    Example {
        cmd: "latencylab rpm https://server:4043 --flows 8 --json > rpm.json",
        check: in_lab("latencylab shell --rate 20mbit --rtt 20ms --server 'latencylab rpm-server' -- {} && cat rpm.json", &[("--flows 8", "--flows 8 --max-duration 3s")], &["\"flows_down\": 8", "\"self\""]),
    },
    Example {
        cmd: "sudo latencylab shell --down 20mbit --up 20mbit --rtt 20ms --rpm",
        check: Check::Parses { run_by: "rpm.rs" },
    },
    Example {
        cmd: "sudo latencylab shell --profile 3g -- ping -c 5 server",
        check: Check::Run {
            setup: "",
            wrap: "",
            shorten: &[("-c 5", "-c 2")],
            exit: 0,
            // 3G's 400 ms RTT and a little of the lab's own lateness: 400 to 499 ms.
            contains: &["time=4", "asked 500.0kbit, 200ms"],
        },
    },
    Example {
        cmd: "latencylab page-load http://server/ --per-host 6 --out load.jsonl",
        check: in_lab("latencylab shell --server 'latencylab web-server --page examples/pages/newsletter.toml' -- {} && cat load.jsonl", &[], &["{"]),
    },
    Example {
        cmd: "latencylab page-load http://server/ --per-host 6 --pipeline 4",
        check: in_lab("latencylab shell --server 'latencylab web-server --page examples/pages/newsletter.toml' -- {}", &[], &["{"]),
    },
    Example {
        cmd: "latencylab page-load https://server/ --http 2 --coalesce --ca ca.pem",
        check: in_lab("latencylab shell --server 'latencylab web-server --page examples/pages/newsletter.toml --port 443 --tls --ca-out ca.pem' -- {}", &[], &["{"]),
    },
    Example {
        cmd: "latencylab web-server --page examples/pages/article.toml --port 443 --tls --http3 --ca-out ca.pem",
        check: in_lab("latencylab shell --server '{}' -- latencylab page-load https://server/ --http 3 --ca ca.pem", &[], &["\"protocol\":\"h3\"", "\"scheduling\":\"round-robin\""]),
    },
    Example {
        cmd: "latencylab page-load https://server/ --http 3 --ca ca.pem",
        check: in_lab("latencylab shell --server 'latencylab web-server --page examples/pages/newsletter.toml --port 443 --tls --http3 --scheduling sequential --ca-out ca.pem' -- {}", &[], &["\"protocol\":\"h3\"", "\"scheduling\":\"sequential\""]),
    },
    Example {
        cmd: "latencylab demo hol-blocking -o out/hol-blocking --runs 2",
        check: Check::Parses { run_by: "demo_hol_blocking.rs" },
    },
    Example {
        cmd: "latencylab demo responsiveness -o out/responsiveness --duration 30s",
        check: Check::Parses {
            run_by: "demo_responsiveness.rs",
        },
    },
    Example {
        cmd: "sudo latencylab demo bufferbloat -o out/bufferbloat",
        check: Check::Run {
            setup: "",
            wrap: "",
            shorten: &[("-o out/bufferbloat", "-o out/bufferbloat --duration 5s --quiet")],
            exit: 0,
            contains: &["FIFO", "CoDel", "report: out/bufferbloat/report.html"],
        },
    },
    Example {
        cmd: "sudo latencylab demo bufferbloat",
        check: Check::Parses { run_by: "demo.rs" },
    },
    // `report --help`: a run directory's charts; demo.rs exports a demo's run, reruns it and
    // draws its report.
    Example {
        cmd: "latencylab report out/run",
        check: Check::Parses { run_by: "demo.rs" },
    },
    Example {
        cmd: "latencylab report out/bufferbloat/fifo",
        check: Check::Parses { run_by: "demo.rs" },
    },
    Example {
        cmd: "sudo latencylab demo bufferbloat -o out/bb --duration 20s",
        check: Check::Parses { run_by: "demo.rs" },
    },
    Example {
        cmd: "sudo latencylab demo bufferbloat -o out/bufferbloat --duration 30s",
        check: Check::Parses { run_by: "demo.rs" },
    },
    Example {
        cmd: "sudo latencylab demo l4s -o out/l4s",
        check: Check::Parses { run_by: "demo_l4s.rs" },
    },
    Example {
        cmd: "sudo latencylab demo l4s -o out/l4s --duration 20s",
        check: Check::Parses { run_by: "demo_l4s.rs" },
    },
    Example {
        cmd: "sudo latencylab demo notsent-lowat",
        check: Check::Parses { run_by: "demo_notsent_lowat.rs" },
    },
    Example {
        cmd: "sudo latencylab demo notsent-lowat -o out/notsent-lowat --duration 20s",
        check: Check::Parses { run_by: "demo_notsent_lowat.rs" },
    },
    Example {
        cmd: "sudo latencylab demo tfo",
        check: Check::Parses { run_by: "demo_tfo.rs" },
    },
    Example {
        cmd: "sudo latencylab demo tfo -o out/tfo --requests 20",
        check: Check::Parses { run_by: "demo_tfo.rs" },
    },
    Example {
        cmd: "sudo latencylab demo pipelining -o out/pipelining",
        check: Check::Parses { run_by: "demo_pipelining.rs" },
    },
    Example {
        cmd: "sudo latencylab demo http-parallel -o out/http-parallel",
        check: Check::Parses { run_by: "demo_http_parallel.rs" },
    },
    Example {
        cmd: "sudo latencylab demo nagle -o out/nagle --duration 20s",
        check: Check::Parses { run_by: "demo_nagle.rs" },
    },
    Example {
        cmd: "sudo latencylab demo delayed-ack -o out/delayed-ack --duration 10s",
        check: Check::Parses { run_by: "demo_delayed_ack.rs" },
    },
    Example {
        cmd: "sudo latencylab demo pps -o out/pps --duration 10s --pps 1000",
        check: Check::Parses { run_by: "demo_pps.rs" },
    },
    Example {
        cmd: "sudo latencylab demo handshake-cdf -o out/handshake-cdf --servers 20 --per-server 5",
        check: Check::Parses {
            run_by: "demo_handshake_cdf.rs",
        },
    },
    Example {
        cmd: "sudo latencylab demo conn-reuse -o out/conn-reuse",
        check: Check::Parses {
            run_by: "demo_conn_reuse.rs",
        },
    },
    Example {
        cmd: "sudo latencylab demo cwnd-reuse -o out/cwnd-reuse",
        check: Check::Parses {
            run_by: "demo_cwnd_reuse.rs",
        },
    },
    Example {
        cmd: "sudo latencylab demo fallback",
        check: Check::Parses {
            run_by: "demo_fallback.rs",
        },
    },
    Example {
        cmd: "sudo latencylab demo fallback -o out/fallback --duration 35s",
        check: Check::Parses {
            run_by: "demo_fallback.rs",
        },
    },
    Example {
        cmd: "latencylab fallback-server --port 5208",
        check: Check::Illustrative("its client needs a host with wlan0 and rmnet0, which demo fallback builds"),
    },
    Example {
        cmd: "latencylab fallback-client server:5208 --mode race --duration 25s --out f.jsonl",
        check: Check::Illustrative("needs a host with wlan0 and rmnet0, which demo fallback builds"),
    },
    Example {
        cmd: "sudo latencylab ipv6-check --server 'latencylab probe-server' -- latencylab nat64-sample --class af-inet-only server 5202",
        check: run(1, &["af-inet-only: gethostbyname", "asked for A records only"]),
    },
    Example {
        cmd: "latencylab nat64-sample --class af-inet-only server 5202",
        check: Check::Run {
            setup: "",
            wrap: "latencylab shell --nat64 --server 'latencylab probe-server' -- {}",
            shorten: &[],
            exit: 1,
            contains: &["Network is unreachable"],
        },
    },
    Example {
        cmd: "latencylab nat64-sample --class local-synthesis 10.77.2.1 5202",
        check: in_lab(
            "latencylab shell --nat64 --server 'latencylab probe-server' -- {}",
            &[],
            &["synthesised under 64:ff9b::/96"],
        ),
    },
    Example {
        cmd: "sudo latencylab demo nat64 -o out/nat64",
        check: Check::Parses {
            run_by: "demo_nat64.rs",
        },
    },
    Example {
        cmd: "sudo latencylab sweep examples/sweep-small.toml -o out/small",
        check: Check::Parses { run_by: "sweep.rs" },
    },
    Example {
        cmd: "sudo latencylab sweep examples/sweep-bufferbloat.toml -o out/bb --jobs 1",
        check: Check::Illustrative("90 runs of 10 s; examples/sweep-small.toml is run instead"),
    },
];

/// Where a command was found, for the failure message.
struct Found {
    place: String,
    cmd: String,
    /// `latencylab NAME [--option ...]`: a synopsis, checked against `--help`.
    synopsis: bool,
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `cmd  # comment` without the comment (a `#` after a space, outside quotes); the comment
/// is returned too.
fn split_comment(line: &str) -> (&str, Option<&str>) {
    let (mut single, mut double) = (false, false);
    let mut prev = ' ';
    for (i, c) in line.char_indices() {
        match c {
            '\'' if !double => single = !single,
            '"' if !single => double = !double,
            '#' if !single && !double && prev.is_whitespace() => {
                return (&line[..i], Some(line[i + 1..].trim()));
            }
            _ => {}
        }
        prev = c;
    }
    (line, None)
}

/// One command line as the table keys it: continuations joined, a `host$ ` prompt and the
/// comment dropped, runs of spaces made one.
fn normalize(cmd: &str) -> String {
    cmd.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Does this line (prompt already dropped) run something a reader would type?
fn is_command(line: &str) -> bool {
    let mut words = line
        .split_whitespace()
        .skip_while(|w| w.contains('=') && !w.starts_with('-'));
    let first = words.next().unwrap_or("");
    first == "latencylab"
        || first == "sudo"
        || first == "cargo"
        || first.starts_with("./scripts/")
        || first.starts_with("scripts/")
        || line.contains("| latencylab ")
}

fn drop_prompt(line: &str) -> &str {
    match line.split_once("$ ") {
        Some((p, rest)) if !p.is_empty() && p.chars().all(|c| c.is_alphanumeric() || c == '-') => {
            rest
        }
        _ => line,
    }
}

/// The commands of one markdown file's fenced blocks, with illustrative ones left out.
fn doc_commands(path: &Path) -> Vec<Found> {
    let name = path
        .strip_prefix(repo())
        .unwrap_or(path)
        .display()
        .to_string();
    let md = fs::read_to_string(path).unwrap();
    let mut found = Vec::new();
    // The open block: its first line number, its info string, its numbered lines.
    type Block = (usize, String, Vec<(usize, String)>);
    let mut block: Option<Block> = None;
    for (i, line) in md.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            match block.take() {
                None => block = Some((i + 1, line.trim().trim_start_matches('`').into(), vec![])),
                Some((start, info, lines)) => {
                    found.extend(block_commands(&name, start, &info, &lines))
                }
            }
        } else if let Some((_, _, lines)) = block.as_mut() {
            lines.push((i + 1, line.to_string()));
        }
    }
    found
}

fn block_commands(file: &str, start: usize, info: &str, lines: &[(usize, String)]) -> Vec<Found> {
    let shell = matches!(info, "sh" | "bash" | "shell" | "console");
    if !shell && !matches!(info, "") {
        return vec![];
    }
    let first = lines.iter().map(|(_, l)| l.trim()).find(|l| !l.is_empty());
    if first.is_some_and(|l| l.starts_with("# illustrative")) {
        return vec![];
    }
    let mut out = Vec::new();
    let mut pending: Option<(usize, String)> = None;
    for (n, raw) in lines {
        let (code, comment) = split_comment(raw);
        let illustrative = comment.is_some_and(|c| c.starts_with("illustrative"));
        let code = code.trim_end();
        let (line_no, mut cmd) = match pending.take() {
            Some((n0, c)) => (n0, c + " " + code.trim()),
            None => (*n, drop_prompt(code.trim()).to_string()),
        };
        if let Some(c) = cmd.strip_suffix('\\') {
            pending = Some((line_no, c.trim_end().to_string()));
            continue;
        }
        cmd = normalize(&cmd);
        if cmd.is_empty() || illustrative || !(shell || is_command(&cmd)) || !is_command(&cmd) {
            continue;
        }
        out.push(Found {
            place: format!("{file}:{line_no} (block at line {start})"),
            synopsis: cmd.contains(" [-") || cmd.contains(" [--"),
            cmd,
        });
    }
    out
}

fn help_of(args: &[&str]) -> String {
    let o = Command::new(bin())
        .args(args)
        .arg("--help")
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "latencylab {args:?} --help: {}",
        text(&o.stderr)
    );
    text(&o.stdout)
}

/// The subcommands a `--help` lists.
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        // A name sits two spaces in; deeper lines wrap a description.
        .filter(|l| !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .filter(|c| c != "help")
        .collect()
}

/// The example lines under `Example:`/`Examples:` of every `--help`, subcommands included.
fn help_commands() -> Vec<Found> {
    let mut found = Vec::new();
    let mut todo: Vec<Vec<String>> = vec![vec![]];
    while let Some(path) = todo.pop() {
        let args: Vec<&str> = path.iter().map(String::as_str).collect();
        let help = help_of(&args);
        for c in subcommands(&help) {
            let mut p = path.clone();
            p.push(c);
            todo.push(p);
        }
        let mut in_examples = false;
        let mut pending = String::new();
        for line in help.lines() {
            if line.starts_with("Example") {
                in_examples = true;
                continue;
            }
            if !in_examples {
                continue;
            }
            if !line.starts_with("  ") {
                in_examples = false;
                continue;
            }
            let line = format!("{pending} {}", line.trim());
            if let Some(c) = line.strip_suffix('\\') {
                pending = c.to_string();
                continue;
            }
            pending.clear();
            let cmd = normalize(split_comment(&line).0);
            if is_command(&cmd) {
                found.push(Found {
                    place: format!("`latencylab {} --help`", path.join(" ")),
                    synopsis: false,
                    cmd,
                });
            }
        }
    }
    found
}

/// `latencylab NAME [--opt ...]`: NAME's `--help` must know every `--opt` the synopsis shows.
fn check_synopsis(f: &Found) -> Result<(), String> {
    let words: Vec<&str> = f
        .cmd
        .split_whitespace()
        .skip_while(|w| *w != "latencylab")
        .collect();
    let sub: Vec<&str> = words[1..]
        .iter()
        .take_while(|w| {
            w.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && !w.starts_with('-')
        })
        .copied()
        .collect();
    let o = Command::new(bin())
        .args(&sub)
        .arg("--help")
        .output()
        .unwrap();
    if !o.status.success() {
        return Err(format!(
            "{}: `latencylab {} --help` fails: {}",
            f.place,
            sub.join(" "),
            text(&o.stderr)
        ));
    }
    let help = text(&o.stdout);
    for w in &words {
        let opt: String = w
            .trim_start_matches('[')
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect();
        if opt.starts_with("--")
            && opt.len() > 2
            && !help.contains(&format!("{opt} "))
            && !help.contains(&format!("{opt}\n"))
            && !help.contains(&format!("{opt},"))
        {
            return Err(format!(
                "{}: `{}` shows {opt}, which `latencylab {} --help` does not list",
                f.place,
                f.cmd,
                sub.join(" ")
            ));
        }
    }
    Ok(())
}

/// Runs `cmd` with `sh -c` in `dir`, `latencylab` being the binary under test, for at most
/// `limit`; returns the status and stdout + stderr.
fn sh(dir: &Path, cmd: &str, limit: Duration) -> (i32, String) {
    let bin_dir = Path::new(bin()).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = dir.join(".out");
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(format!("exec >{} 2>&1; {cmd}", out.display()))
        .current_dir(dir)
        .env("PATH", path)
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t0.elapsed() > limit {
            // SAFETY: plain kill(2) of the shell we spawned.
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
            let _ = child.wait();
            panic!("`{cmd}` still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    (
        status.code().unwrap_or(-1),
        fs::read_to_string(&out).unwrap_or_default(),
    )
}

/// The scratch directory the examples run in: the repository's `examples/`, and `./my-app`,
/// an app that works on an IPv6-only network (it connects by name).
fn scratch() -> PathBuf {
    let dir = tempdir("docs-examples");
    std::os::unix::fs::symlink(
        repo().join("examples").canonicalize().unwrap(),
        dir.join("examples"),
    )
    .unwrap();
    let app = dir.join("my-app");
    fs::write(
        &app,
        "#!/bin/sh\nexec latencylab probe-client \"$1\" --duration 1s\n",
    )
    .unwrap();
    std::os::unix::fs::PermissionsExt::set_mode(
        &mut fs::metadata(&app).unwrap().permissions(),
        0o755,
    );
    Command::new("chmod").arg("755").arg(&app).status().unwrap();
    dir
}

fn all_found() -> Vec<Found> {
    let mut docs: Vec<PathBuf> = fs::read_dir(repo().join("docs"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    docs.insert(0, repo().join("README.md"));
    let mut found: Vec<Found> = docs.iter().flat_map(|p| doc_commands(p)).collect();
    found.extend(help_commands());
    found
}

#[test]
fn every_documented_command_is_tested_or_marked_and_every_entry_is_still_documented() {
    let found = all_found();
    // With or without `sudo` (labs run without it where user namespaces are allowed).
    let bare = |c: &str| c.trim_start_matches("sudo ").to_string();
    let known: BTreeSet<String> = EXAMPLES.iter().map(|e| bare(e.cmd)).collect();
    let mut errors = Vec::new();
    for f in found.iter().filter(|f| !f.synopsis) {
        if !known.contains(&bare(&f.cmd)) {
            errors.push(format!(
                "{}: `{}` is neither in tests/docs_examples.rs EXAMPLES nor marked `# illustrative: WHY`",
                f.place, f.cmd
            ));
        }
    }
    for e in EXAMPLES {
        if !found.iter().any(|f| bare(&f.cmd) == bare(e.cmd)) {
            errors.push(format!(
                "EXAMPLES has `{}`, which no doc or --help shows any more",
                e.cmd
            ));
        }
        if let Check::Parses { run_by } = e.check {
            assert!(
                Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("tests")
                    .join(run_by)
                    .exists(),
                "{run_by} (said to run `{}`) is missing",
                e.cmd
            );
        }
    }
    for f in found.iter().filter(|f| f.synopsis) {
        if let Err(e) = check_synopsis(f) {
            errors.push(e);
        }
    }
    assert!(errors.is_empty(), "\n{}", errors.join("\n"));
}

/// The anchor GitHub gives a heading: lower case, spaces as hyphens, and every character
/// but letters, digits, `-` and `_` left out (`Trade timing for CPU: `--precision`` is
/// `trade-timing-for-cpu---precision`).
fn heading_anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a Markdown file's headings (outside code blocks), a repeated one taking
/// `-1`, `-2`, … as GitHub numbers them.
fn anchors(text: &str) -> BTreeSet<String> {
    let (mut set, mut in_code) = (BTreeSet::new(), false);
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
        } else if let (false, Some(h)) = (in_code, line.strip_prefix('#')) {
            let base = heading_anchor(h.trim_start_matches('#'));
            let mut a = base.clone();
            for n in 1.. {
                if !set.contains(&a) {
                    break;
                }
                a = format!("{base}-{n}");
            }
            set.insert(a);
        }
    }
    set
}

/// Every relative link target (`](TARGET)`) of a Markdown text outside code blocks, with its
/// line number.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    let mut in_code = false;
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if in_code {
            continue;
        }
        let mut rest = line;
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            let Some(end) = rest.find(')') else { break };
            let target = rest[..end].split_whitespace().next().unwrap_or("");
            if !target.contains("://") && !target.starts_with("mailto:") {
                found.push((i + 1, target.to_string()));
            }
            rest = &rest[end..];
        }
    }
    found
}

#[test]
fn every_link_in_the_docs_leads_to_a_file_and_a_heading_that_exist() {
    let mut docs = vec![repo().join("README.md")];
    for dir in ["docs", "docs/notes"] {
        let mut more: Vec<PathBuf> = fs::read_dir(repo().join(dir))
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "md"))
            .collect();
        more.sort();
        docs.extend(more);
    }
    let mut errors = Vec::new();
    for doc in &docs {
        let text = fs::read_to_string(doc).unwrap();
        let name = doc.strip_prefix(repo()).unwrap().display().to_string();
        for (line, target) in links(&text) {
            let (path, anchor) = match target.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (target.as_str(), None),
            };
            let file = if path.is_empty() {
                doc.clone()
            } else {
                doc.parent().unwrap().join(path)
            };
            if !file.exists() {
                errors.push(format!("{name}:{line}: `{target}`: no file {path}"));
                continue;
            }
            if let Some(anchor) = anchor {
                let Ok(target_text) = fs::read_to_string(&file) else {
                    errors.push(format!("{name}:{line}: `{target}`: not a text file"));
                    continue;
                };
                if !anchors(&target_text).contains(anchor) {
                    errors.push(format!(
                        "{name}:{line}: `{target}`: no heading of {} has the anchor #{anchor}",
                        if path.is_empty() { &name } else { path }
                    ));
                }
            }
        }
    }
    assert!(docs.len() > 10, "{docs:?}");
    assert!(errors.is_empty(), "{}", errors.join("\n"));
}

#[test]
fn every_documented_command_runs_as_printed() {
    let _l = lock();
    let dir = scratch();
    let mut errors = Vec::new();
    for e in EXAMPLES {
        match e.check {
            Check::Illustrative(why) => eprintln!("  skip   {} ({why})", e.cmd),
            Check::Parses { .. } => {
                let cmd = e.cmd.trim_start_matches("sudo ");
                let (code, out) = sh(&dir, &format!("{cmd} --help"), Duration::from_secs(10));
                if code != 0 || !out.contains("Usage: latencylab ") {
                    errors.push(format!("`{cmd}` is not accepted: {out}"));
                }
            }
            Check::Run {
                setup,
                wrap,
                shorten,
                exit,
                contains,
            } => {
                let mut cmd = e.cmd.trim_start_matches("sudo ").to_string();
                for (from, to) in shorten {
                    assert!(
                        cmd.contains(from),
                        "`{}`: nothing to shorten at `{from}`",
                        e.cmd
                    );
                    cmd = cmd.replacen(from, to, 1);
                }
                if !wrap.is_empty() {
                    cmd = wrap.replace("{}", &cmd);
                }
                if !setup.is_empty() {
                    let (code, out) = sh(&dir, setup, Duration::from_secs(30));
                    assert_eq!(code, 0, "setup `{setup}`: {out}");
                }
                let t0 = Instant::now();
                let (code, out) = sh(&dir, &cmd, Duration::from_secs(150));
                eprintln!("{:5.1} s  {cmd}", t0.elapsed().as_secs_f64());
                if code != exit {
                    errors.push(format!("`{cmd}` exited {code}, not {exit}:\n{out}"));
                }
                for c in contains.iter() {
                    if !out.contains(c) {
                        errors.push(format!("`{cmd}`: no `{c}` in its output:\n{out}"));
                    }
                }
            }
        }
    }
    let _ = fs::remove_dir_all(&dir);
    assert_nothing_left();
    assert!(errors.is_empty(), "\n{}", errors.join("\n\n"));
}

#[test]
fn the_link_checker_finds_links_and_makes_anchors_as_github_does() {
    assert_eq!(
        heading_anchor(" Trade timing for CPU: `--precision`"),
        "trade-timing-for-cpu---precision"
    );
    let doc = "# A b\n\n## A b\n```sh\n# not a heading [x](y.md)\n```\nsee [g](guide.md#a-b-1), ![i](img/x.png) and [w](https://e.org/)\n";
    let a = anchors(doc);
    assert!(
        a.contains("a-b") && a.contains("a-b-1") && a.len() == 2,
        "{a:?}"
    );
    assert_eq!(
        links(doc),
        [
            (7, "guide.md#a-b-1".to_string()),
            (7, "img/x.png".to_string())
        ]
    );
}

#[test]
fn the_harness_finds_commands_markers_and_synopses() {
    let md = "x\n```sh\nsudo latencylab shell --rtt 40ms \\\n    -- curl -s http://server/   # a comment\n```\n\
              ```sh\n# illustrative: needs your app\n./my-app\n```\n```\nlatencylab bulk-server [--port 5201]\nlatencylab: an error line\n```\n\
              ```toml\nserver = \"latencylab bulk-server\"\n```\n```\nserver$ latencylab call --listen 6000 # illustrative: two hosts\n```\n";
    let dir = tempdir("docs-examples-unit");
    fs::create_dir_all(&dir).unwrap();
    let p = dir.join("t.md");
    fs::write(&p, md).unwrap();
    let f = doc_commands(&p);
    let cmds: Vec<(&str, bool)> = f.iter().map(|f| (f.cmd.as_str(), f.synopsis)).collect();
    assert_eq!(
        cmds,
        [
            (
                "sudo latencylab shell --rtt 40ms -- curl -s http://server/",
                false
            ),
            ("latencylab bulk-server [--port 5201]", true),
        ]
    );
    assert!(f[0].place.contains("t.md:3"), "{}", f[0].place);
    let bad = Found {
        place: "x".into(),
        cmd: "latencylab bulk-server [--no-such-option]".into(),
        synopsis: true,
    };
    assert!(check_synopsis(&bad)
        .unwrap_err()
        .contains("--no-such-option"));
    let good = Found {
        place: "x".into(),
        cmd: "latencylab bulk-server [--port 5201]".into(),
        synopsis: true,
    };
    check_synopsis(&good).unwrap();
    let _ = fs::remove_dir_all(&dir);
}
