//! The files a lab specification names, read from disk for the pure core: a trace file for
//! `--down-trace` or a run file's `trace`, and the run file itself; and the check of an
//! output directory (`-o`) before anything is created. Only regular files of a believable
//! size are read: a device (`/dev/zero`) or a huge file is refused in one line rather than
//! read until memory runs out.

use std::io::Read;
use std::path::Path;

use labnet::run_file::{parse_run_file_set, SetValue};
use labnet::{LabConfig, UsageError};

/// The largest run file read: real ones are a few kilobytes.
pub const RUN_FILE_MAX_BYTES: u64 = 1 << 20;
/// The largest trace read: a Mahimahi trace holds one line of a few bytes per packet the link
/// may deliver, so an hour at 1 Gbit/s is about 2 GB; the ones recorded on real links are a
/// few megabytes.
pub const TRACE_MAX_BYTES: u64 = 1 << 30;

/// What a path is, for a message, when it is not a regular file.
fn kind(meta: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    if t.is_dir() {
        "a directory"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_fifo() {
        "a named pipe"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

/// The text of the regular file `path`, if it is at most `max_bytes` long. The error says
/// what is wrong, without the path (the caller names it).
pub fn read_bounded(path: &Path, max_bytes: u64) -> Result<String, String> {
    let meta = std::fs::metadata(path).map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err(format!("it is {}, not a regular file", kind(&meta)));
    }
    let too_big = || format!("it is larger than {max_bytes} bytes, more than any real one");
    if meta.len() > max_bytes {
        return Err(too_big());
    }
    let mut text = String::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(max_bytes + 1).read_to_string(&mut text))
        .map_err(|e| e.to_string())?;
    // A file that grew after the look at its size.
    if text.len() as u64 > max_bytes {
        return Err(too_big());
    }
    Ok(text)
}

/// Refuses an output directory (`-o`) that is, or lies under, something other than a
/// directory, before anything is created.
pub fn check_out_dir(dir: &Path) -> Result<(), UsageError> {
    for p in dir.ancestors().filter(|p| !p.as_os_str().is_empty()) {
        if let Ok(meta) = std::fs::metadata(p) {
            if meta.is_dir() {
                return Ok(());
            }
            let what = if p == dir {
                format!("'{}' is {}", dir.display(), kind_or_file(&meta))
            } else {
                format!(
                    "'{}' lies under '{}', which is {}",
                    dir.display(),
                    p.display(),
                    kind_or_file(&meta)
                )
            };
            return Err(UsageError(format!(
                "-o: {what}: give a new directory or an existing one"
            )));
        }
    }
    Ok(())
}

fn kind_or_file(meta: &std::fs::Metadata) -> &'static str {
    if meta.is_file() {
        "a file"
    } else {
        kind(meta)
    }
}

/// Reads a file named by a setting: its text, and its absolute path to record in `lab.json`.
pub fn read(path: &Path) -> Result<(String, String), String> {
    let text = read_bounded(path, TRACE_MAX_BYTES)?;
    let name = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    Ok((name.display().to_string(), text))
}

/// Reads and validates a run file. Relative trace paths are relative to the file.
pub fn run_file_config(path: &Path, seed_override: Option<u64>) -> Result<LabConfig, UsageError> {
    run_file_config_set(path, seed_override, &[])
}

/// As [`run_file_config`], with values set over the file's own (`latencylab run --set`).
pub fn run_file_config_set(
    path: &Path,
    seed_override: Option<u64>,
    sets: &[SetValue],
) -> Result<LabConfig, UsageError> {
    let text = read_bounded(path, RUN_FILE_MAX_BYTES).map_err(|e| {
        UsageError(format!(
            "cannot read run file '{}': {e} (a run file is TOML, docs/run-files.md)",
            path.display()
        ))
    })?;
    let dir = path.parent().unwrap_or(Path::new("."));
    parse_run_file_set(
        &path.display().to_string(),
        &text,
        dir,
        seed_override,
        sets,
        &read,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("lab-files-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_device_a_directory_or_a_huge_file_is_refused_without_reading_it() {
        let e = run_file_config(Path::new("/dev/zero"), None).unwrap_err().0;
        assert!(
            e.contains("'/dev/zero'") && e.contains("a character device"),
            "{e}"
        );
        let d = scratch("bounded");
        let e = run_file_config(&d, None).unwrap_err().0;
        assert!(e.contains("a directory"), "{e}");
        let big = d.join("big.toml");
        std::fs::write(&big, vec![b'#'; RUN_FILE_MAX_BYTES as usize + 1]).unwrap();
        let e = run_file_config(&big, None).unwrap_err().0;
        assert!(e.contains("larger than 1048576 bytes"), "{e}");
        let small = d.join("small.txt");
        std::fs::write(&small, "12\n").unwrap();
        assert_eq!(read_bounded(&small, 3).unwrap(), "12\n");
        assert!(read_bounded(&small, 2).is_err());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn an_output_directory_onto_a_file_or_under_one_is_refused() {
        let d = scratch("out");
        let file = d.join("taken");
        std::fs::write(&file, "x").unwrap();
        let e = check_out_dir(&file).unwrap_err().0;
        assert!(e.starts_with("-o: ") && e.contains("is a file"), "{e}");
        let e = check_out_dir(&file.join("run1")).unwrap_err().0;
        assert!(
            e.contains("lies under") && e.contains("which is a file"),
            "{e}"
        );
        assert!(check_out_dir(&d).is_ok());
        assert!(check_out_dir(&d.join("new/deeper")).is_ok());
        assert!(check_out_dir(Path::new("relative-new-dir")).is_ok());
        std::fs::remove_dir_all(&d).unwrap();
    }
}
