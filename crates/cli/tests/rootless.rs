//! Labs without sudo, run as an unprivileged user, and the files of labs run under sudo given
//! to the user who ran it.
//!
//! The test setup runs as root (as `scripts/test` does): it creates the unprivileged user
//! `latencylab-test` when missing and opens `/dev/net/tun` to it (mode 0666, the default on
//! Debian, Ubuntu and Fedora) when the machine keeps it closed (docs/guide.md says so).

mod common;

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{bin, lab_lateness_ms, lock, real_bin, text};

const USER: &str = "latencylab-test";

/// The unprivileged user's uid and gid, created on first use, with /dev/net/tun open to it.
fn user() -> (u32, u32) {
    let id = |flag: &str| -> Option<u32> {
        let o = Command::new("id").args([flag, USER]).output().ok()?;
        text(&o.stdout).trim().parse().ok()
    };
    if id("-u").is_none() {
        let st = Command::new("useradd")
            .args([
                "--system",
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
                USER,
            ])
            .status()
            .expect("useradd runs");
        assert!(st.success() || id("-u").is_some(), "useradd {USER} failed");
    }
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = fs::metadata("/dev/net/tun").unwrap().permissions().mode();
        if mode & 0o006 != 0o006 {
            fs::set_permissions("/dev/net/tun", fs::Permissions::from_mode(0o666)).unwrap();
        }
    }
    (id("-u").unwrap(), id("-g").unwrap())
}

/// A fresh directory owned by the user, to run in.
fn user_dir(name: &str) -> PathBuf {
    let (uid, gid) = user();
    let d = common::out_dir(&format!("rootless-{name}"));
    fs::create_dir_all(&d).unwrap();
    std::os::unix::fs::chown(&d, Some(uid), Some(gid)).unwrap();
    d
}

/// `latencylab ARGS` as the unprivileged user, in `dir`, with a plain user's environment (no
/// SUDO_*, no XDG_RUNTIME_DIR: runtime files go to /tmp) and this test process's mark, which
/// the lab's processes inherit (other labs may run as the same user at the same time). Where the machine allows it (root
/// with CAP_SYS_RESOURCE, as in CI), the user gets the real-time priority limit that
/// docs/guide.md recommends for rootless labs.
fn as_user(dir: &Path, program: &str, args: &[&str]) -> Command {
    let (uid, gid) = user();
    let mut c = Command::new(program);
    c.args(args)
        .current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", dir)
        .env("USER", USER)
        .stdin(Stdio::null())
        .uid(uid)
        .gid(gid);
    common::mark_as_own(&mut c);
    // SAFETY: setrlimit is a plain syscall on data prepared before the fork.
    unsafe {
        c.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: 10,
                rlim_max: 10,
            };
            libc::setrlimit(libc::RLIMIT_RTPRIO, &lim);
            Ok(())
        });
    }
    c
}

fn run_as_user(dir: &Path, args: &[&str]) -> Output {
    as_user(dir, bin(), args).output().expect("latencylab runs")
}

/// Whether a root process here may raise a resource limit (CI's root may; a container's root
/// without CAP_SYS_RESOURCE may not).
fn can_raise_rtprio() -> bool {
    let caps = fs::read_to_string("/proc/self/status").unwrap();
    let eff = caps
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|h| u64::from_str_radix(h.trim(), 16).ok())
        .unwrap_or(0);
    eff & (1 << 24) != 0
}

/// Every entry under `dir` (and `dir`) with an owner other than uid:gid.
fn not_owned_by(dir: &Path, uid: u32, gid: u32) -> Vec<String> {
    let mut bad = Vec::new();
    let m = fs::symlink_metadata(dir).unwrap();
    if (m.uid(), m.gid()) != (uid, gid) {
        bad.push(format!("{} {}:{}", dir.display(), m.uid(), m.gid()));
    }
    if m.is_dir() {
        for e in fs::read_dir(dir).unwrap() {
            bad.extend(not_owned_by(&e.unwrap().path(), uid, gid));
        }
    }
    bad
}

/// The user removes what they produced, as themselves.
fn user_removes(parent: &Path, name: &str) {
    let o = as_user(parent, "rm", &["-rf", name]).output().unwrap();
    assert!(o.status.success(), "rm -rf {name}: {}", text(&o.stderr));
    assert!(!parent.join(name).exists(), "{name} still exists");
}

/// Processes of the user in a network namespace other than the machine's that this test process
/// started (through [`as_user`]): a rootless lab's hosts (its namespaces live exactly as long as
/// some process or descriptor holds them, and the lab's own descriptors go with it). Labs that
/// others run as the same user are not counted.
fn own_user_processes_in_other_netns(uid: u32) -> Vec<String> {
    let root = fs::metadata("/proc/self/ns/net").unwrap().ino();
    let mut found = Vec::new();
    for e in fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(m) = fs::metadata(format!("/proc/{pid}")) else {
            continue;
        };
        if m.uid() != uid || !common::marked_as_own(pid) {
            continue;
        }
        match fs::metadata(format!("/proc/{pid}/ns/net")) {
            Ok(n) if n.ino() != root => {
                let comm = fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
                found.push(format!("{pid} {}", comm.trim()));
            }
            _ => {}
        }
    }
    found
}

/// Runtime directories of the user's rootless labs that this test process started
/// (`/tmp/latencylab-UID-PID`).
fn own_runtime_dirs(uid: u32) -> Vec<String> {
    let prefix = format!("latencylab-{uid}-");
    let own = common::own_lab_pids();
    fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| {
            n.strip_prefix(&prefix)
                .and_then(|p| p.parse::<u32>().ok())
                .is_some_and(|p| own.contains(&p))
        })
        .collect()
}

/// Nothing of the user's labs that this test process started is left: no process in a lab
/// namespace (and so no namespace), no TUN device in the machine's namespace, no runtime
/// directory.
fn assert_nothing_left(uid: u32) {
    // A SIGKILLed lab is removed by its watcher, which may take seconds on a loaded machine;
    // the wait ends as soon as nothing is left.
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline
        && !(own_user_processes_in_other_netns(uid).is_empty() && own_runtime_dirs(uid).is_empty())
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(own_user_processes_in_other_netns(uid), Vec::<String>::new());
    assert_eq!(
        own_runtime_dirs(uid),
        Vec::<String>::new(),
        "runtime files left"
    );
    assert_eq!(common::tun_devices(), Vec::<String>::new());
    common::assert_nothing_left();
}

#[test]
fn rootless_shell_pings_over_a_40ms_path() {
    let _g = lock();
    let (uid, _) = user();
    let dir = user_dir("ping");
    let out_dir = dir.join("run");
    let o = run_as_user(
        &dir,
        &[
            "shell",
            "--rtt",
            "40ms",
            "-o",
            out_dir.to_str().unwrap(),
            "--",
            "ping",
            "-c",
            "10",
            "-i",
            "0.2",
            "server",
        ],
    );
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}{}", text(&o.stderr));
    let times: Vec<f64> = out
        .split("time=")
        .skip(1)
        .filter_map(|s| s.split_whitespace().next()?.parse().ok())
        .collect();
    assert_eq!(times.len(), 10, "{out}");
    let min = times.iter().cloned().fold(f64::INFINITY, f64::min);
    let mean = times.iter().sum::<f64>() / times.len() as f64;
    assert!(min >= 40.0, "faster than the path: {times:?}");
    // A busy machine delays the lab's engine: what the lab measured of its own lateness (each
    // ping crosses it twice) is allowed on top.
    let late_ms = lab_lateness_ms(&out_dir, "p99");
    let median = common::median(times.clone());
    assert!(
        (median - 40.0).abs() <= 0.5 + 2.0 * late_ms,
        "median {median:.2} ms, the lab's lateness p99 {late_ms} ms: {times:?}"
    );
    // The mean holds every late wake-up of the lab's loop: without real-time priority (a
    // container's root cannot grant the limit) a loaded machine adds milliseconds.
    if can_raise_rtprio() {
        let late_max_ms = lab_lateness_ms(&out_dir, "max");
        assert!(
            (mean - 40.0).abs() <= 0.5 + 2.0 * late_max_ms,
            "mean {mean:.2} ms, the lab's lateness max {late_max_ms} ms: {times:?}"
        );
    } else {
        eprintln!("no real-time priority limit for the lab here: mean {mean:.2} ms not checked");
    }
    assert_nothing_left(uid);
}

/// A run file with a router between two links and a program on each host, for 2 s, written in
/// `dir` (readable by the user): what a run directory holds (captures, link logs, the
/// programs' output) without the 25 s of examples/wifi-cellular.toml, which lab.rs runs.
fn small_run_file(dir: &Path) -> PathBuf {
    let file = dir.join("small.toml");
    fs::write(
        &file,
        r#"duration = "2s"

[[host]]
name = "client"
[[host]]
name = "server"
[[router]]
name = "r"

[[link]]
name = "access"
a = "client"
b = "r"
rate = "10mbit"
delay = "5ms"

[[link]]
name = "core"
a = "r"
b = "server"
delay = "5ms"

[[program]]
name = "server"
host = "server"
run = "latencylab probe-server"

[[program]]
name = "client"
host = "client"
at = "200ms"
run = "ping -n -i 0.1 -c 10 server"
"#,
    )
    .unwrap();
    file
}

#[test]
fn rootless_run_file_leaves_files_the_user_owns_and_removes() {
    let _g = lock();
    let (uid, gid) = user();
    let dir = user_dir("run");
    let file = small_run_file(&dir);
    let o = run_as_user(&dir, &["run", file.to_str().unwrap(), "-o", "r"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let r = dir.join("r");
    assert!(r.join("summary.json").exists());
    assert!(r.join("captures").read_dir().unwrap().count() >= 2);
    assert_eq!(not_owned_by(&r, uid, gid), Vec::<String>::new());
    user_removes(&dir, "r");
    assert_nothing_left(uid);
}

#[test]
fn rootless_bufferbloat_demo_meets_its_criteria() {
    let _g = lock();
    let (uid, gid) = user();
    let dir = user_dir("demo");
    let o = run_as_user(
        &dir,
        &[
            "demo",
            "bufferbloat",
            "--duration",
            "12s",
            "--quiet",
            "-o",
            "out/bb",
        ],
    );
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}{}", text(&o.stderr));
    let checks: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("ok ") || l.starts_with("NOT"))
        .collect();
    assert!(!checks.is_empty(), "{out}");
    assert!(checks.iter().all(|l| l.starts_with("ok ")), "{out}");
    assert!(dir.join("out/bb/results.json").exists());
    assert_eq!(
        not_owned_by(&dir.join("out"), uid, gid),
        Vec::<String>::new()
    );
    user_removes(&dir, "out");
    assert_nothing_left(uid);
}

/// Kills and reaps its processes when dropped, also when the test fails.
struct KillOnDrop(Vec<Child>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

#[test]
fn the_leftover_check_counts_its_own_labs_and_not_other_labs_of_the_same_user() {
    let _g = lock();
    let (uid, _) = user();
    let dir = user_dir("check");
    // A process of the user in a namespace of its own, as a leftover lab host would be: one
    // started by this test process, one as if by another lab of the same user.
    let host = |own: bool| {
        let mut c = as_user(
            &dir,
            "unshare",
            &["--user", "--map-root-user", "--net", "sleep", "60"],
        );
        if !own {
            c.env_remove(common::OWNER_VAR);
        }
        c.stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };
    let procs = KillOnDrop(vec![host(true), host(false)]);
    let (own, other) = (procs.0[0].id(), procs.0[1].id());
    let root = fs::metadata("/proc/self/ns/net").unwrap().ino();
    let in_own_netns =
        |pid: u32| fs::metadata(format!("/proc/{pid}/ns/net")).is_ok_and(|m| m.ino() != root);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !(in_own_netns(own) && in_own_netns(other)) {
        assert!(Instant::now() < deadline, "unshare did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        own_user_processes_in_other_netns(uid),
        vec![format!("{own} sleep")]
    );
    // Runtime directories: one of a lab of this test process's, one of another's.
    common::note_own_lab(own);
    let runtime = |pid: u32| std::env::temp_dir().join(format!("latencylab-{uid}-{pid}"));
    for pid in [own, other] {
        fs::create_dir_all(runtime(pid)).unwrap();
    }
    let seen = own_runtime_dirs(uid);
    for pid in [own, other] {
        fs::remove_dir(runtime(pid)).unwrap();
    }
    assert_eq!(seen, vec![format!("latencylab-{uid}-{own}")]);
    drop(procs);
    assert_nothing_left(uid);
}

/// A lab with a server and a command, stopped by `sig` after `after`.
fn stop_lab(dir: &Path, sig: i32, after: Duration) {
    // The binary itself: a signal in its first milliseconds must reach the lab, not a shell
    // about to exec it.
    let mut child: Child = as_user(
        dir,
        real_bin(),
        &[
            "shell",
            "--rtt",
            "10ms",
            "-o",
            "r",
            "--server",
            "latencylab bulk-server",
            "--",
            "sh",
            "-c",
            "ping -c 100 -i 0.05 server >/dev/null; sleep 30",
        ],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    common::note_own_lab(child.id());
    std::thread::sleep(after);
    // SAFETY: kill takes plain integers.
    unsafe {
        libc::kill(child.id() as i32, sig);
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "signal {sig}: the lab did not end"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn rootless_labs_stopped_by_any_signal_at_any_moment_leave_nothing() {
    let _g = lock();
    let (uid, _) = user();
    let dir = user_dir("signals");
    // Moments from the first milliseconds (namespaces half built) to a running lab, in a fixed
    // pseudo-random order (a linear congruential sequence, seed 23).
    let mut x: u64 = 23;
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGKILL] {
        for _ in 0..4 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let after = Duration::from_millis(5 + (x >> 33) % 1500);
            stop_lab(&dir, sig, after);
            eprintln!("signal {sig} after {after:?}");
            assert_nothing_left(uid);
            user_removes(&dir, "r");
        }
    }
}

/// Runs a rootless lab through `sh -c SETUP; exec latencylab shell -- true` as the user.
fn refused(setup_as_user: &[&str], script: &str) -> Output {
    let dir = user_dir("refused");
    let line = format!("{script}; exec {} shell -- true", bin());
    let mut args: Vec<&str> = setup_as_user.to_vec();
    args.extend(["sh", "-c", &line]);
    let (prog, rest) = args.split_first().unwrap();
    as_user(&dir, prog, rest).output().unwrap()
}

#[test]
fn rootless_lab_refused_by_user_max_user_namespaces_says_so_and_leaves_nothing() {
    let _g = lock();
    let (uid, _) = user();
    // The limit is per user namespace: set to 0 in one of the test's own, it forbids the lab's.
    let o = refused(
        &["unshare", "--map-current-user", "--keep-caps"],
        "echo 0 > /proc/sys/user/max_user_namespaces",
    );
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("user.max_user_namespaces = 0"), "{err}");
    assert!(err.contains("sudo"), "{err}");
    assert_nothing_left(uid);
}

#[test]
fn rootless_lab_without_access_to_dev_net_tun_says_so_and_leaves_nothing() {
    let _g = lock();
    let (uid, gid) = user();
    let dir = user_dir("tun");
    // A private mount namespace (of root's) where /dev/net/tun is a root-only file; the lab
    // then runs in it as the user.
    let closed = dir.join("tun-closed");
    fs::write(&closed, "").unwrap();
    let o = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c"])
        .arg(format!(
            "mount --bind {} /dev/net/tun && chmod 0600 {} && exec setpriv --reuid={uid} \
             --regid={gid} --clear-groups env -i PATH=/usr/bin:/bin {} shell -- true",
            closed.display(),
            closed.display(),
            bin()
        ))
        .current_dir(&dir)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("/dev/net/tun is not open to you (mode 0600"),
        "{err}"
    );
    assert!(err.contains("chmod 0666 /dev/net/tun"), "{err}");
    assert_nothing_left(uid);
}

/// `latencylab ARGS` as root in `dir`, as if run through sudo by the test user.
fn under_sudo(dir: &Path, args: &[&str]) -> Output {
    let (uid, gid) = user();
    let o = Command::new(bin())
        .args(args)
        .current_dir(dir)
        .env("SUDO_UID", uid.to_string())
        .env("SUDO_GID", gid.to_string())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{args:?}: {}", text(&o.stderr));
    o
}

#[test]
fn under_sudo_every_file_of_a_lab_belongs_to_the_user() {
    let _g = lock();
    let (uid, gid) = user();
    let dir = common::out_dir("sudo-owner");
    fs::create_dir_all(&dir).unwrap();
    under_sudo(
        &dir,
        &[
            "shell",
            "-o",
            "a/run1",
            "--server",
            "echo hello > \"$LATENCYLAB_OUT/from-server\"; latencylab bulk-server",
            "--",
            "sh",
            "-c",
            "echo hi > \"$LATENCYLAB_OUT/from-command\"",
        ],
    );
    let run1 = dir.join("a/run1");
    for f in [
        "from-server",
        "from-command",
        "summary.json",
        "programs/server.out",
    ] {
        assert!(run1.join(f).exists(), "{f} missing");
    }
    assert_eq!(not_owned_by(&dir.join("a"), uid, gid), Vec::<String>::new());
    // A run file's programs, and the demo's own report and results.
    let file = small_run_file(&dir);
    under_sudo(&dir, &["run", file.to_str().unwrap(), "-o", "run2"]);
    assert_eq!(
        not_owned_by(&dir.join("run2"), uid, gid),
        Vec::<String>::new()
    );
    under_sudo(
        &dir,
        &[
            "demo",
            "bufferbloat",
            "--duration",
            "6s",
            "--quiet",
            "-o",
            "out/bb",
        ],
    );
    assert!(dir.join("out/bb/report.html").exists());
    assert_eq!(
        not_owned_by(&dir.join("out"), uid, gid),
        Vec::<String>::new()
    );
    std::os::unix::fs::chown(&dir, Some(uid), Some(gid)).unwrap();
    for name in ["a", "run2", "out"] {
        user_removes(&dir, name);
    }
    let _ = fs::remove_dir_all(&dir);
    common::assert_nothing_left();
}
