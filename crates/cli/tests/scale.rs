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
    let mut child = Command::new(bin())
        .args(["shell", "--rtt", "40ms", "-o", d, "--"])
        .args(["ping", "-c", "10", "-i", "0.2", "server"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let spawned_ns = monotonic_ns();
    // Stop it half a second after it is up, while ping runs: a stop during the lab's setup
    // (seconds, on a loaded machine) would not be the engine's stall.
    let (lines, up) = stderr_lines(&mut child);
    up.recv_timeout(Duration::from_secs(30))
        .expect("the lab never said it was up");
    std::thread::sleep(Duration::from_millis(500));
    let pid = child.id() as i32;
    // SAFETY: kill with a plain pid and signal number.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    let stopped_at = started.elapsed().as_secs_f64();
    let stopped_ns = monotonic_ns();
    std::thread::sleep(Duration::from_millis(200));
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGCONT) };
    let status = child.wait().unwrap();
    let err = lines.join().unwrap().join("\n");
    assert!(status.success(), "{err}");
    let summary = read_json(&dir.join("summary.json"));
    let stall = summary["engine"]["longest_stall_ms"].as_f64().unwrap();
    let at = summary["engine"]["longest_stall_at_s"].as_f64().unwrap();
    // The loop sleeps at most 5 ms between looks, so at least 195 of the 200 ms show.
    assert!((190.0..1000.0).contains(&stall), "stall {stall} ms\n{err}");
    // The lab's clock started after the test's (namespaces first); where exactly is checked
    // below on CLOCK_MONOTONIC.
    assert!(
        at > 0.0 && at <= stopped_at + 0.05,
        "stall at {at} s, stopped at {stopped_at} s of the test"
    );
    assert!(err.contains("stalled for"), "{err}");
    // The stall is also in the list of every stall over 1 ms, and the lab's start on
    // CLOCK_MONOTONIC puts it at the moment this test stopped the lab.
    let stalls = summary["engine"]["stalls"].as_array().unwrap();
    assert!(
        stalls
            .iter()
            .any(|s| s["ms"].as_f64() == Some(stall) && s["at_s"] == at),
        "{stalls:?}"
    );
    // Every stall over 1 ms is counted, listed or not, and the list leaves none out here.
    let count = summary["engine"]["stalls_over_1ms"].as_u64().unwrap();
    let total = summary["engine"]["stalls_over_1ms_total_ms"]
        .as_f64()
        .unwrap();
    assert!(
        count >= stalls.len() as u64 && count >= 1,
        "{count} {stalls:?}"
    );
    assert!(total >= stall, "{total} ms in all, the longest {stall} ms");
    assert_eq!(
        summary["engine"]["stalls_unlisted_max_ms"].as_f64(),
        Some(0.0)
    );
    let start_ns = summary["engine"]["clock_monotonic_start_ns"]
        .as_u64()
        .unwrap();
    assert!(
        start_ns > spawned_ns,
        "lab start {start_ns}, spawned {spawned_ns}"
    );
    let stall_ns = start_ns + (at * 1e9) as u64;
    assert!(
        stall_ns.abs_diff(stopped_ns) < 50_000_000,
        "stall at {stall_ns} ns, stopped at {stopped_ns} ns (CLOCK_MONOTONIC)"
    );
    let _ = std::fs::remove_dir_all(&dir);
    assert_nothing_left();
}

/// A reader of `child`'s standard error: every line, when it has ended, and a signal when the
/// lab says it is up.
fn stderr_lines(
    child: &mut std::process::Child,
) -> (
    std::thread::JoinHandle<Vec<String>>,
    std::sync::mpsc::Receiver<()>,
) {
    use std::io::BufRead;
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut lines = Vec::new();
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            if line.contains("lab up") {
                let _ = tx.send(());
            }
            lines.push(line);
        }
        lines
    });
    (reader, rx)
}

/// Nanoseconds on CLOCK_MONOTONIC, the clock of `engine.clock_monotonic_start_ns`.
fn monotonic_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// A star of `clients` hosts `c0`, `c1` … behind router `r`, each on a 10 Mbit/s link of 30 ms
/// RTT, and `srv` 5 ms each way beyond the router: every RTT is 40 ms. Each client runs `run`.
fn star(clients: usize, run: &str, duration: Option<&str>) -> String {
    let mut s = String::new();
    if let Some(d) = duration {
        s += &format!("duration = \"{d}\"\n");
    }
    s += "[[host]]\nname = \"srv\"\n[[router]]\nname = \"r\"\n";
    s += "[[link]]\nname = \"core\"\na = \"srv\"\nb = \"r\"\ndelay = \"5ms\"\n";
    for i in 0..clients {
        s += &format!(
            "[[host]]\nname = \"c{i}\"\n[[link]]\nname = \"l{i}\"\na = \"c{i}\"\nb = \"r\"\nrate = \"10mbit\"\nrtt = \"30ms\"\n"
        );
        s += &format!("[[program]]\nname = \"c{i}\"\nhost = \"c{i}\"\nrun = \"{run}\"\n");
    }
    s
}

#[test]
fn a_249_client_lab_starting_every_ping_at_once_gets_every_reply() {
    let _g = lock();
    let file = out_dir("star249.toml");
    let dir = out_dir("star249");
    std::fs::write(&file, star(249, "ping -n -c 3 -i 1 -W 2 srv", None)).unwrap();
    let o = run(&[
        "run",
        "-q",
        file.to_str().unwrap(),
        "-o",
        dir.to_str().unwrap(),
        "--no-capture",
    ]);
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    let mut first_ms = Vec::new();
    for i in 0..249 {
        let out = std::fs::read_to_string(dir.join(format!("programs/c{i}.out"))).unwrap();
        assert!(
            out.contains("3 packets transmitted, 3 received"),
            "c{i} lost pings:\n{out}"
        );
        let first = out
            .lines()
            .find(|l| l.contains("icmp_seq=1 "))
            .and_then(|l| l.split("time=").nth(1))
            .and_then(|t| t.split(' ').next())
            .and_then(|t| t.parse::<f64>().ok())
            .unwrap_or_else(|| panic!("c{i}: no first reply:\n{out}"));
        first_ms.push(first);
    }
    // Timing is the benchmark's to measure (scripts/bench-scale); here the RTT can only be no
    // shorter than the 40 ms configured, whatever the machine's load.
    let least = first_ms.iter().copied().fold(f64::MAX, f64::min);
    assert!(
        least >= 40.0,
        "a first ping faster than the path: {least} ms"
    );
    eprintln!(
        "first pings: median {:.1} ms, max {:.1} ms",
        median(first_ms.clone()),
        first_ms.iter().copied().fold(0.0, f64::max)
    );
    let _ = std::fs::remove_dir_all(&dir);
    assert_nothing_left();
}

#[test]
fn a_250_host_lab_stopped_by_sigint_sigterm_or_sigkill_at_any_moment_leaves_nothing() {
    let _g = lock();
    let file = out_dir("star249-sleep.toml");
    std::fs::write(&file, star(249, "sleep 60", Some("60s"))).unwrap();
    // Half-way through building the hosts, and once every program has been asked for.
    for when in ["building", "running"] {
        for (sig, code) in [
            (libc::SIGINT, Some(130)),
            (libc::SIGTERM, Some(143)),
            (libc::SIGKILL, None),
        ] {
            let child = Command::new(bin())
                .args(["run", file.to_str().unwrap()])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            let pid = child.id();
            let mine = || {
                common::lab_namespaces()
                    .iter()
                    .filter(|n| n.starts_with(&format!("ll-{pid}-")))
                    .count()
            };
            let deadline = Instant::now() + Duration::from_secs(30);
            let ready = |n: usize| n >= if when == "building" { 20 } else { 250 };
            while !ready(mine()) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(2));
            }
            if when == "running" {
                // The lab is up; give the launcher a moment to start the programs.
                std::thread::sleep(Duration::from_millis(500));
            }
            // SAFETY: kill with a plain pid and signal number.
            unsafe { libc::kill(pid as i32, sig) };
            let o = child.wait_with_output().unwrap();
            let err = text(&o.stderr);
            assert_eq!(o.status.code(), code, "{when}, signal {sig}: {err}");
            if sig == libc::SIGKILL {
                let next = run(&["shell", "-q", "--", "true"]);
                assert!(next.status.success(), "{}", text(&next.stderr));
            }
            assert_nothing_left();
        }
    }
}

#[test]
fn a_1000_host_lab_leaves_no_namespace_mount_process_or_tun_device_behind() {
    let _g = lock();
    let file = out_dir("star999.toml");
    let dir = out_dir("star999");
    std::fs::write(&file, star(999, "ping -n -c 1 -W 5 srv", None)).unwrap();
    let child = spawn_quiet_run(&file, &dir);
    let pid = child.id();
    // What the lab made, seen while it runs, to be looked for once it has ended.
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    while seen.len() < 1000 && Instant::now() < deadline {
        seen = common::lab_namespaces()
            .into_iter()
            .filter(|n| n.starts_with(&format!("ll-{pid}-")))
            .collect();
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(seen.len() >= 1000, "the lab's namespaces: {}", seen.len());
    let o = child.wait_with_output().unwrap();
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    for i in 0..999 {
        let out = std::fs::read_to_string(dir.join(format!("programs/c{i}.out"))).unwrap();
        assert!(
            out.contains("1 packets transmitted, 1 received"),
            "c{i}: {out}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert_nothing_left();
    // The check above looks at this test process's labs; this one by name as well.
    let left: Vec<String> = common::lab_namespaces()
        .into_iter()
        .filter(|n| seen.contains(n))
        .collect();
    assert!(left.is_empty(), "namespaces left: {left:?}");
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(
        !mounts.contains(&format!("/run/netns/ll-{pid}-")),
        "namespace mounts left"
    );
}

#[test]
fn programs_start_without_the_machines_namespace_mounts_and_the_lab_keeps_its_own() {
    let _g = lock();
    let file = out_dir("star3-mounts.toml");
    let dir = out_dir("star3-mounts");
    // Each client counts the namespace mounts it sees, then looks up the server by its name
    // (its own /etc/hosts, a bind mount of the launcher's making), pings it, and stays a while.
    let look = "grep -c ' /run/netns' /proc/self/mountinfo; ping -n -c 1 -W 2 srv; sleep 1";
    std::fs::write(&file, star(3, look, None)).unwrap();
    let child = spawn_quiet_run(&file, &dir);
    let pid = child.id();
    let lab_mounts = || {
        std::fs::read_to_string("/proc/self/mountinfo")
            .unwrap()
            .matches(&format!("/ll-{pid}-"))
            .count()
    };
    // While the programs run, the machine still has every host's name (the launcher detached
    // them in a mount namespace of its own, which does not reach the machine's).
    let deadline = Instant::now() + Duration::from_secs(20);
    let programs = dir.join("programs/c0.out");
    let mut seen_while_running = 0;
    while Instant::now() < deadline {
        let ran = std::fs::read_to_string(&programs).is_ok_and(|t| t.contains("received"));
        if ran {
            seen_while_running = lab_mounts();
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let o = child.wait_with_output().unwrap();
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        seen_while_running >= 4,
        "{seen_while_running} of the lab's names mounted"
    );
    for i in 0..3 {
        let out = std::fs::read_to_string(dir.join(format!("programs/c{i}.out"))).unwrap();
        assert!(out.starts_with("0\n"), "c{i} saw namespace mounts:\n{out}");
        assert!(out.contains("1 received"), "c{i}:\n{out}");
    }
    assert_eq!(lab_mounts(), 0);
    let _ = std::fs::remove_dir_all(&dir);
    assert_nothing_left();
}

/// `latencylab run -q FILE -o DIR --no-capture`, started and left running, its stderr piped.
fn spawn_quiet_run(file: &std::path::Path, dir: &std::path::Path) -> std::process::Child {
    Command::new(bin())
        .args(["run", "-q"])
        .arg(file)
        .arg("-o")
        .arg(dir)
        .arg("--no-capture")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}
