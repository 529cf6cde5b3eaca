//! Big labs and the engine's own stalls, end to end: programs start through the launcher, and
//! a lab whose process is stopped says so in its summary and on stderr.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

#[test]
fn a_lab_stopped_for_200_ms_during_a_ping_reports_the_stall_and_when() {
    let _g = lock();
    let dir = out_dir("stall");
    let d = dir.to_str().unwrap();
    let child = Command::new(bin())
        .args(["shell", "--rtt", "40ms", "-o", d, "--"])
        .args(["ping", "-c", "10", "-i", "0.2", "server"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    std::thread::sleep(Duration::from_millis(1000));
    let pid = child.id() as i32;
    // SAFETY: kill with a plain pid and signal number.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    let stopped_at = started.elapsed().as_secs_f64();
    std::thread::sleep(Duration::from_millis(200));
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGCONT) };
    let o = child.wait_with_output().unwrap();
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    let summary = read_json(&dir.join("summary.json"));
    let stall = summary["engine"]["longest_stall_ms"].as_f64().unwrap();
    let at = summary["engine"]["longest_stall_at_s"].as_f64().unwrap();
    // The loop sleeps at most 5 ms between looks, so at least 195 of the 200 ms show.
    assert!((190.0..1000.0).contains(&stall), "stall {stall} ms\n{err}");
    // The lab started a little after the test's clock (namespaces first).
    assert!(
        at <= stopped_at + 0.05 && at >= stopped_at - 1.0,
        "stall at {at} s, stopped at {stopped_at} s of the test"
    );
    assert!(err.contains("stalled for"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
    assert_nothing_left();
}
