//! The user who ran latencylab through sudo (`SUDO_UID`/`SUDO_GID`): who lab programs run as,
//! and who owns the files the lab writes for the user, as `tcpdump -Z` leaves its captures;
//! without sudo, whoever runs the lab, which needs nothing done. The one place that decides it,
//! and the file and directory creation that applies it, for every writer of run directories,
//! demo and sweep output.
//!
//! Not responsible for the lab's own runtime files (namespaces, name files), which belong to the
//! lab and go with it.

use std::ffi::CString;
use std::fs::{self, File};
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

/// Who lab programs run as.
#[derive(Clone, Debug, Serialize, Deserialize)]
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

/// The owner to give files to, when it is not the process's own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Owner {
    pub uid: u32,
    pub gid: u32,
}

/// The user who ran sudo, when this process runs as root through sudo; `None` otherwise (a
/// plain root login, or a user running the lab without sudo, who owns what they create).
pub fn invoking() -> Option<Owner> {
    static OWNER: OnceLock<Option<Owner>> = OnceLock::new();
    *OWNER.get_or_init(|| {
        if !nix::unistd::geteuid().is_root() {
            return None;
        }
        let r = invoking_user()?;
        Some(Owner {
            uid: r.uid,
            gid: r.gid,
        })
    })
}

impl Owner {
    /// Gives `path` (not following a symbolic link) to this owner.
    pub fn give(&self, path: &Path) -> io::Result<()> {
        std::os::unix::fs::lchown(path, Some(self.uid), Some(self.gid))
    }

    /// Creates `dir` and its missing parents, giving each directory it creates to this owner;
    /// directories that existed keep their owner.
    pub fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        if dir.as_os_str().is_empty() || dir.is_dir() {
            return Ok(());
        }
        if let Some(parent) = dir.parent() {
            self.create_dir_all(parent)?;
        }
        match fs::create_dir(dir) {
            Ok(()) => self.give(dir),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && dir.is_dir() => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Gives every file and directory under `path` (and `path` itself) that root owns to this
    /// owner: what a writer that does not go through this module left (a demo's report, a sweep's
    /// table). Entries of other users are left alone; symbolic links are not followed.
    pub fn hand_over(&self, path: &Path) -> io::Result<()> {
        let meta = fs::symlink_metadata(path)?;
        if meta.uid() == 0 {
            self.give(path)?;
        }
        if meta.is_dir() {
            for e in fs::read_dir(path)? {
                self.hand_over(&e?.path())?;
            }
        }
        Ok(())
    }
}

/// Creates `dir` and its missing parents for the user (see [`Owner::create_dir_all`]).
pub fn create_dir_all(dir: &Path) -> io::Result<()> {
    match invoking() {
        Some(o) => o.create_dir_all(dir),
        None => fs::create_dir_all(dir),
    }
}

/// Creates (or truncates) a file for the user.
pub fn create_file(path: &Path) -> io::Result<File> {
    let f = File::create(path)?;
    if let Some(o) = invoking() {
        o.give(path)?;
    }
    Ok(f)
}

/// Writes a whole file for the user.
pub fn write(path: &Path, bytes: impl AsRef<[u8]>) -> io::Result<()> {
    fs::write(path, bytes)?;
    if let Some(o) = invoking() {
        o.give(path)?;
    }
    Ok(())
}

/// Gives what root wrote under `path` to the user, and the directories of a relative `path`
/// that root created on the way (`out` of `out/bb`: the user named them); nothing to do
/// without sudo. A path that does not exist (a run that failed before writing) is no error.
pub fn hand_over(path: &Path) -> io::Result<()> {
    let Some(o) = invoking() else {
        return Ok(());
    };
    if !path.exists() {
        return Ok(());
    }
    if path.is_relative() {
        for dir in path.ancestors().skip(1) {
            if dir.as_os_str().is_empty() {
                break;
            }
            if fs::symlink_metadata(dir)?.uid() == 0 {
                o.give(dir)?;
            }
        }
    }
    o.hand_over(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("lab-owner-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        d
    }

    /// The owner to give files to, when this test may change owners (only root may; the
    /// suite runs as root).
    fn test_owner() -> Option<Owner> {
        if nix::unistd::geteuid().is_root() {
            Some(Owner {
                uid: 4242,
                gid: 4343,
            })
        } else {
            eprintln!("skipped: changing owners needs root");
            None
        }
    }

    #[test]
    fn create_dir_all_gives_only_the_directories_it_creates() {
        let Some(o) = test_owner() else {
            return;
        };
        let base = scratch("mk");
        fs::create_dir_all(&base).unwrap();
        let deep = base.join("a/b/c");
        o.create_dir_all(&deep).unwrap();
        assert_eq!(
            fs::metadata(&base).unwrap().uid(),
            0,
            "existing parent kept"
        );
        for p in [base.join("a"), base.join("a/b"), deep.clone()] {
            let m = fs::metadata(&p).unwrap();
            assert_eq!((m.uid(), m.gid()), (4242, 4343), "{}", p.display());
        }
        fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn hand_over_gives_roots_files_and_leaves_other_users_alone() {
        let Some(o) = test_owner() else {
            return;
        };
        let base = scratch("hand");
        fs::create_dir_all(base.join("sub")).unwrap();
        fs::write(base.join("sub/report.html"), "x").unwrap();
        fs::write(base.join("theirs"), "y").unwrap();
        std::os::unix::fs::lchown(base.join("theirs"), Some(777), Some(777)).unwrap();
        std::os::unix::fs::symlink("/etc/hostname", base.join("link")).unwrap();
        o.hand_over(&base).unwrap();
        for p in [base.clone(), base.join("sub"), base.join("sub/report.html")] {
            let m = fs::metadata(&p).unwrap();
            assert_eq!((m.uid(), m.gid()), (4242, 4343), "{}", p.display());
        }
        assert_eq!(fs::metadata(base.join("theirs")).unwrap().uid(), 777);
        assert_eq!(
            fs::metadata("/etc/hostname").unwrap().uid(),
            0,
            "a link's target is not followed"
        );
        assert_eq!(fs::symlink_metadata(base.join("link")).unwrap().uid(), 4242);
        fs::remove_dir_all(&base).unwrap();
    }
}
