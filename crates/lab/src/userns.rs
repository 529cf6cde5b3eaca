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

use labnet::UsageError;

static ROOTLESS: AtomicBool = AtomicBool::new(false);

/// True once this process runs its labs in a user namespace of its own.
pub fn rootless() -> bool {
    ROOTLESS.load(Ordering::Relaxed)
}

const HOW: &str = "or run latencylab with sudo";

fn read_sysctl(key: &str) -> Option<String> {
    fs::read_to_string(format!("/proc/sys/{key}"))
        .ok()
        .map(|s| s.trim().to_string())
}

/// The system setting that forbids unprivileged user namespaces, when one does, as the line to
/// print: (Debian's and Ubuntu's sysctl, the per-user limit, Ubuntu's AppArmor restriction).
pub fn forbidding_setting(
    unprivileged_userns_clone: Option<&str>,
    max_user_namespaces: Option<&str>,
    apparmor_restrict: Option<&str>,
) -> Option<String> {
    if unprivileged_userns_clone == Some("0") {
        return Some(format!(
            "unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone = 0): \
             allow them with `sudo sysctl -w kernel.unprivileged_userns_clone=1`, {HOW}"
        ));
    }
    if max_user_namespaces == Some("0") {
        return Some(format!(
            "user namespaces are disabled (user.max_user_namespaces = 0): allow them with \
             `sudo sysctl -w user.max_user_namespaces=10000`, {HOW}"
        ));
    }
    if apparmor_restrict == Some("1") {
        return Some(format!(
            "AppArmor restricts unprivileged user namespaces \
             (kernel.apparmor_restrict_unprivileged_userns = 1): allow them with `sudo sysctl -w \
             kernel.apparmor_restrict_unprivileged_userns=0` or an AppArmor profile for \
             latencylab with `userns,`, {HOW}"
        ));
    }
    None
}

/// The line for a `/dev/net/tun` the user may not open.
fn tun_line(e: &io::Error) -> String {
    let mode = {
        use std::os::unix::fs::PermissionsExt;
        fs::metadata("/dev/net/tun")
            .map(|m| format!("mode {:04o}", m.permissions().mode() & 0o7777))
            .unwrap_or_else(|_| "missing".into())
    };
    if e.kind() == io::ErrorKind::NotFound {
        return format!(
            "/dev/net/tun is missing: load the tun module (`sudo modprobe tun`), {HOW}"
        );
    }
    format!(
        "/dev/net/tun is not open to you ({mode}, {e}): open it with `sudo chmod 0666 \
         /dev/net/tun` (the default on Debian, Ubuntu and Fedora; a TUN device still needs \
         CAP_NET_ADMIN in its namespace), {HOW}"
    )
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
                 AppArmor policy), {HOW}"
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
            .map_err(|e| UsageError(format!("writing '{text}' to {file}: {e}, {HOW}")))?;
    }
    // A policy may still refuse a network namespace (SELinux, a seccomp filter): try one, on a
    // thread of its own since unshare(CLONE_NEWNET) moves the caller.
    let probe = std::thread::spawn(|| unshare(CloneFlags::CLONE_NEWNET))
        .join()
        .unwrap_or(Err(Errno::EPERM));
    if let Err(e) = probe {
        return Err(UsageError(format!(
            "a user namespace was allowed but a network namespace in it was not ({e}; an \
             SELinux or AppArmor policy, or a seccomp filter), {HOW}"
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

/// The line for a congestion control that a lab without root cannot give its hosts: only the
/// machine's root can load a module or add to the list non-initial namespaces may use.
pub fn cc_line(cc: &str, host: &str, available: &[String], allowed: &[String]) -> Option<String> {
    if !available.iter().any(|a| a == cc) {
        return Some(format!(
            "--cc: '{cc}' (host {host}) is not loaded in this kernel (available: {}): load it \
             with `sudo modprobe tcp_{cc}`, {HOW}",
            available.join(", ")
        ));
    }
    if !allowed.iter().any(|a| a == cc) {
        return Some(format!(
            "--cc: '{cc}' (host {host}) is not in net.ipv4.tcp_allowed_congestion_control ({}): \
             allow it with `sudo sysctl -w net.ipv4.tcp_allowed_congestion_control='{} {cc}'`, \
             {HOW}",
            allowed.join(" "),
            allowed.join(" ")
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_forbidding_setting_is_named_with_how_to_allow_it() {
        let l = forbidding_setting(Some("0"), Some("100"), None).unwrap();
        assert!(l.contains("kernel.unprivileged_userns_clone = 0"), "{l}");
        assert!(
            l.contains("sysctl -w kernel.unprivileged_userns_clone=1"),
            "{l}"
        );
        let l = forbidding_setting(None, Some("0"), None).unwrap();
        assert!(l.contains("user.max_user_namespaces = 0"), "{l}");
        let l = forbidding_setting(Some("1"), Some("100"), Some("1")).unwrap();
        assert!(
            l.contains("kernel.apparmor_restrict_unprivileged_userns = 1"),
            "{l}"
        );
        for l in [
            forbidding_setting(Some("0"), None, None).unwrap(),
            forbidding_setting(None, None, Some("1")).unwrap(),
        ] {
            assert!(l.ends_with("or run latencylab with sudo"), "{l}");
            assert!(!l.contains('\n'), "one line: {l}");
        }
        assert_eq!(
            forbidding_setting(Some("1"), Some("96364"), Some("0")),
            None
        );
        assert_eq!(forbidding_setting(None, None, None), None);
    }

    #[test]
    fn a_congestion_control_not_loaded_or_not_allowed_is_named() {
        let v = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
        let l = cc_line("vegas", "client", &v("reno cubic"), &v("reno cubic")).unwrap();
        assert!(l.contains("'vegas' (host client) is not loaded"), "{l}");
        assert!(l.contains("sudo modprobe tcp_vegas"), "{l}");
        let l = cc_line("bbr", "server", &v("reno cubic bbr"), &v("reno cubic")).unwrap();
        assert!(
            l.contains("tcp_allowed_congestion_control='reno cubic bbr'"),
            "{l}"
        );
        assert_eq!(
            cc_line("cubic", "client", &v("reno cubic"), &v("cubic")),
            None
        );
    }
}
