//! End-to-end tests of `latencylab sweep`: examples/sweep-small.toml runs for real (four
//! 5-second labs), is stopped by SIGINT in the middle, resumed and killed outright, and the same
//! command again finishes it with exactly one row per run. Needs root and /dev/net/tun.

mod common;

use common::*;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn small() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/sweep-small.toml")
}

fn sweep(file: &Path, out: &Path) -> Command {
    let mut c = Command::new(bin());
    c.arg("sweep").arg(file).arg("-o").arg(out).arg("--quiet");
    c.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    c
}

/// The data rows of `DIR/results.csv`, split into cells (no cell of these sweeps has a comma
/// in quotes but `error`, which is empty when a run succeeded).
fn rows(out: &Path) -> Vec<Vec<String>> {
    let csv = std::fs::read_to_string(out.join("results.csv")).unwrap();
    let mut lines = csv.split("\r\n").filter(|l| !l.is_empty());
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    assert_eq!(
        &header[..8],
        [
            "run",
            "rep",
            "queue",
            "seed",
            "status",
            "error",
            "self_check",
            "wall_s"
        ]
    );
    lines
        .map(|l| l.split(',').map(String::from).collect())
        .collect()
}

fn journal_lines(out: &Path) -> usize {
    std::fs::read_to_string(out.join("journal.jsonl"))
        .map(|t| t.lines().filter(|l| l.starts_with('{')).count())
        .unwrap_or(0)
}

#[test]
fn a_mistake_in_the_sweep_file_is_exit_2_and_one_line_before_anything_runs() {
    let dir = out_dir("sweep-bad");
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.toml");
    let text_ok = std::fs::read_to_string(small()).unwrap();
    std::fs::write(&bad, text_ok.replace("\"10mbit\"", "\"10 megabits\"")).unwrap();
    let out = dir.join("out");
    let r = sweep(&bad, &out).output().unwrap();
    assert_eq!(r.status.code(), Some(2));
    let err = text(&r.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("shell.down") && err.contains("10 megabits"),
        "{err}"
    );
    assert!(!out.exists(), "nothing ran");
    let r = run(&[
        "sweep",
        small().to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--jobs",
        "0",
    ]);
    assert_eq!(r.status.code(), Some(2));
    assert!(text(&r.stderr).contains("--jobs"));
}

/// Whether any process still has `needle` in its command line.
fn running_with(needle: &str) -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
        std::fs::read(e.path().join("cmdline"))
            .map(|c| String::from_utf8_lossy(&c).contains(needle))
            .unwrap_or(false)
    })
}

/// Starts the small sweep in `out` with one lab at a time and returns it once `done` runs
/// are recorded and the next has been under way for 2 s.
fn sweep_until(out: &Path, done: usize) -> std::process::Child {
    let t0 = Instant::now();
    let mut child = sweep(&small(), out).arg("--jobs").arg("1").spawn().unwrap();
    while journal_lines(out) < done {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "no run finished in 60 s"
        );
        assert!(child.try_wait().unwrap().is_none(), "the sweep ended early");
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(2));
    child
}

/// One sweep, stopped twice and resumed each time: SIGINT while its second run is under way,
/// then SIGKILL of the resumed sweep while its third run is, then run to its end. Both ways of
/// stopping share the sweep's runs (a sweep of its own for each took twice as long).
#[test]
fn sweep_small_stopped_by_sigint_then_killed_outright_resumes_to_exactly_four_rows() {
    let _g = lock();
    let out = out_dir("sweep-small");

    // SIGINT: one row recorded, one lab running, which ends cleanly.
    let child = sweep_until(&out, 1);
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let stopped = child.wait_with_output().unwrap();
    assert_eq!(
        stopped.status.code(),
        Some(130),
        "{}",
        text(&stopped.stderr)
    );
    assert!(text(&stopped.stderr).contains("run the same command again"));
    let first = rows(&out);
    assert!(!first.is_empty() && first.len() < 4, "{first:?}");
    assert_nothing_left();

    // SIGKILL of the resumed sweep: the lab under way gets SIGTERM from the kernel (its parent
    // died) and ends cleanly.
    let mut child = sweep_until(&out, first.len() + 1);
    child.kill().unwrap();
    child.wait().unwrap();
    let t0 = Instant::now();
    let needle = out.to_string_lossy().to_string();
    while running_with(&needle) {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "the orphaned lab did not end"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let second = rows(&out);
    assert!(second.len() > first.len() && second.len() < 4, "{second:?}");
    assert_nothing_left();

    let again = sweep(&small(), &out).output().unwrap();
    assert!(again.status.success(), "{}", text(&again.stderr));
    // Its last line, as docs/sweeps.md runs it (docs_examples.rs leaves this sweep to here).
    let said = text(&again.stderr);
    assert!(
        said.contains("sweep: 4 of 4 runs ok")
            && said.contains(&out.join("results.parquet").display().to_string()),
        "{said}"
    );
    let all = rows(&out);
    assert_eq!(all.len(), 4, "{all:?}");
    assert_eq!(journal_lines(&out), 4, "no run recorded twice");
    let ids: Vec<&str> = all.iter().map(|r| r[0].as_str()).collect();
    assert_eq!(ids, ["r0000", "r0001", "r0002", "r0003"]);
    // The rows of the earlier attempts are kept as they were, not run again.
    for r in first.iter().chain(&second) {
        assert!(all.contains(r), "{r:?} changed");
    }
    let params: Vec<(&str, &str)> = all.iter().map(|r| (r[2].as_str(), r[3].as_str())).collect();
    assert_eq!(
        params,
        [
            ("fifo limit 300", "1"),
            ("fifo limit 300", "2"),
            ("codel ecn", "1"),
            ("codel ecn", "2")
        ]
    );
    for r in &all {
        assert_eq!(r[4], "ok", "{r:?}");
    }
    // Figures from summary.json and the probe's output, per run.
    let csv = std::fs::read_to_string(out.join("results.csv")).unwrap();
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let col = |name: &str| -> Vec<f64> {
        let i = header
            .iter()
            .position(|h| *h == name)
            .unwrap_or_else(|| panic!("no {name}: {header:?}"));
        all.iter()
            .map(|r| r[i].parse().unwrap_or_else(|_| panic!("{name}: {r:?}")))
            .collect()
    };
    let rtt = col("udp_rtt_p95_ms");
    let qd = col("path_down_queue_delay_p95_ms");
    // A 300-packet FIFO behind a bulk download stands far above CoDel's 5 ms target.
    for s in 0..2 {
        assert!(rtt[s] > rtt[2 + s] + 20.0, "fifo {rtt:?}");
        assert!(qd[s] > qd[2 + s], "queue delay {qd:?}");
    }
    assert!(
        col("path_down_ce_marks")[2..].iter().sum::<f64>() > 0.0,
        "CoDel with ECN marks"
    );
    assert!(col("goodput_mbps").iter().all(|g| *g > 5.0));
    // The Parquet file is there, whole (pyarrow reads it in python/tests).
    let pq = std::fs::read(out.join("results.parquet")).unwrap();
    assert!(pq.starts_with(b"PAR1") && pq.ends_with(b"PAR1"));
    assert!(out.join("runs/r0003/summary.json").is_file());
    assert!(out.join("runs/r0003/captures/client-eth0.pcap").is_file());
    assert_nothing_left();
}
