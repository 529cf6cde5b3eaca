//! `latencylab report DIR`: the standard charts and `report.html` of any run directory.
//!
//! Glue only: what is drawn is [`crate::run_report`]'s. Exit codes: 0 the page was written;
//! 1 a failure while drawing; 2 DIR is not a run directory.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
#[command(
    about = "Draw the standard charts (round trips, queue delay, goodput, where the time went) of a run directory into DIR/report.html",
    after_help = "Examples:\n  latencylab report out/run\n  latencylab report out/bufferbloat/fifo\n\nWorks on any directory that `latencylab run -o`, `shell -o` or a demo left."
)]
pub struct ReportArgs {
    /// The run directory (it has a summary.json)
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
}

pub fn run(a: &ReportArgs) -> anyhow::Result<ExitCode> {
    if !labnet::run_dir::RunDir::new(&a.dir)
        .summary_json()
        .is_file()
    {
        return Err(lab::UsageError(format!(
            "{}: not a run directory (no summary.json; `latencylab run FILE -o DIR` makes one)",
            a.dir.display()
        ))
        .into());
    }
    let r = crate::run_report::write(&a.dir)?;
    if let Err(e) = lab::owner::hand_over(&a.dir) {
        eprintln!(
            "latencylab: cannot give {} to the user: {e}",
            a.dir.display()
        );
    }
    // One path a line; a reader that stops early (`| head`) is no error.
    let mut out = std::io::stdout().lock();
    for c in &r.charts {
        let _ = writeln!(out, "{}", c.display());
    }
    let _ = writeln!(out, "report: {}", r.page.display());
    Ok(ExitCode::SUCCESS)
}
