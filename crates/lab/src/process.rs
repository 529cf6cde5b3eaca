//! Processes in the lab's namespaces, as the lab sees them from outside: signals, the
//! processes a namespace still holds (to kill them at the end), and whether a server listens
//! yet. Programs are started by the program launcher (the `launcher` crate).

use std::fs;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant as StdInstant};

pub use launcher::{
    exit_code_of, invoking_user, set_affinity, CpuPlan, HostFiles, LabSetup, LaunchEvent, Launcher,
    RunAs, StartSpec,
};

/// The inode of a namespace file: processes whose /proc/PID/ns/net has it are in the namespace.
pub fn ns_inode(fd: RawFd) -> Option<u64> {
    nix::sys::stat::fstat(fd).ok().map(|s| s.st_ino)
}

/// Every process (other than this one) whose network namespace is one of `inodes`, in one
/// pass over /proc whatever the number of namespaces.
pub fn processes_in_namespaces(inodes: &[u64]) -> Vec<i32> {
    let me = std::process::id() as i32;
    let mut pids = Vec::new();
    if inodes.is_empty() {
        return pids;
    }
    let wanted: std::collections::HashSet<u64> = inodes.iter().copied().collect();
    let Ok(dir) = fs::read_dir("/proc") else {
        return pids;
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if pid == me {
            continue;
        }
        if let Ok(s) = fs::metadata(format!("/proc/{pid}/ns/net")) {
            use std::os::unix::fs::MetadataExt;
            if wanted.contains(&s.ino()) {
                pids.push(pid);
            }
        }
    }
    pids
}

/// Kills every process in the namespaces and waits (up to a second) for them to be gone.
pub fn kill_all_in_namespaces(inodes: &[u64]) {
    let deadline = StdInstant::now() + Duration::from_secs(1);
    loop {
        let pids = processes_in_namespaces(inodes);
        if pids.is_empty() || StdInstant::now() > deadline {
            return;
        }
        for p in pids {
            // SAFETY: kill takes plain integers.
            unsafe {
                libc::kill(p, libc::SIGKILL);
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// True once the process has a listening TCP socket or a bound UDP socket in its namespace
/// (read from /proc/PID/net, which shows the process's namespace).
///
/// Slow: the kernel walks its whole table of TCP connections, every namespace's, for each
/// read of /proc/PID/net/tcp (about a millisecond per read on a machine with much memory), so
/// each file is read in one call into a large buffer, and the engine asks a [`ListenWatch`]
/// rather than this.
pub fn has_listener(pid: u32) -> bool {
    use std::io::Read;
    [
        ("tcp", true),
        ("tcp6", true),
        ("udp", false),
        ("udp6", false),
    ]
    .iter()
    .any(|(file, tcp)| {
        let mut text = String::with_capacity(64 * 1024);
        fs::File::open(format!("/proc/{pid}/net/{file}"))
            .and_then(|mut f| f.read_to_string(&mut text))
            .is_ok_and(|_| labnet::system::has_listener(&text, *tcp))
    })
}

/// Whether a process listens yet ([`has_listener`]), asked every [`LISTEN_POLL`] from a
/// thread of its own at ordinary priority, where the engine's loop is not held up by it.
/// Dropping it tells the thread to stop after its current look; nothing waits for that.
pub struct ListenWatch {
    listening: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
}

/// How often a [`ListenWatch`] looks.
pub const LISTEN_POLL: Duration = Duration::from_millis(5);

impl ListenWatch {
    /// Starts watching `pid`, on `cpus` when given (where programs start, away from the
    /// engine's CPU).
    pub fn start(pid: u32, cpus: Option<Vec<usize>>) -> ListenWatch {
        let listening = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let (l, st) = (listening.clone(), stop.clone());
        let spawned = std::thread::Builder::new()
            .name("listen-watch".into())
            .spawn(move || {
                // Not the engine's real-time policy nor its CPU, which a thread inherits.
                crate::sys::normal_policy();
                if let Some(c) = cpus {
                    set_affinity(0, &c);
                }
                while !st.load(Ordering::Relaxed) {
                    if has_listener(pid) {
                        l.store(true, Ordering::Relaxed);
                        return;
                    }
                    std::thread::sleep(LISTEN_POLL);
                }
            });
        if spawned.is_err() {
            // No thread to spare: the server is taken as listening, as when it has had its
            // time to start, rather than the command never starting.
            listening.store(true, Ordering::Relaxed);
        }
        ListenWatch { listening, stop }
    }

    /// Whether the process was seen listening.
    pub fn listening(&self) -> bool {
        self.listening.load(Ordering::Relaxed)
    }
}

impl Drop for ListenWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Sends a signal to a process group, ignoring "no such process".
pub fn signal_group(pgid: i32, sig: libc::c_int) {
    // SAFETY: kill takes plain integers; a negative pid names a process group.
    unsafe {
        libc::kill(-pgid, sig);
    }
}

pub fn signal(pid: i32, sig: libc::c_int) {
    // SAFETY: kill takes plain integers.
    unsafe {
        libc::kill(pid, sig);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A process in a network namespace of its own (`unshare -n`, which needs root), running
    /// `script` in Python, its standard input a pipe from the test.
    fn isolated(script: &str) -> Option<std::process::Child> {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("skipped: unshare -n needs root");
            return None;
        }
        let child = std::process::Command::new("unshare")
            .args(["-n", "python3", "-c", script])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .ok()?;
        // Until `unshare` has made its namespace, /proc/PID/net is this process's own.
        let ns = |pid: &str| fs::read_link(format!("/proc/{pid}/ns/net")).ok();
        let t0 = StdInstant::now();
        while ns(&child.id().to_string()) == ns("self") && t0.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(5));
        }
        Some(child)
    }

    fn seen_within(w: &ListenWatch, limit: Duration) -> bool {
        let t0 = StdInstant::now();
        while t0.elapsed() < limit {
            if w.listening() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        false
    }

    #[test]
    fn a_listen_watch_sees_a_listener_only_in_its_namespace_once_it_listens() {
        // It listens only when told to on its standard input, however slow the machine.
        let listen = "import socket,sys,time\nsys.stdin.readline()\ns=socket.socket()\ns.bind(('127.0.0.1',4999))\ns.listen()\ntime.sleep(10)";
        let idle = "import time\ntime.sleep(10)";
        let (Some(mut a), Some(mut b)) = (isolated(listen), isolated(idle)) else {
            return;
        };
        // `unshare` execs python3 in place: the child's pid is the process to watch.
        let wa = ListenWatch::start(a.id(), None);
        let wb = ListenWatch::start(b.id(), None);
        std::thread::sleep(Duration::from_millis(200));
        assert!(!wa.listening(), "seen listening before it bound its socket");
        use std::io::Write;
        a.stdin.take().unwrap().write_all(b"listen\n").unwrap();
        assert!(
            seen_within(&wa, Duration::from_secs(5)),
            "never seen listening"
        );
        assert!(!wb.listening(), "a process with no socket seen listening");
        for c in [&mut a, &mut b] {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
