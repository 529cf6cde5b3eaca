//! The files a lab writes as it runs, opened and written for the user (the `owner` crate):
//! pcaps, link logs, JSON. What the files are called and what their lines and fields mean is
//! defined once, in `labnet::run_dir`; here they reach the disk.
//! Captures and link logs are cut at the snapshot length and split into files of a bounded
//! size as [`CaptureLimits`] asks, and written by a thread of their own ([`Captures`]); a
//! write that fails (a full disk) stops them, not the lab, with a warning.

mod captures;
mod handoff;

use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use labnet::run_dir::{CaptureLimits, NextFile, Rotation, RunDir};
use serde::Serialize;

pub use captures::{Captures, CapturesEnd, FileId, Opening};
pub use handoff::DiskWait;

/// Creates the run directory and its `captures/` and `links/` subdirectories, for the user, like
/// every file below.
pub fn prepare_dir(dir: &RunDir) -> Result<()> {
    for p in [dir.captures(), dir.links()] {
        owner::create_dir_all(&p).with_context(|| format!("-o: cannot create {}", p.display()))?;
    }
    Ok(())
}

/// Bytes buffered per file before a write reaches the disk.
const FILE_BUFFER_BYTES: usize = 1 << 20;
/// Room kept free on the run directory's disk for summary.json (see [`Reserve`]).
const RESERVE_BYTES: usize = 256 << 10;

/// A capture or link log written as a sequence of files ([`RunDir::rotated`]): each begins
/// with the same header, and no record straddles two. Once a write fails, the file is closed
/// and every later record is dropped.
pub struct RotatingFile {
    first: PathBuf,
    header: Vec<u8>,
    rotation: Rotation,
    /// `None` once stopped by a failed write.
    out: Option<BufWriter<File>>,
}

impl RotatingFile {
    pub fn create(first: &Path, header: &[u8], limits: CaptureLimits) -> Result<RotatingFile> {
        let mut f = RotatingFile {
            first: first.to_path_buf(),
            header: header.to_vec(),
            rotation: Rotation::new(limits, header.len() as u64),
            out: None,
        };
        f.open(first)
            .with_context(|| format!("creating {}", first.display()))?;
        Ok(f)
    }

    fn open(&mut self, path: &Path) -> io::Result<()> {
        let mut out = BufWriter::with_capacity(FILE_BUFFER_BYTES, owner::create_file(path)?);
        out.write_all(&self.header)?;
        self.out = Some(out);
        Ok(())
    }

    /// The first file's path, which names the capture or log.
    pub fn path(&self) -> &Path {
        &self.first
    }

    pub fn is_stopped(&self) -> bool {
        self.out.is_none()
    }

    /// Writes one record, the concatenation of `parts`, beginning the next file first when
    /// this one would grow past the size limit. An error stops the file (what was buffered
    /// is lost); records after that are dropped without error.
    pub fn record(&mut self, parts: &[&[u8]]) -> io::Result<()> {
        if self.out.is_none() {
            return Ok(());
        }
        let len: u64 = parts.iter().map(|p| p.len() as u64).sum();
        let r = match self.rotation.record(len) {
            Some(next) => self.rotate(next),
            None => Ok(()),
        }
        .and_then(|()| {
            let out = self.out.as_mut().expect("open until stopped");
            parts.iter().try_for_each(|p| out.write_all(p))
        });
        if r.is_err() {
            self.stop();
        }
        r
    }

    /// Closes the current file and begins the next, removing the oldest beyond the count.
    fn rotate(&mut self, next: NextFile) -> io::Result<()> {
        if let Some(mut out) = self.out.take() {
            out.flush()?;
        }
        if let Some(old) = next.remove {
            let _ = fs::remove_file(self.path_of(old));
        }
        self.open(&self.path_of(next.open))
    }

    fn path_of(&self, index: u64) -> PathBuf {
        match index {
            0 => self.first.clone(),
            n => RunDir::rotated(&self.first, n),
        }
    }

    /// Stops the file, dropping what is buffered (a full disk would refuse it anyway).
    pub fn stop(&mut self) {
        if let Some(out) = self.out.take() {
            drop(out.into_parts());
        }
    }

    pub fn flush(&mut self) -> io::Result<()> {
        let r = self.out.as_mut().map_or(Ok(()), |o| o.flush());
        if r.is_err() {
            self.stop();
        }
        r
    }
}

/// Spare room on the run directory's disk ([`RunDir::reserve`]): a file of zeros written when
/// the captures open, removed as soon as one of them fails, so that the lab can still write
/// summary.json with the warning, and removed when dropped.
pub struct Reserve(Option<PathBuf>);

impl Reserve {
    /// Takes the room if there is any; without it the lab runs as well.
    pub fn take(dir: &RunDir) -> Reserve {
        let path = dir.reserve();
        match owner::write(&path, vec![0u8; RESERVE_BYTES]) {
            Ok(()) => Reserve(Some(path)),
            Err(_) => {
                let _ = fs::remove_file(&path);
                Reserve(None)
            }
        }
    }

    pub fn release(&mut self) {
        if let Some(p) = self.0.take() {
            let _ = fs::remove_file(p);
        }
    }
}

impl Drop for Reserve {
    fn drop(&mut self) {
        self.release();
    }
}

pub fn write_json(path: &Path, value: &impl Serialize) -> Result<()> {
    let text = serde_json::to_string_pretty(value).expect("plain data serializes");
    owner::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))
}

/// An empty directory of this test process's own, for the tests of every module.
#[cfg(test)]
fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("latencylab-sinks-{}-{name}", std::process::id()));
    let _ = fs::remove_dir_all(&d);
    fs::create_dir_all(&d).unwrap();
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rotating_file_starts_each_file_with_the_header_and_keeps_the_newest_n() {
        let d = scratch("rotate");
        let first = d.join("x.log");
        let limits = CaptureLimits {
            snaplen_bytes: None,
            file_size_bytes: Some(10),
            file_count: Some(2),
        };
        let mut f = RotatingFile::create(&first, b"H\n", limits).unwrap();
        // "H\n" + two 4-byte records fill a file (10 bytes); a third record begins the next.
        for r in [b"aaa\n", b"bbb\n", b"ccc\n", b"ddd\n", b"eee\n"] {
            f.record(&[&r[..2], &r[2..]]).unwrap();
        }
        f.flush().unwrap();
        assert!(!first.exists(), "the oldest of three files is removed");
        assert_eq!(
            fs::read(RunDir::rotated(&first, 1)).unwrap(),
            b"H\nccc\nddd\n"
        );
        assert_eq!(fs::read(RunDir::rotated(&first, 2)).unwrap(), b"H\neee\n");
        // A record larger than the limit still goes whole into a file of its own.
        f.record(&[b"a record longer than ten bytes\n"]).unwrap();
        f.flush().unwrap();
        assert_eq!(
            fs::read(RunDir::rotated(&first, 3)).unwrap(),
            b"H\na record longer than ten bytes\n"
        );
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_failed_write_stops_the_file_and_later_records_are_dropped() {
        // /dev/full fails every write with ENOSPC, as a full disk does.
        let mut f = RotatingFile {
            first: PathBuf::from("/dev/full"),
            header: Vec::new(),
            rotation: Rotation::new(CaptureLimits::default(), 0),
            out: Some(BufWriter::with_capacity(
                4,
                fs::OpenOptions::new()
                    .write(true)
                    .open("/dev/full")
                    .unwrap(),
            )),
        };
        let e = f.record(&[b"more than four bytes"]).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOSPC));
        assert!(f.is_stopped());
        f.record(&[b"x"]).unwrap();
        f.flush().unwrap();
    }
}
