//! A lab run's attribution, read from its directory: the tree of links in `lab.json` and the
//! log of every link direction that `summary.json` lists, handed to
//! [`attribute_in`](crate::attribution::attribute_in). The one reader that `shell --rpm`, a run
//! file's `[rpm]` and the responsiveness demo share.
//!
//! Not here: the attribution itself, which is pure ([`crate::attribution`]), or where the
//! client's report comes from (each caller reads its own).

use std::fmt;
use std::path::{Path, PathBuf};

use labnet::run_dir::{parse_link_log, LinkSummary, LogError, LogLine, RunDir, Summary};
use labnet::spec::{Side, Topology};

use crate::attribution::{attribute_in, Attribution, LinkLog};
use crate::report::RpmReport;

/// A file of the run directory that could not be read, or not as what it should be.
#[derive(Debug)]
pub enum RunError {
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// `lab.json` without the hosts, routers and links of a lab.
    LabJson {
        path: PathBuf,
        source: serde_json::Error,
    },
    /// A link log with a line that is not one.
    Log { path: PathBuf, source: LogError },
}

impl fmt::Display for RunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunError::Read { path, source } => write!(f, "reading {}: {source}", path.display()),
            RunError::LabJson { path, source } => {
                write!(f, "reading the links of {}: {source}", path.display())
            }
            RunError::Log { path, source } => write!(f, "{}: {source}", path.display()),
        }
    }
}

impl std::error::Error for RunError {}

fn read(path: PathBuf) -> Result<(PathBuf, String), RunError> {
    match std::fs::read_to_string(&path) {
        Ok(text) => Ok((path, text)),
        Err(source) => Err(RunError::Read { path, source }),
    }
}

/// Where the round trips of `report` went in the lab run in `dir`, whose summary is `summary`;
/// `None` when no probe left packets in the link logs.
pub fn attribution_of(
    dir: &Path,
    report: &RpmReport,
    summary: &Summary,
) -> Result<Option<Attribution>, RunError> {
    let run = RunDir::new(dir);
    let (path, text) = read(run.lab_json())?;
    let lab: Topology =
        serde_json::from_str(&text).map_err(|source| RunError::LabJson { path, source })?;
    let mut logs: Vec<(&LinkSummary, Vec<LogLine>)> = Vec::new();
    for l in &summary.links {
        let side = if l.direction == Side::Up.name() {
            Side::Up
        } else {
            Side::Down
        };
        let (path, text) = read(run.link_log(&l.name, side))?;
        let lines = parse_link_log(&path.to_string_lossy(), &text)
            .map_err(|source| RunError::Log { path, source })?;
        logs.push((l, lines));
    }
    let links: Vec<LinkLog> = logs
        .iter()
        .map(|(l, lines)| LinkLog {
            link: &l.name,
            side: &l.direction,
            queue: &l.queue,
            delay_ms: l.asked.delay_ms,
            rate_bps: l.asked.rate_bps,
            lines,
        })
        .collect();
    Ok(attribute_in(
        report,
        summary.engine.clock_monotonic_start_ns,
        &links,
        &lab,
    ))
}
