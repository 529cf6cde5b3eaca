//! `latencylab shell --rpm` and a run file's `[rpm]` (the responsiveness test in a lab, with
//! where its round trips went) and `latencylab profiles` (the named networks of `--profile`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use lab::{run_lab, LabConfig, RunOptions, UsageError};
use labnet::rpm_lab::{RpmInLab, RPM_PROGRAM};
use labnet::run_dir::{CaptureLimits, RunDir};
use rpm::attribution::Attribution;
use rpm::report::RpmReport;

/// The client's JSON report in the run directory.
fn report_path(dir: &Path) -> PathBuf {
    RunDir::new(dir).rpm_json()
}

/// Runs `rpm-server` in `server` and `rpm` in `client`, then prints where the probes' time
/// went. Without `-o` the run directory is a temporary one, removed at the end.
pub fn in_lab(
    cfg: &LabConfig,
    out: Option<PathBuf>,
    quiet: bool,
    no_capture: bool,
    capture: CaptureLimits,
) -> Result<ExitCode> {
    if !crate::without_web::BUILT {
        return Err(crate::without_web::not_built("--rpm").into());
    }
    if no_capture {
        return Err(UsageError(
            "--rpm needs the link logs to say where the time went: drop --no-capture".into(),
        )
        .into());
    }
    let (dir, temporary) = match out {
        Some(d) => (d, false),
        None => (
            std::env::temp_dir().join(format!("latencylab-rpm-{}", std::process::id())),
            true,
        ),
    };
    let exe = std::env::current_exe().context("finding the latencylab binary")?;
    let exe = exe.to_string_lossy();
    let test = RpmInLab::default();
    let run = RunOptions {
        out_dir: Some(dir.clone()),
        command: Some((test.client.clone(), test.client_argv(&exe, &dir))),
        server: Some((test.server.clone(), test.server_line(&exe))),
        quiet,
        no_capture: false,
        capture,
    };
    let result = run_lab(cfg, &run);
    let line = result.as_ref().ok().map(|r| explain(&dir, r));
    if temporary {
        let _ = std::fs::remove_dir_all(&dir);
    }
    let result = result?;
    if let Some(line) = line {
        print_attribution(line);
    }
    Ok(ExitCode::from(
        u8::try_from(result.exit_code.clamp(0, 255)).unwrap_or(1),
    ))
}

fn print_attribution(line: Result<Option<Attribution>>) {
    match line {
        Ok(Some(a)) => {
            println!("{}", a.line());
            println!("{}", a.kinds_line());
        }
        Ok(None) => eprintln!("latencylab: no probe left packets in the link logs to attribute"),
        Err(e) => eprintln!("latencylab: cannot attribute the round trips: {e:#}"),
    }
}

/// A run file with `[rpm]`: its report from an earlier run in the same directory is removed
/// first, so that what is attributed after the run is this run's.
pub fn before_run_file(cfg: &LabConfig, out: Option<&Path>) {
    if let Some(dir) = out.filter(|_| has_rpm(cfg)) {
        let _ = std::fs::remove_file(report_path(dir));
    }
}

/// After a run file with `[rpm]` ran with `-o`: the client's summary, then where its round
/// trips went, as `shell --rpm` prints them.
pub fn after_run_file(cfg: &LabConfig, out: Option<&Path>, r: &lab::RunResult) {
    let Some(dir) = out.filter(|_| has_rpm(cfg)) else {
        return;
    };
    let report = match read_report(dir) {
        Ok(report) => report,
        Err(e) => {
            eprintln!(
                "latencylab: {e:#} (the client's errors: {})",
                RunDir::new(dir).program_err(RPM_PROGRAM).display()
            );
            return;
        }
    };
    print!("{}", rpm::report::text(&report));
    print_attribution(rpm::run::attribution_of(dir, &report, &r.summary).map_err(Into::into));
}

fn has_rpm(cfg: &LabConfig) -> bool {
    cfg.programs.iter().any(|p| p.name == RPM_PROGRAM)
}

/// The attribution of a finished run in `dir`.
fn explain(dir: &Path, r: &lab::RunResult) -> Result<Option<Attribution>> {
    Ok(rpm::run::attribution_of(
        dir,
        &read_report(dir)?,
        &r.summary,
    )?)
}

/// The client's report in the run directory `dir`.
pub(crate) fn read_report(dir: &Path) -> Result<RpmReport> {
    let path = report_path(dir);
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("reading the client's report {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("reading {}", path.display()))
}

/// The named networks of `--profile`, with their figures and sources.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Example:\n  latencylab shell --profile 3g -- ping -c 5 server\n\nSee docs/profiles.md for each source and how a browser's per-request latency is mapped to\nthe path's round trip."
)]
pub struct ProfilesArgs {}

pub fn profiles(_a: &ProfilesArgs) -> Result<ExitCode> {
    for p in labnet::profiles::PROFILES {
        println!("{}", p.line());
    }
    Ok(ExitCode::SUCCESS)
}
