//! The files a lab specification names, read from disk for the pure core: a trace file for
//! `--down-trace` or a run file's `trace`, and the run file itself.

use std::path::Path;

use labnet::run_file::{parse_run_file_set, SetValue};
use labnet::{LabConfig, UsageError};

/// Reads a file named by a setting: its text, and its absolute path to record in `lab.json`.
pub fn read(path: &Path) -> Result<(String, String), String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
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
    let text = std::fs::read_to_string(path)
        .map_err(|e| UsageError(format!("cannot read run file '{}': {e}", path.display())))?;
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
