//! Programs in lab hosts: started inside a host's network namespace with the lab's own name
//! resolution, as the invoking user when latencylab runs under sudo, and killed with the lab.
//!
//! Everything the child does between fork and exec is a raw syscall on data prepared before the
//! fork (no allocation), because the parent may have other threads.

use std::ffi::CString;
use std::fs;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant as StdInstant};

use anyhow::{Context, Result};

/// Who lab programs run as.
#[derive(Clone, Debug)]
pub struct RunAs {
    pub uid: u32,
    pub gid: u32,
    pub groups: Vec<u32>,
    pub home: Option<String>,
    pub user: Option<String>,
}

/// The invoking user when run through sudo (SUDO_UID/SUDO_GID), root otherwise.
pub fn invoking_user() -> Option<RunAs> {
    let uid: u32 = std::env::var("SUDO_UID").ok()?.parse().ok()?;
    let gid: u32 = std::env::var("SUDO_GID").ok()?.parse().ok()?;
    if uid == 0 {
        return None;
    }
    let user = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
        .ok()
        .flatten();
    let groups = user
        .as_ref()
        .and_then(|u| {
            let name = CString::new(u.name.clone()).ok()?;
            nix::unistd::getgrouplist(&name, nix::unistd::Gid::from_raw(gid)).ok()
        })
        .map(|g| g.into_iter().map(|g| g.as_raw()).collect())
        .unwrap_or_else(|| vec![gid]);
    Some(RunAs {
        uid,
        gid,
        groups,
        home: user.as_ref().map(|u| u.dir.display().to_string()),
        user: user.map(|u| u.name),
    })
}

/// How to start one program.
pub struct Launch<'a> {
    pub ns_fd: RawFd,
    /// Files bind-mounted over /etc/hosts and /etc/resolv.conf in the program's mount namespace.
    pub hosts_file: &'a Path,
    pub resolv_file: &'a Path,
    pub argv: Vec<String>,
    pub env: Vec<(String, String)>,
    pub stdout: Stdio,
    pub stderr: Stdio,
    pub stdin: Stdio,
    /// A process group of its own (background programs), or the lab's (COMMAND, so that the
    /// terminal's Ctrl-C reaches it).
    pub own_process_group: bool,
    pub run_as: Option<RunAs>,
}

fn c(s: &str) -> CString {
    CString::new(s).expect("paths and names have no NUL")
}

/// Starts a program in a host.
pub fn spawn(l: Launch<'_>) -> Result<Child> {
    let (prog, args) = l.argv.split_first().context("empty command")?;
    let mut cmd = Command::new(prog);
    cmd.args(args)
        .stdout(l.stdout)
        .stderr(l.stderr)
        .stdin(l.stdin);
    for (k, v) in &l.env {
        cmd.env(k, v);
    }
    if let Some(r) = &l.run_as {
        if let Some(h) = &r.home {
            cmd.env("HOME", h);
        }
        if let Some(u) = &r.user {
            cmd.env("USER", u).env("LOGNAME", u);
        }
    }
    let ns_fd = l.ns_fd;
    let hosts_src = c(&l.hosts_file.display().to_string());
    let resolv_src = c(&l.resolv_file.display().to_string());
    let etc_hosts = c("/etc/hosts");
    let etc_resolv = c("/etc/resolv.conf");
    let root = c("/");
    let sys = c("/sys");
    let sysfs = c("sysfs");
    let own_pg = l.own_process_group;
    let run_as = l.run_as.clone();
    // SAFETY: the closure runs in the child between fork and exec and makes only raw syscalls on
    // values prepared above; it allocates nothing and touches no lock.
    unsafe {
        cmd.pre_exec(move || {
            let check = |r: libc::c_int| {
                if r < 0 {
                    Err(io::Error::last_os_error())
                } else {
                    Ok(())
                }
            };
            check(libc::setns(ns_fd, libc::CLONE_NEWNET))?;
            check(libc::unshare(libc::CLONE_NEWNS))?;
            // Our mounts stay ours: nothing propagates back to the machine.
            check(libc::mount(
                std::ptr::null(),
                root.as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_SLAVE,
                std::ptr::null(),
            ))?;
            check(libc::mount(
                hosts_src.as_ptr(),
                etc_hosts.as_ptr(),
                std::ptr::null(),
                libc::MS_BIND,
                std::ptr::null(),
            ))?;
            // A machine without /etc/resolv.conf simply keeps having none.
            libc::mount(
                resolv_src.as_ptr(),
                etc_resolv.as_ptr(),
                std::ptr::null(),
                libc::MS_BIND,
                std::ptr::null(),
            );
            // /sys shows the devices of the namespace that mounts it, as `ip netns exec` does.
            // In a user namespace the machine's /sys is locked in place: the new one goes on top.
            libc::umount2(sys.as_ptr(), libc::MNT_DETACH);
            libc::mount(
                sysfs.as_ptr(),
                sys.as_ptr(),
                sysfs.as_ptr(),
                0,
                std::ptr::null(),
            );
            if own_pg {
                check(libc::setpgid(0, 0))?;
            }
            // The lab's loop may run at nice -20; its programs run as ordinary processes.
            libc::setpriority(libc::PRIO_PROCESS, 0, 0);
            if let Some(r) = &run_as {
                check(libc::setgroups(r.groups.len(), r.groups.as_ptr()))?;
                check(libc::setgid(r.gid))?;
                check(libc::setuid(r.uid))?;
            }
            // Dies with the lab, even if the lab is killed with SIGKILL.
            check(libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            ))?;
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            check(libc::sigprocmask(
                libc::SIG_SETMASK,
                &set,
                std::ptr::null_mut(),
            ))?;
            Ok(())
        });
    }
    cmd.spawn()
        .with_context(|| format!("starting '{}'", l.argv.join(" ")))
}

/// The inode of a namespace file: processes whose /proc/PID/ns/net has it are in the namespace.
pub fn ns_inode(fd: RawFd) -> Option<u64> {
    nix::sys::stat::fstat(fd).ok().map(|s| s.st_ino)
}

/// Every process (other than this one) whose network namespace has inode `ino`.
pub fn processes_in_ns(ino: u64) -> Vec<i32> {
    let me = std::process::id() as i32;
    let mut pids = Vec::new();
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
            if s.ino() == ino {
                pids.push(pid);
            }
        }
    }
    pids
}

/// Kills every process in the namespace and waits (up to a second) for them to be gone.
pub fn kill_all_in_ns(ino: u64) {
    let deadline = StdInstant::now() + Duration::from_secs(1);
    loop {
        let pids = processes_in_ns(ino);
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
    let listening = |file: &str, want_state: Option<&str>| {
        fs::read_to_string(format!("/proc/{pid}/net/{file}"))
            .map(|t| {
                t.lines().skip(1).any(|l| {
                    let st = l.split_whitespace().nth(3).unwrap_or("");
                    want_state.is_none_or(|w| st == w)
                })
            })
            .unwrap_or(false)
    };
    listening("tcp", Some("0A"))
        || listening("tcp6", Some("0A"))
        || listening("udp", None)
        || listening("udp6", None)
}

/// Waits until a server started in a host listens, exits, or `timeout` passes.
pub fn wait_until_listening(child: &mut Child, timeout: Duration) {
    let deadline = StdInstant::now() + timeout;
    while StdInstant::now() < deadline {
        if has_listener(child.id()) || matches!(child.try_wait(), Ok(Some(_))) {
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
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

/// Keeps a descriptor from being inherited past exec (TUN and namespace handles).
pub fn cloexec(fd: &impl AsRawFd) {
    // SAFETY: F_SETFD with FD_CLOEXEC on a descriptor we own.
    unsafe {
        libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC);
    }
}
