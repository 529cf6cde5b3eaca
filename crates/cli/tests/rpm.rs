//! End-to-end: `latencylab shell --rpm` in real namespaces, the responsiveness test and the
//! attribution of its round trips to the path's queues, and `latencylab report`'s section of
//! a run that had it. Needs root and /dev/net/tun, as lab.rs.

mod common;

use common::*;

use std::fs;
use std::path::Path;

use rpm::report::RpmReport;

/// `shell` over the 20 Mbit/s, 20 ms path of these tests, quiet.
const LINE: &[&str] = &[
    "shell", "--down", "20mbit", "--up", "20mbit", "--rtt", "20ms", "-q",
];

/// One `shell --rpm` over a 20 Mbit/s, 20 ms path with `queue`; the report, the two lines of
/// attribution, and the run's summary.
fn rpm_in_lab(
    name: &str,
    queue: &str,
) -> (
    RpmReport,
    String,
    labnet::run_dir::Summary,
    std::path::PathBuf,
) {
    let dir = out_dir(name);
    let o = run(&[
        LINE,
        &["--queue", queue, "-o", dir.to_str().unwrap(), "--rpm"],
    ]
    .concat());
    assert!(o.status.success(), "{}", text(&o.stderr));
    let report: RpmReport =
        serde_json::from_str(&fs::read_to_string(dir.join("rpm.json")).unwrap()).unwrap();
    let summary: labnet::run_dir::Summary =
        serde_json::from_str(&fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    (report, text(&o.stdout), summary, dir)
}

fn attribution(name: &str, queue: &str) -> (RpmReport, rpm::attribution::Attribution, String) {
    let (report, stdout, summary, dir) = rpm_in_lab(name, queue);
    let a = attribution_of(&dir, &report, &summary);
    (report, a, stdout)
}

/// The attribution again, from the files a run left in `dir`, through the crate's own reader.
fn attribution_of(
    dir: &std::path::Path,
    report: &RpmReport,
    summary: &labnet::run_dir::Summary,
) -> rpm::attribution::Attribution {
    rpm::run::attribution_of(dir, report, summary)
        .unwrap()
        .expect("probes in the link logs")
}

/// Whether parts that explain `share` of a round trip of `round_trip_ms` add up to it: within
/// 5 %, and 2 ms more for what no part names (the client process waking to read an answer),
/// which a loaded machine lengthens by milliseconds whatever the round trip.
fn adds_up(share: f64, round_trip_ms: f64) -> bool {
    (share - 1.0).abs() <= 0.05 + 2.0 / round_trip_ms
}

#[test]
fn rpm_under_fifo_is_attributed_to_the_fifo_queues_and_the_hosts_buffers_and_adds_up() {
    let _g = lock();
    let (report, a, stdout) = attribution("rpm-fifo", "fifo limit 1000");
    assert!(stdout.contains("==== SUMMARY ===="), "{stdout}");
    assert!(stdout.contains(&a.line()), "{stdout}");
    let rpm = report.rpm.expect("an RPM");
    // 20 Mbit/s both ways, 1000-packet FIFOs: bufferbloat, a loaded round trip of hundreds of
    // milliseconds, so an RPM far below the idle path's 3000.
    assert!(rpm < 300.0, "{rpm}");
    assert!(report.foreign.total > 20 && report.self_probes.total > 20);
    // The queues hold most of the loaded round trip; the propagation delay little of it.
    let queues: f64 = a.queues.iter().map(|q| q.share).sum();
    assert!(queues > 0.5, "{a:?}");
    assert!((a.base_rtt_ms - 20.0).abs() < 1.0, "{a:?}");
    // A foreign probe's round trip is mostly the network's, and taken apart packet by packet
    // (queues, base RTT, loss recovery, the hosts' TLS and HTTP work) it adds up within 5 %.
    assert!(a.foreign.network_share() > 0.8, "{a:?}");
    let f = a.foreign.named_share();
    assert!(
        adds_up(f, a.foreign.round_trip_ms),
        "foreign probes: {f:.3} of the round trip, {a:?}"
    );
    assert!(a.foreign.probes_by_packet as f64 >= 0.9 * a.foreign.probes as f64);
    // A self probe's is cut into measured parts: the path's, the client's send buffer (behind
    // the upload) and the server (behind the download); they add up to it within 5 %, and so
    // does the whole loaded round trip.
    let s = a.self_probes.named_share();
    assert!(
        adds_up(s, a.self_probes.round_trip_ms),
        "self probes: {s:.3} of the round trip, {a:?}"
    );
    assert!(a.self_probes.probes_by_packet as f64 >= 0.9 * a.self_probes.probes as f64);
    assert!(a.client_send_ms > 0.0 && a.server_ms > 0.0, "{a:?}");
    assert!(
        adds_up(a.named_share(), a.loaded_rtt_ms),
        "loaded round trip: {:.3} named, {a:?}",
        a.named_share()
    );
    assert_nothing_left();
}

#[test]
fn rpm_under_fq_codel_is_far_higher_and_its_foreign_probes_hardly_queue() {
    let _g = lock();
    let (report, a, _) = attribution("rpm-fq", "fq_codel");
    let rpm = report.rpm.expect("an RPM");
    assert!(rpm > 500.0, "{rpm}");
    // Flow queueing: a new connection's packets wait in their own short queue.
    let foreign_queue_ms: f64 = a.foreign.queues_ms.iter().sum();
    assert!(foreign_queue_ms < 10.0, "{a:?}");
    // Most of a foreign probe's 20-odd ms is the base RTT. The rest is short queues and the
    // hosts' TCP, TLS and HTTP work between the probe's packets, a tenth of the round trip
    // that the path alone leaves unexplained (more on a busy machine, so the base RTT is
    // weighed against the path's part): taken apart packet by packet, the parts add up to it
    // within 5 %.
    let f = &a.foreign;
    let path_ms = f.round_trip_ms - f.client_send_ms - f.server_ms - f.hosts_ms;
    assert!(f.base_rtt_ms / path_ms > 0.7, "{a:?}");
    assert!(f.probes_by_packet as f64 >= 0.9 * f.probes as f64, "{a:?}");
    assert!(f.client_send_ms + f.server_ms > 0.0, "{a:?}");
    assert!(
        adds_up(f.named_share(), f.round_trip_ms),
        "foreign probes: {:.3}, {a:?}",
        f.named_share()
    );
    // A self probe's time is mostly in the two hosts' buffers, behind the loaded connection's
    // own data, and its measured parts add up to its round trip within 5 %.
    let s = &a.self_probes;
    assert!(
        adds_up(s.named_share(), s.round_trip_ms),
        "self probes: {:.3}, {a:?}",
        s.named_share()
    );
    assert!(
        s.client_send_ms + s.server_ms > 0.5 * s.round_trip_ms,
        "{a:?}"
    );
    // And so the whole loaded round trip adds up within 5 %.
    assert!(
        adds_up(a.named_share(), a.loaded_rtt_ms),
        "loaded round trip: {:.3} named, {a:?}",
        a.named_share()
    );
    assert_nothing_left();
}

#[test]
fn a_test_of_the_uplink_alone_loads_only_uploads_and_probes_on_them() {
    let _g = lock();
    let dir = out_dir("rpm-up");
    let o = run(&[
        LINE,
        &["-o", dir.to_str().unwrap()],
        &[
            "--server",
            "latencylab rpm-server --port 4043",
            "--",
            "latencylab",
            "rpm",
            "https://server:4043",
            "--load",
            "up",
            "--max-duration",
            "4s",
            "--json",
        ],
    ]
    .concat());
    assert!(o.status.success(), "{}", text(&o.stderr));
    let r: RpmReport =
        serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&o.stdout)));
    assert_eq!(r.load, rpm::algorithm::Load::Up);
    assert_eq!((r.flows_down, r.down_bps), (0, 0.0), "{:?}", r.intervals);
    assert!(r.flows_up >= 1 && r.up_bps > 5e6, "{:?}", r.intervals);
    let on: Vec<Option<&str>> = r
        .self_probes
        .probes
        .iter()
        .map(|p| p.on.as_deref())
        .collect();
    assert!(
        !on.is_empty() && on.iter().all(|o| *o == Some("up")),
        "{on:?}"
    );
    // The idle probes ran before the load, on the unloaded 20 ms path.
    let idle = &r.idle;
    assert_eq!(idle.probes.len(), 5, "{idle:?}");
    assert!(idle.probes.iter().all(|p| p.end_s <= 0.0), "{idle:?}");
    let rt = idle.round_trip_ms.unwrap();
    // The path's 20 ms, and the hosts' TCP, TLS and HTTP work (more on a loaded machine).
    assert!((19.0..60.0).contains(&rt), "{rt}");
}

#[test]
fn a_run_files_rpm_table_runs_the_test_between_its_hosts_and_names_the_queue() {
    let _g = lock();
    let dir = out_dir("rpm-run-file");
    fs::create_dir_all(&dir).unwrap();
    let file = dir.join("home.toml");
    fs::write(
        &file,
        r#"
[[host]]
name = "laptop"
[[host]]
name = "cdn"
[[router]]
name = "home"
[[link]]
name = "wifi"
a = "laptop"
b = "home"
rate = "100mbit"
[[link]]
name = "dsl"
a = "home"
b = "cdn"
rate = "10mbit"
rtt = "20ms"
[rpm]
client = "laptop"
server = "cdn"
flows = 2
max_duration = "4s"
"#,
    )
    .unwrap();
    let out = dir.join("out");
    // A report left by an earlier run in the same directory: this run's replaces it.
    fs::create_dir_all(&out).unwrap();
    fs::write(out.join("rpm.json"), "stale").unwrap();
    let o = run(&[
        "run",
        file.to_str().unwrap(),
        "-q",
        "-o",
        out.to_str().unwrap(),
    ]);
    let stdout = text(&o.stdout);
    assert!(o.status.success(), "{stdout}\n{}", text(&o.stderr));
    let report: RpmReport =
        serde_json::from_str(&fs::read_to_string(out.join("rpm.json")).unwrap()).unwrap();
    assert_eq!((report.flows_down, report.flows_up), (2, 2));
    assert!(report.rpm.is_some(), "{stdout}");
    assert!(stdout.contains("Idle Latency"), "{stdout}");
    // The 10 Mbit/s hop's queues, both ways, hold the probes; the 100 Mbit/s Wi-Fi hop is
    // named too, with what little it held.
    for side in ["up", "down"] {
        assert!(
            stdout.contains(&format!("in `dsl` {side} FIFO queue")),
            "{stdout}"
        );
    }
    // Each probe's packets are followed across both links each way, so its round trip is cut
    // into measured parts, of which no queue's is more than the whole.
    let summary: labnet::run_dir::Summary =
        serde_json::from_str(&fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let a = attribution_of(&out, &report, &summary);
    assert!(stdout.contains(&a.line()), "{stdout}");
    for k in [&a.foreign, &a.self_probes] {
        assert!(k.probes_by_packet as f64 >= 0.9 * k.probes as f64, "{a:?}");
        assert!(k.queues_ms.iter().all(|q| *q <= k.round_trip_ms), "{a:?}");
    }
    assert!(a.client_send_ms + a.server_ms > 0.0, "{a:?}");

    // `latencylab report` on the run: the test's result and its attribution chart, listed
    // with the other charts.
    let o = run(&["report", out.to_str().unwrap()]);
    let listed = text(&o.stdout);
    assert!(o.status.success(), "{listed}\n{}", text(&o.stderr));
    let png = out.join("rpm.png");
    assert!(listed.lines().any(|l| Path::new(l) == png), "{listed}");
    assert!(listed.contains("queue-delay.png"), "{listed}");
    assert_charts(&out, &["rpm"]);
    let html = fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("Responsiveness (RPM)"), "{html}");
    let rpm_line = rpm::report::text(&report);
    let rpm_line = rpm_line
        .lines()
        .find(|l| l.starts_with("Responsiveness:"))
        .expect("the RPM line");
    assert!(html.contains(rpm_line), "{rpm_line}");
    let dom = check_renders(&out.join("report.html"), &["rpm"]);
    for name in ["dsl up FIFO queue", "dsl down FIFO queue", "base RTT"] {
        assert!(dom.contains(name), "no {name} in the chart's legend");
    }
    // A report the page cannot read: the section says why, the other charts are drawn.
    fs::write(out.join("rpm.json"), "not json").unwrap();
    let o = run(&["report", out.to_str().unwrap()]);
    let listed = text(&o.stdout);
    assert!(o.status.success(), "{listed}\n{}", text(&o.stderr));
    assert!(
        !listed.contains("rpm.png") && listed.contains("queue-delay.png"),
        "{listed}"
    );
    let html = fs::read_to_string(out.join("report.html")).unwrap();
    assert!(
        html.contains("The responsiveness test&#39;s report cannot be read"),
        "{html}"
    );
    let _ = fs::remove_dir_all(&dir);
}
