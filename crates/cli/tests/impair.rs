//! End-to-end tests of the impairments in real network namespaces: jitter without reordering,
//! duplicates, a packets-per-second ceiling and the MTU as options, drop filters, and bad
//! values. They need root, /dev/net/tun and ping; each checks that nothing was left behind.

mod common;

use common::*;

/// (icmp_seq, rtt ms) of each reply line of `ping`, in the order printed, and the number of
/// `DUP!` lines.
fn ping_replies(out: &str) -> (Vec<(u32, f64)>, usize) {
    let mut replies = Vec::new();
    let mut dups = 0;
    for line in out.lines() {
        let field = |k: &str| {
            line.split_whitespace()
                .find_map(|w| w.strip_prefix(k))
                .map(str::to_string)
        };
        if let (Some(seq), Some(time)) = (field("icmp_seq="), field("time=")) {
            if line.contains("DUP!") {
                dups += 1;
            } else {
                replies.push((seq.parse().unwrap(), time.parse().unwrap()));
            }
        }
    }
    (replies, dups)
}

#[test]
fn ping_through_jitter_shows_the_spread_and_no_reordering() {
    let _g = lock();
    let dir = out_dir("jitter");
    let o = run(&[
        "shell",
        "-o",
        dir.to_str().unwrap(),
        "--no-capture",
        "--delay",
        "20ms",
        "--jitter",
        "5ms",
        "normal",
        "--",
        "ping",
        "-n",
        "-c",
        "300",
        "-i",
        "0.01",
        "server",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let (replies, _) = ping_replies(&text(&o.stdout));
    assert!(replies.len() >= 295, "{} replies", replies.len());
    // In order: ping prints replies as they arrive, so their sequence numbers only grow.
    assert!(
        replies.windows(2).all(|w| w[0].0 < w[1].0),
        "a reply overtook another"
    );
    let rtts: Vec<f64> = replies.iter().map(|r| r.1).collect();
    let (lo, hi) = rtts
        .iter()
        .fold((f64::MAX, 0f64), |(l, h), r| (l.min(*r), h.max(*r)));
    let med = median(rtts.clone());
    // Two crossings of 20 ms ± 5 ms (σ): the median near 40 ms, a spread of tens of ms.
    assert!((35.0..48.0).contains(&med), "median rtt {med}");
    assert!(hi - lo > 15.0, "spread {lo}..{hi}");
    // summary.json says what each direction was asked and what it got.
    let summary = read_json(&dir.join("summary.json"));
    for l in summary["links"].as_array().unwrap() {
        assert_eq!(l["asked"]["delay_ms"], 20.0, "{l}");
        assert_eq!(l["asked"]["jitter_ms"], 5.0, "{l}");
        assert_eq!(l["asked"]["jitter_distribution"], "normal", "{l}");
        let p50 = l["got"]["added_delay_ms"]["p50"].as_f64().unwrap();
        assert!((17.0..25.0).contains(&p50), "{l}");
    }
    let err = text(&o.stderr);
    assert!(
        err.contains("asked unlimited, 20ms ± 5ms normal; got"),
        "{err}"
    );
    assert_nothing_left();
}

#[test]
fn duplicate_ten_percent_gives_about_ten_percent_dup_replies() {
    let _g = lock();
    let o = run(&[
        "shell",
        "--down-duplicate",
        "10%",
        "--seed",
        "3",
        "--",
        "ping",
        "-n",
        "-c",
        "500",
        "-i",
        "0.01",
        "server",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let (replies, dups) = ping_replies(&text(&o.stdout));
    let frac = dups as f64 / replies.len() as f64;
    assert!(
        (0.06..0.14).contains(&frac),
        "{dups} DUP! of {}",
        replies.len()
    );
    assert_nothing_left();
}

/// What `connect()` to the server's port 5201 does within 3 s: "timeout", "refused" or "open".
const CONNECT: &str = "import socket
try:
    socket.create_connection(('server', 5201), timeout=3); print('open')
except socket.timeout: print('timeout')
except ConnectionRefusedError: print('refused')";

#[test]
fn dropping_tcp_syns_makes_connect_time_out_while_ping_still_answers() {
    let _g = lock();
    let script = format!(
        "ping -n -c 3 -i 0.2 -q server >/dev/null && echo ping-ok; python3 -c \"{CONNECT}\""
    );
    let o = run(&["shell", "--drop", "tcp syn", "--", "sh", "-c", &script]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(out.contains("ping-ok"), "{out}");
    assert!(out.contains("timeout"), "{out}");
    // Without the filter the same connect is refused at once (nothing listens on 5201).
    let o = run(&["shell", "--", "sh", "-c", &script]);
    assert!(text(&o.stdout).contains("refused"), "{}", text(&o.stdout));
    assert_nothing_left();
}

/// `--pps` and `--mtu` reach the lab: the ceiling on the link both ways (summary.json's
/// `asked`) and the MTU on the host's interface. What the ceiling does to a bulk transfer at
/// MTU 1500 and at 9000 (six times the goodput) is demo_pps.rs's check: `latencylab demo pps`
/// builds the same link setting and host MTU.
#[test]
fn pps_and_mtu_options_reach_the_link_and_the_hosts() {
    let _g = lock();
    let dir = out_dir("pps");
    let o = run(&[
        "shell",
        "--pps",
        "1000",
        "--mtu",
        "9000",
        "-q",
        "-o",
        dir.to_str().unwrap(),
        "--no-capture",
        "--",
        "cat",
        "/sys/class/net/eth0/mtu",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout).trim(), "9000");
    let summary = read_json(&dir.join("summary.json"));
    let links = summary["links"].as_array().unwrap();
    assert_eq!(links.len(), 2, "{summary}");
    for l in links {
        assert_eq!(l["asked"]["pps"], 1000, "{l}");
    }
    assert_nothing_left();
}

#[test]
fn bad_impairment_values_exit_2_quoting_the_value() {
    for (args, quoted) in [
        (vec!["--jitter", "5mss"], "'5mss'"),
        (vec!["--jitter", "5ms", "gaussian"], "'5ms gaussian'"),
        (vec!["--duplicate", "10"], "'10'"),
        (vec!["--reorder", "25%", "lots"], "'25% lots'"),
        (vec!["--corrupt", "200%"], "'200%'"),
        (vec!["--pps", "0"], "'0'"),
        (vec!["--slot", "20ms", "10ms"], "'20ms 10ms'"),
        (vec!["--drop", "tcp syn or sctp"], "'sctp'"),
        (vec!["--up-drop", "udp port 99999"], "'99999'"),
    ] {
        let mut a = vec!["shell"];
        a.extend(&args);
        a.extend(["--", "true"]);
        let o = run(&a);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(quoted), "{args:?}: {err}");
        assert!(err.contains(args[0]), "names the option: {err}");
    }
}
