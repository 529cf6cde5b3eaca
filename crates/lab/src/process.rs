//! Processes in the lab's namespaces, as the lab sees them from outside: signals, the
//! processes a namespace still holds (to kill them at the end), and whether a server listens
//! yet. Programs are started by the program launcher (the `launcher` crate).

use std::fs;
use std::os::fd::RawFd;
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
pub fn has_listener(pid: u32) -> bool {
    [
        ("tcp", true),
        ("tcp6", true),
        ("udp", false),
        ("udp6", false),
    ]
    .iter()
    .any(|(file, tcp)| {
        fs::read_to_string(format!("/proc/{pid}/net/{file}"))
            .is_ok_and(|t| labnet::system::has_listener(&t, *tcp))
    })
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
