//! Leaving nothing behind: the namespaces, runtime files and processes of a lab, removed when
//! it ends however it ends, and those of a lab that was killed (SIGKILL leaves no chance to
//! clean) removed by the next one.

use std::fs;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use crate::netns::{self, NETNS_DIR, NS_PREFIX};
use crate::process;

/// Per-lab runtime files (the lab's /etc/hosts and resolv.conf) live in RUN_DIR/PID.
pub const RUN_DIR: &str = "/run/latencylab";

pub fn runtime_dir(pid: u32) -> PathBuf {
    Path::new(RUN_DIR).join(pid.to_string())
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
    if let Ok(dir) = fs::read_dir(RUN_DIR) {
        for e in dir.flatten() {
            if let Some(pid) = e.file_name().to_str().and_then(|p| p.parse::<u32>().ok()) {
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
