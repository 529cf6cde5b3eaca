//! Leaving nothing behind: the namespaces, runtime files and processes of a lab, removed when
//! it ends however it ends, and those of a lab that was killed (SIGKILL leaves no chance to
//! clean) removed by the next one.

use std::fs;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::netns::{self, NETNS_DIR};
use crate::process;
use crate::userns;
use labnet::system;

/// Per-lab runtime files (the lab's /etc/hosts and resolv.conf) live in RUN_DIR/PID under root,
/// and in [`userns::runtime_base`]`/latencylab-UID-PID` without (a directory of the user's,
/// with nothing else of ours beside it).
pub const RUN_DIR: &str = "/run/latencylab";

pub fn runtime_dir(pid: u32) -> PathBuf {
    if userns::rootless() {
        userns::runtime_base().join(format!("{}{pid}", rootless_prefix()))
    } else {
        Path::new(RUN_DIR).join(pid.to_string())
    }
}

fn rootless_prefix() -> String {
    system::rootless_runtime_prefix(nix::unistd::getuid().as_raw())
}

/// Should the lab process be killed (SIGKILL leaves it no chance to clean), kills what still
/// runs in the lab's network namespaces (a program's children, which `PR_SET_PDEATHSIG` does
/// not reach) and removes the lab's runtime directory. A lab without root has no names under
/// /run/netns by which a later lab could find them. A small `sh` in a process group of its own
/// waits on a pipe that only the lab holds: a clean end writes `done` first; a killed lab's
/// pipe just closes.
pub struct RemoveWhenGone {
    child: Child,
}

/// Arguments: the runtime directory, then the namespaces' inodes.
const WATCH_SCRIPT: &str = r#"read -r end && [ "$end" = done ] && exit 0
dir=$1; shift
for round in 1 2 3; do
  stat -Lc '%i %n' /proc/[0-9]*/ns/net 2>/dev/null | while read -r i p; do
    p=${p#/proc/}
    for ino in "$@"; do [ "$i" = "$ino" ] && kill -9 "${p%%/*}" 2>/dev/null; done
  done
done
rm -rf -- "$dir""#;

impl RemoveWhenGone {
    pub fn start(dir: &Path, ns_inodes: &[u64]) -> std::io::Result<RemoveWhenGone> {
        let mut cmd = Command::new("/bin/sh");
        cmd.args(["-c", WATCH_SCRIPT, "sh"])
            .arg(dir)
            .args(ns_inodes.iter().map(|i| i.to_string()))
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0);
        if userns::rootless() {
            // A program that changed its own credentials (ping drops its capability) is not
            // dumpable, and only CAP_SYS_PTRACE in the lab's user namespace may read its
            // namespace: the watcher keeps that one capability across exec.
            // SAFETY: raw syscalls on stack data, between fork and exec.
            unsafe {
                cmd.pre_exec(|| {
                    // CAP_SYS_PTRACE is 19 (linux/capability.h).
                    crate::sys::keep_ambient_cap(19);
                    Ok(())
                });
            }
        }
        let child = cmd.spawn()?;
        Ok(RemoveWhenGone { child })
    }
}

impl Drop for RemoveWhenGone {
    fn drop(&mut self) {
        if let Some(mut pipe) = self.child.stdin.take() {
            let _ = pipe.write_all(b"done\n");
        }
        let _ = self.child.wait();
    }
}

fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// Removes namespaces and runtime directories whose lab process is gone. Returns the names of
/// the namespaces it removed.
pub fn remove_leftovers() -> Vec<String> {
    let mut removed = Vec::new();
    let mut inodes = Vec::new();
    if let Ok(dir) = fs::read_dir(NETNS_DIR) {
        for e in dir.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            let Some(pid) = system::lab_pid_of_ns(&name) else {
                continue;
            };
            if alive(pid) {
                continue;
            }
            if let Ok(f) = fs::File::open(e.path()) {
                inodes.extend(process::ns_inode(f.as_raw_fd()));
            }
            removed.push(name);
        }
    }
    // One look through /proc for every namespace: a big lab left hundreds.
    process::kill_all_in_namespaces(&inodes);
    for name in &removed {
        netns::remove_ns(name);
    }
    let (base, prefix) = if userns::rootless() {
        (userns::runtime_base(), rootless_prefix())
    } else {
        (PathBuf::from(RUN_DIR), String::new())
    };
    if let Ok(dir) = fs::read_dir(base) {
        for e in dir.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            if let Some(pid) = system::lab_pid_of_runtime_dir(&name, &prefix) {
                if !alive(pid) {
                    let _ = fs::remove_dir_all(e.path());
                }
            }
        }
    }
    removed
}
