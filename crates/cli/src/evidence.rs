//! Where a check (`ipv6-check`, `fallback-check`) keeps the evidence it reads its verdict from
//! (captures, summary.json): the user's `-o DIR`, kept, or a scratch directory of its own,
//! removed when the check ends. Not responsible for what goes in it.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

pub struct EvidenceDir {
    pub path: PathBuf,
    scratch: bool,
    /// The check's name, which begins its messages.
    check: &'static str,
}

impl EvidenceDir {
    /// `out` (the user's `-o`), or a scratch directory named after the check and this process,
    /// created for the user.
    pub fn create(out: Option<&Path>, check: &'static str) -> Result<EvidenceDir> {
        let (path, scratch) = match out {
            Some(d) => (d.to_path_buf(), false),
            None => (
                std::env::temp_dir().join(format!("latencylab-{check}-{}", std::process::id())),
                true,
            ),
        };
        lab::files::check_out_dir(&path)?;
        lab::owner::create_dir_all(&path)
            .with_context(|| format!("creating {}", path.display()))?;
        Ok(EvidenceDir {
            path,
            scratch,
            check,
        })
    }

    /// Removes a scratch directory, and says on stderr where the evidence went: `kept` follows
    /// the directory's name when it is kept (what is in it).
    pub fn finish(self, kept: &str) {
        if self.scratch {
            let _ = std::fs::remove_dir_all(&self.path);
            eprintln!(
                "{}: the evidence was in a scratch directory, {}, now removed (give -o DIR to keep it)",
                self.check,
                self.path.display()
            );
        } else {
            eprintln!(
                "{}: the evidence is kept in {}{kept}",
                self.check,
                self.path.display()
            );
        }
    }
}
