//! Leaving nothing behind: the namespaces, runtime files and processes of a lab, removed when
//! it ends however it ends, and those of a lab that was killed (SIGKILL leaves no chance to
//! clean) removed by the next one.

use std::fs;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::netns::{self, NETNS_DIR, NS_PREFIX};
use crate::process;
use crate::userns;

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
    format!("latencylab-{}-", nix::unistd::getuid())
}

/// Removes a lab's runtime directory once the lab process is gone, however it went (SIGKILL
/// included): a small `sh` in a process group of its own waits for the end of a pipe that only
/// the lab holds.
pub struct RemoveWhenGone {
    child: Child,
}

impl RemoveWhenGone {
    pub fn start(dir: &Path) -> std::io::Result<RemoveWhenGone> {
        let child = Command::new("/bin/sh")
            .args(["-c", "cat >/dev/null; rm -rf -- \"$1\"", "sh"])
            .arg(dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()?;
        Ok(RemoveWhenGone { child })
    }
}

impl Drop for RemoveWhenGone {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
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
    if let Ok(dir) = fs::read_dir(NETNS_DIR) {
        for e in dir.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            let Some(rest) = name.strip_prefix(NS_PREFIX) else {
                continue;
            };
            let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
                continue;
            };
            if alive(pid) {
                continue;
            }
            if let Ok(f) = fs::File::open(e.path()) {
                if let Some(ino) = process::ns_inode(f.as_raw_fd()) {
                    process::kill_all_in_ns(ino);
                }
            }
            netns::remove_ns(&name);
            removed.push(name);
        }
    }
    let (base, prefix) = if userns::rootless() {
        (userns::runtime_base(), rootless_prefix())
    } else {
        (PathBuf::from(RUN_DIR), String::new())
    };
    if let Ok(dir) = fs::read_dir(base) {
        for e in dir.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            if let Some(pid) = name
                .strip_prefix(prefix.as_str())
                .and_then(|p| p.parse::<u32>().ok())
            {
                if !alive(pid) {
                    let _ = fs::remove_dir_all(e.path());
                }
            }
        }
    }
    removed
}

/// Namespaces of labs (any, alive or not) currently on the machine; for tests and `doctor`.
pub fn lab_namespaces() -> Vec<String> {
    fs::read_dir(NETNS_DIR)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().to_string())
                .filter(|n| n.starts_with(NS_PREFIX))
                .collect()
        })
        .unwrap_or_default()
}
