//! What the end-to-end tests share: running the `latencylab` binary, scratch directories, one
//! lab at a time, the check that a lab left nothing behind, and rendering pages in headless
//! Chromium. Each test file uses part of it.
#![allow(dead_code)]

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

/// The `latencylab` the tests run: a small script in this test process's scratch root that
/// notes each process it starts (a lab's process id is that of its namespaces' names: `exec`
/// keeps it) and marks it, and so every lab program, with this test process's id, so that
/// [`assert_nothing_left`] looks at this test process's labs only. Other labs on the machine
/// (another test binary's, a person's) are none of its business.
pub fn bin() -> &'static str {
    static WRAPPER: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    WRAPPER.get_or_init(|| {
        use std::os::unix::fs::PermissionsExt;
        let root = scratch_root();
        let pids = root.join("lab-pids");
        fs::write(&pids, "").expect("lab-pids written");
        // Labs run as another user (tests without root) note themselves too.
        fs::set_permissions(&pids, fs::Permissions::from_mode(0o666)).expect("lab-pids mode");
        let script = root.join("latencylab");
        fs::write(
            &script,
            format!(
                "#!/bin/sh\necho $$ >> '{}' 2>/dev/null\n{OWNER_VAR}={} exec '{}' \"$@\"\n",
                pids.display(),
                std::process::id(),
                real_bin()
            ),
        )
        .expect("wrapper written");
        fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).expect("wrapper mode");
        let _ = TUNS_BEFORE.set(tun_devices());
        script
            .to_str()
            .expect("a UTF-8 temporary directory")
            .to_string()
    })
}

/// The binary itself, for a test that copies it elsewhere (the script of [`bin`] names it by
/// its path in the build directory).
pub fn real_bin() -> &'static str {
    env!("CARGO_BIN_EXE_latencylab")
}

/// The variable by which a lab's processes name the test process that started the lab.
pub const OWNER_VAR: &str = "LATENCYLAB_TEST_OWNER";

/// Marks `cmd` (a lab started without [`bin`]'s script) and every process it starts as this
/// test process's, as the script does.
pub fn mark_as_own(cmd: &mut Command) -> &mut Command {
    cmd.env(OWNER_VAR, std::process::id().to_string())
}

/// Whether process `pid` carries this test process's mark (see [`mark_as_own`]).
pub fn marked_as_own(pid: u32) -> bool {
    let mark = format!("{OWNER_VAR}={}", std::process::id());
    fs::read(format!("/proc/{pid}/environ"))
        .unwrap_or_default()
        .split(|b| *b == 0)
        .any(|v| v == mark.as_bytes())
}

/// Notes `pid` as a lab of this test process's (what [`bin`]'s script does for the labs it
/// starts), for the checks of what a lab left behind.
pub fn note_own_lab(pid: u32) {
    use std::io::Write;
    let _ = bin();
    let pids = scratch_root().join("lab-pids");
    let mut f = fs::OpenOptions::new()
        .append(true)
        .open(&pids)
        .expect("lab-pids opens");
    writeln!(f, "{pid}").expect("lab-pids written");
}

/// TUN devices in the machine's namespace before this test process ran its first lab.
static TUNS_BEFORE: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();

/// Runs `latencylab ARGS` to its end with no input.
pub fn run(args: &[&str]) -> Output {
    Command::new(bin())
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("latencylab runs")
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).to_string()
}

/// A fresh scratch path (not created) for this test process, named `name`, inside
/// [`scratch_root`].
pub fn out_dir(name: &str) -> PathBuf {
    let d = scratch_root().join(name);
    let _ = fs::remove_dir_all(&d);
    d
}

static TEST_FAILED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
static SCRATCH_ROOT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// This test process's scratch directory, `$TMPDIR/latencylab-test-PID`: removed when the
/// process exits if every test passed, kept (and named on stderr) if one panicked, so a failing
/// test's run directories stay for inspection. Mode 1777 like /tmp, so a test that runs a lab
/// as an unprivileged user can create its run directory in it.
pub fn scratch_root() -> &'static Path {
    SCRATCH_ROOT.get_or_init(|| {
        use std::os::unix::fs::PermissionsExt;
        let root = std::env::temp_dir().join(format!("latencylab-test-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        fs::create_dir_all(&root).expect("scratch root created");
        fs::set_permissions(&root, fs::Permissions::from_mode(0o1777)).expect("scratch root mode");
        let default_hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            TEST_FAILED.store(true, std::sync::atomic::Ordering::SeqCst);
            default_hook(info)
        }));
        // SAFETY: registering a plain `extern "C" fn` that takes no arguments.
        unsafe { libc::atexit(remove_scratch_root) };
        root
    })
}

extern "C" fn remove_scratch_root() {
    let Some(root) = SCRATCH_ROOT.get() else {
        return;
    };
    if TEST_FAILED.load(std::sync::atomic::Ordering::SeqCst) {
        eprintln!(
            "a test failed: its scratch directories are kept in {}",
            root.display()
        );
    } else {
        let _ = fs::remove_dir_all(root);
    }
}

static LAB: Mutex<()> = Mutex::new(());

/// One lab at a time in a test binary: two labs on two cores would disturb each other's
/// timing. (Cargo runs the test binaries themselves one after another.)
pub fn lock() -> MutexGuard<'static, ()> {
    LAB.lock().unwrap_or_else(|p| p.into_inner())
}

/// A bulk download through a lab, run to its end: `latencylab shell OPTIONS --server SERVER --
/// latencylab bulk-client server --duration DURATION --out OUT`.
pub fn bulk_shell(options: &[&str], server: &str, duration: &str, out: &Path) -> Output {
    let mut args = vec!["shell"];
    args.extend_from_slice(options);
    args.extend_from_slice(&[
        "--server",
        server,
        "--",
        "latencylab",
        "bulk-client",
        "server",
    ]);
    args.extend_from_slice(&["--duration", duration, "--out", out.to_str().unwrap()]);
    run(&args)
}

/// The JSON lines of a traffic program's output file.
pub fn json_lines(path: &Path) -> Vec<serde_json::Value> {
    fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

pub fn read_json(path: &Path) -> serde_json::Value {
    serde_json::from_str(
        &fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
    )
    .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// What `tcpdump -nr PCAP` prints, one line per packet; fails the test if tcpdump cannot read it.
pub fn tcpdump_read(pcap: &Path) -> String {
    let t = Command::new("tcpdump")
        .args(["-nr", pcap.to_str().unwrap()])
        .output()
        .expect("tcpdump is installed");
    assert!(
        t.status.success(),
        "tcpdump -r {}: {}",
        pcap.display(),
        text(&t.stderr)
    );
    text(&t.stdout)
}

/// How late the lab in run directory `dir` delivered packets, as its `summary.json` says:
/// `stat` of `p50`, `p95`, `p99`, `max`, ms. A busy machine's share of a measured delay.
#[allow(dead_code)]
pub fn lab_lateness_ms(dir: &Path, stat: &str) -> f64 {
    let s = read_json(&dir.join("summary.json"));
    s["engine"]["delivery_lateness_ms"][stat]
        .as_f64()
        .unwrap_or_else(|| panic!("{}: no lateness {stat}: {s}", dir.display()))
}

pub fn median(mut v: Vec<f64>) -> f64 {
    assert!(!v.is_empty(), "median of nothing");
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

// ---- nothing left behind ----

/// Every lab namespace on the machine (`/run/netns/ll-PID-HOST`).
pub fn lab_namespaces() -> Vec<String> {
    fs::read_dir("/run/netns")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().to_string())
                .filter(|n| n.starts_with("ll-"))
                .collect()
        })
        .unwrap_or_default()
}

/// The process ids of the labs (and other `latencylab` processes) this test process started
/// through [`bin`].
pub fn own_lab_pids() -> Vec<u32> {
    let Some(root) = SCRATCH_ROOT.get() else {
        return Vec::new();
    };
    fs::read_to_string(root.join("lab-pids"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// The lab process a namespace name belongs to (`ll-PID-HOST`).
fn lab_pid_of(namespace: &str) -> Option<u32> {
    namespace
        .strip_prefix("ll-")?
        .split('-')
        .next()?
        .parse()
        .ok()
}

/// Namespaces of labs still running (other tests or people may run labs at the same time),
/// with their inode.
pub fn live_lab_namespaces() -> Vec<(String, u64)> {
    lab_namespaces()
        .into_iter()
        .filter(|n| lab_pid_of(n).is_some_and(alive))
        .filter_map(|n| {
            fs::metadata(format!("/run/netns/{n}"))
                .ok()
                .map(|m| (n, m.ino()))
        })
        .collect()
}

/// Namespaces whose lab, one this test process started, has ended.
pub fn dead_lab_namespaces() -> Vec<String> {
    let own = own_lab_pids();
    lab_namespaces()
        .into_iter()
        .filter(|n| lab_pid_of(n).is_some_and(|p| own.contains(&p) && !alive(p)))
        .collect()
}

/// The mounts of those namespaces' names (each `/run/netns/ll-PID-HOST` is a bind mount).
pub fn dead_lab_mounts() -> Vec<String> {
    let own = own_lab_pids();
    fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .filter(|m| {
            m.strip_prefix("/run/netns/")
                .and_then(lab_pid_of)
                .is_some_and(|p| own.contains(&p) && !alive(p))
        })
        .map(str::to_string)
        .collect()
}

/// Processes of this test process's labs (marked by [`bin`]'s script, and their children
/// after them) in a network namespace other than the machine's and not of a live lab: programs
/// that outlived their lab.
pub fn orphaned_processes() -> Vec<String> {
    // The test runs in the machine's own namespace.
    let root = fs::metadata("/proc/self/ns/net").expect("/proc").ino();
    let live: Vec<u64> = live_lab_namespaces().into_iter().map(|(_, i)| i).collect();
    let mut found = Vec::new();
    for e in fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(m) = fs::metadata(format!("/proc/{pid}/ns/net")) else {
            continue;
        };
        if marked_as_own(pid) && m.ino() != root && !live.contains(&m.ino()) {
            let comm = fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            found.push(format!("{pid} {}", comm.trim()));
        }
    }
    found
}

/// TUN devices in the machine's own namespace.
pub fn tun_devices() -> Vec<String> {
    fs::read_dir("/sys/class/net")
        .unwrap()
        .flatten()
        .filter(|e| e.path().join("tun_flags").exists())
        .map(|e| e.file_name().to_string_lossy().to_string())
        .collect()
}

/// Fails the test if a lab this test process started (through [`bin`]) and that has ended
/// left a namespace, its mount, a process, or a runtime directory; or if a TUN device appeared
/// in the machine's namespace since its first lab (a lab makes its devices inside its hosts'
/// namespaces, never there).
pub fn assert_nothing_left() {
    // The kernel frees a namespace asynchronously once its last holder is gone.
    for _ in 0..50 {
        if dead_lab_namespaces().is_empty() && orphaned_processes().is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        dead_lab_namespaces(),
        Vec::<String>::new(),
        "namespaces left behind"
    );
    assert_eq!(
        dead_lab_mounts(),
        Vec::<String>::new(),
        "namespace mounts left behind"
    );
    assert_eq!(
        orphaned_processes(),
        Vec::<String>::new(),
        "processes left behind"
    );
    let before = TUNS_BEFORE.get().cloned().unwrap_or_default();
    let tuns: Vec<String> = tun_devices()
        .into_iter()
        .filter(|t| !before.contains(t))
        .collect();
    assert_eq!(
        tuns,
        Vec::<String>::new(),
        "TUN devices in the machine's namespace"
    );
    let stale: Vec<u32> = own_lab_pids()
        .into_iter()
        .filter(|p| !alive(*p) && Path::new(&format!("/run/latencylab/{p}")).exists())
        .collect();
    assert!(
        stale.is_empty(),
        "runtime directories left behind: /run/latencylab/{stale:?}"
    );
}

// ---- pages in headless Chromium ----

pub fn chromium() -> PathBuf {
    let p = PathBuf::from("/usr/bin/chromium");
    assert!(
        p.exists(),
        "chromium not found at /usr/bin/chromium: install the `chromium` Debian package"
    );
    p
}

/// A created scratch directory, unique within this test process.
pub fn tempdir(name: &str) -> PathBuf {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let d = out_dir(&format!("{name}-{}", N.fetch_add(1, Ordering::Relaxed)));
    fs::create_dir_all(&d).unwrap();
    d
}

/// Loads `page` in headless Chromium with `extra` arguments, offline; returns stdout.
pub fn run_chromium(page: &Path, extra: &[String]) -> String {
    run_chromium_url(&format!("file://{}", page.display()), extra)
}

/// Loads `url` (a file, or a page served on loopback) in headless Chromium with `extra`
/// arguments, nothing else reached; returns stdout.
pub fn run_chromium_url(url: &str, extra: &[String]) -> String {
    let profile = tempdir("profile");
    let out = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--window-size=1400,1000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(extra)
        .arg(url)
        .output()
        .expect("chromium starts");
    let _ = fs::remove_dir_all(&profile);
    assert!(
        out.status.success(),
        "chromium failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Checks that `dir` holds each chart `NAME.png` as a real picture: a PNG file (its signature,
/// RFC 2083 section 3.1) whose header chunk (section 4.1.1) gives a chart's size, at least
/// 300 × 200 pixels, and whose drawing is more than a blank canvas (over 10 kB).
pub fn assert_charts(dir: &Path, names: &[&str]) {
    for name in names {
        let p = dir.join(format!("{name}.png"));
        let png = fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        assert!(
            png.len() > 24 && png.starts_with(b"\x89PNG\r\n\x1a\n") && &png[12..16] == b"IHDR",
            "{} is not a PNG file",
            p.display()
        );
        let be = |at: usize| u32::from_be_bytes(png[at..at + 4].try_into().expect("4 bytes"));
        let (width, height) = (be(16), be(20));
        assert!(
            width >= 300 && height >= 200,
            "{} is only {width} × {height} pixels",
            p.display()
        );
        assert!(
            png.len() > 10_000,
            "{} is only {} bytes: nearly blank",
            p.display(),
            png.len()
        );
    }
}

/// Renders `page`, checks the screenshot is not blank and every figure id is in the DOM with
/// an inline SVG and a caption; returns the DOM.
pub fn check_renders(page: &Path, figures: &[&str]) -> String {
    let shots = tempdir("shot");
    let shot = shots.join("shot.png");
    run_chromium(page, &[format!("--screenshot={}", shot.display())]);
    let len = fs::metadata(&shot).expect("screenshot written").len();
    // A blank 1400×1000 page compresses to a few kB; text, a table and charts do not.
    assert!(len > 30_000, "screenshot is only {len} bytes: nearly blank");
    if std::env::var_os("DEMO_TEST_KEEP").is_none() {
        let _ = fs::remove_dir_all(&shots);
    }
    let dom = run_chromium(page, &["--dump-dom".to_string()]);
    for id in figures {
        let at = dom
            .find(&format!("id=\"{id}\""))
            .unwrap_or_else(|| panic!("no figure {id} in the rendered page"));
        let fig = &dom[at..];
        let fig = &fig[..fig.find("</figure>").expect("figure closes")];
        assert!(fig.contains("<svg"), "figure {id} has no inline svg");
        assert!(fig.contains("<figcaption"), "figure {id} has no caption");
    }
    dom
}

/// Runs `latencylab demo ARGS --quiet -o DIR` in a fresh directory named after `name` and
/// fails with its output unless it succeeds; returns DIR and stdout.
pub fn run_demo_in_tempdir(name: &str, args: &[&str]) -> (PathBuf, String) {
    let dir = tempdir(name);
    let out = Command::new(bin())
        .arg("demo")
        .args(args)
        .args(["--quiet", "-o"])
        .arg(&dir)
        .stdin(Stdio::null())
        .output()
        .expect("latencylab runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "demo {args:?} failed: {}\nstdout:\n{stdout}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    (dir, stdout)
}
