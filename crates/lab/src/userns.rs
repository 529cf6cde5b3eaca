//! Labs without root: the lab process enters a user namespace of its own that maps the user's
//! uid and gid to themselves, and so holds every capability over the network and mount
//! namespaces it then creates (and over nothing of the machine's). Programs it starts run as the
//! user with no capabilities: capabilities do not survive `execve` for a uid other than 0.
//!
//! Where the kernel or the system forbids it, [`enter`] says which setting, and how to allow it
//! or to use sudo, before anything is created. Under root (sudo) nothing changes: the lab runs
//! in the machine's own user namespace, as it always has.
//!
//! A rootless lab has no names under /run/netns (bind mounts there need the machine's root);
//! its namespaces are held by the lab's descriptors and vanish with it, however it ends. Its
//! runtime files live in [`runtime_base`] (docs/guide.md says how to enter a running lab).

use std::fs;
use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

use nix::errno::Errno;
use nix::sched::{unshare, CloneFlags};
use nix::unistd::{getgid, getuid};

use labnet::system::{forbidding_setting, OR_SUDO};
use labnet::UsageError;

static ROOTLESS: AtomicBool = AtomicBool::new(false);

/// True once this process runs its labs in a user namespace of its own.
pub fn rootless() -> bool {
    ROOTLESS.load(Ordering::Relaxed)
}

fn read_sysctl(key: &str) -> Option<String> {
    fs::read_to_string(format!("/proc/sys/{key}"))
        .ok()
        .map(|s| s.trim().to_string())
}

/// The line for a `/dev/net/tun` the user may not open.
fn tun_line(e: &io::Error) -> String {
    use std::os::unix::fs::PermissionsExt;
    let mode = fs::metadata("/dev/net/tun")
        .ok()
        .map(|m| m.permissions().mode());
    labnet::system::tun_refusal(e.kind() == io::ErrorKind::NotFound, mode, &e.to_string())
}

/// Enters a user namespace of the lab's own when this process is not root; does nothing under
/// root. Must be called while the process has a single thread (the kernel refuses
/// `unshare(CLONE_NEWUSER)` otherwise): first thing in `main`, before any lab command.
pub fn enter() -> Result<(), UsageError> {
    if nix::unistd::geteuid().is_root() || rootless() {
        return Ok(());
    }
    if let Err(e) = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/net/tun")
    {
        return Err(UsageError(tun_line(&e)));
    }
    let settings = || {
        forbidding_setting(
            read_sysctl("kernel/unprivileged_userns_clone").as_deref(),
            read_sysctl("user/max_user_namespaces").as_deref(),
            read_sysctl("kernel/apparmor_restrict_unprivileged_userns").as_deref(),
        )
    };
    // AppArmor lets the unshare succeed and takes the capabilities away: ask first.
    if let Some(line) = settings() {
        return Err(UsageError(line));
    }
    let (uid, gid) = (getuid(), getgid());
    if let Err(e) = unshare(CloneFlags::CLONE_NEWUSER) {
        return Err(UsageError(match (e, settings()) {
            (_, Some(line)) => line,
            (Errno::EINVAL, None) => {
                "cannot enter a user namespace from a process with several threads".into()
            }
            (e, None) => format!(
                "this system does not let you create a user namespace ({e}; see \
                 kernel.unprivileged_userns_clone, user.max_user_namespaces, or an SELinux or \
                 AppArmor policy), {OR_SUDO}"
            ),
        }));
    }
    // Our own ids map to themselves, so that files we create are the user's and programs run
    // as the user. setgroups must be denied before an unprivileged process may write gid_map.
    let maps = [
        ("/proc/self/setgroups", "deny".to_string()),
        ("/proc/self/uid_map", format!("{uid} {uid} 1")),
        ("/proc/self/gid_map", format!("{gid} {gid} 1")),
    ];
    for (file, text) in maps {
        fs::write(file, &text)
            .map_err(|e| UsageError(format!("writing '{text}' to {file}: {e}, {OR_SUDO}")))?;
    }
    // A policy may still refuse a network namespace (SELinux, a seccomp filter): try one, on a
    // thread of its own since unshare(CLONE_NEWNET) moves the caller.
    let probe = std::thread::spawn(|| unshare(CloneFlags::CLONE_NEWNET))
        .join()
        .unwrap_or(Err(Errno::EPERM));
    if let Err(e) = probe {
        return Err(UsageError(format!(
            "a user namespace was allowed but a network namespace in it was not ({e}; an \
             SELinux or AppArmor policy, or a seccomp filter), {OR_SUDO}"
        )));
    }
    ROOTLESS.store(true, Ordering::Relaxed);
    Ok(())
}

/// The directory in which a rootless lab keeps its runtime directory (`latencylab-UID-PID`, see
/// `cleanup::runtime_dir`): `$XDG_RUNTIME_DIR` (a per-user tmpfs that the system empties at
/// logout) when the session has one, the temporary directory (`/tmp`) otherwise.
pub fn runtime_base() -> PathBuf {
    match std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from) {
        Some(d) if d.is_absolute() && d.is_dir() => d,
        _ => std::env::temp_dir(),
    }
}
