//! `latencylab sweep FILE -o DIR`: a grid of labs on a local process pool (docs/sweeps.md).
//!
//! Glue only: arguments, the progress bar, Ctrl-C, exit codes. The sweep file, the journal,
//! the pool and the tables are the `sweep` crate's. Exit codes: 0 every run ran and succeeded;
//! 1 some runs failed (each has its row, with its error) or the sweep could not go on; 2 a
//! mistake in the sweep file or the options, before anything ran; 130 stopped by SIGINT (143
//! by SIGTERM): the same command later runs only what is missing.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use sweep::pool::{self, Event};

#[derive(clap::Args, Debug)]
#[command(
    about = "Run a grid of labs (every combination of the sweep file's axes) and tabulate the results",
    after_help = "Examples:\n  sudo latencylab sweep examples/sweep-small.toml -o out/small\n  sudo latencylab sweep examples/sweep-bufferbloat.toml -o out/bb --jobs 1\n\nLeaves DIR/results.csv, DIR/results.parquet, DIR/journal.jsonl and each run's directory in DIR/runs/ID. Run the same command again to finish a sweep that was stopped."
)]
pub struct SweepArgs {
    /// The sweep file (docs/sweeps.md).
    file: PathBuf,
    /// Output directory.
    #[arg(short = 'o', long = "out", value_name = "DIR")]
    out: PathBuf,
    /// Labs at once (default: one per two cores, which keeps every run's timing sound).
    #[arg(short, long, value_name = "N")]
    jobs: Option<usize>,
    /// Run each lab as a Ray task on the cluster at ADDRESS (`auto`: the local cluster);
    /// needs the Python package with Ray (`pip install './python[ray]'`). Each node takes
    /// as many labs at once as its `lab` resource says (`ray start --resources '{"lab": 1}'`).
    #[arg(long, value_name = "ADDRESS")]
    ray: Option<String>,
    /// No progress bar.
    #[arg(short, long)]
    quiet: bool,
}

/// The signal that asked the sweep to stop (0: none).
static STOP_SIGNAL: AtomicI32 = AtomicI32::new(0);
static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_stop(sig: libc::c_int) {
    STOP_SIGNAL.store(sig, Ordering::SeqCst);
    STOP.store(true, Ordering::SeqCst);
}

/// Ray tasks in flight by default.
const RAY_JOBS: usize = 8;

/// Default `--jobs`: one lab per two cores. Each lab is a forwarding loop plus its traffic
/// programs; two labs on two cores made the engine miss its timing (docs/sweeps.md).
fn default_jobs() -> usize {
    std::thread::available_parallelism()
        .map(|n| (n.get() / 2).max(1))
        .unwrap_or(1)
}

/// Keeps the sweep file as it ran beside its results, as `DIR/sweep.toml`. A sweep run from
/// that very file (`sweep DIR/sweep.toml -o DIR`, resuming) leaves it as it is: copying a file
/// onto itself would truncate it.
fn keep_sweep_file(file: &Path, out: &Path) -> anyhow::Result<()> {
    let kept = out.join("sweep.toml");
    if let (Ok(a), Ok(b)) = (file.canonicalize(), kept.canonicalize()) {
        if a == b {
            return Ok(());
        }
    }
    std::fs::copy(file, &kept)?;
    lab::owner::hand_over(&kept)?;
    Ok(())
}

pub fn run(a: &SweepArgs) -> anyhow::Result<ExitCode> {
    let file = sweep::SweepFile::load(&a.file).map_err(|e| lab::UsageError(e.to_string()))?;
    let jobs = match a.jobs {
        Some(0) => {
            return Err(
                lab::UsageError("--jobs: cannot run '0' labs at once (try 1 or 2)".into()).into(),
            )
        }
        Some(n) => n,
        // With Ray the cluster's `lab` resources decide what runs where; this only bounds
        // the tasks in flight.
        None if a.ray.is_some() => RAY_JOBS,
        None => default_jobs(),
    };
    let launcher = match &a.ray {
        Some(addr) => {
            let python = std::env::var("LATENCYLAB_PYTHON").unwrap_or_else(|_| "python3".into());
            vec![
                python,
                "-m".into(),
                "latencylab.ray_task".into(),
                "--address".into(),
                addr.clone(),
                "--".into(),
            ]
        }
        None => Vec::new(),
    };
    let bin = std::env::current_exe()?;
    lab::owner::create_dir_all(&a.out)
        .map_err(|e| lab::UsageError(format!("-o: cannot create {}: {e}", a.out.display())))?;
    keep_sweep_file(&a.file, &a.out)?;
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only stores to atomics, which is async-signal-safe.
        unsafe {
            libc::signal(
                sig,
                on_stop as extern "C" fn(libc::c_int) as libc::sighandler_t,
            )
        };
    }
    let bar = if a.quiet {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(0)
    };
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} runs, {msg} [{elapsed} < {eta}]")
            .expect("a valid template"),
    );
    bar.enable_steady_tick(Duration::from_millis(500));
    let mut failed = 0;
    bar.set_message("0 failed");
    let outcome = pool::run(
        &file,
        &a.out,
        &pool::Options {
            bin,
            jobs,
            launcher,
        },
        &STOP,
        &mut |e| match e {
            Event::Plan { total, done } => {
                bar.set_length(total as u64);
                bar.set_position(done as u64);
                bar.reset_eta();
            }
            Event::Started(_) => {}
            Event::Finished(row) => {
                if row.status != "ok" {
                    failed += 1;
                    bar.set_message(format!("{failed} failed"));
                    bar.suspend(|| {
                        eprintln!(
                            "sweep: run {} failed: {}",
                            row.run,
                            row.error.as_deref().unwrap_or("")
                        )
                    });
                }
                bar.inc(1);
            }
        },
    )
    .map_err(anyhow::Error::msg);
    // Under sudo, the table and the journal are the user's, whether or not the sweep finished.
    lab::owner::hand_over(&a.out)?;
    let outcome = outcome?;
    bar.finish_and_clear();
    let sig = STOP_SIGNAL.load(Ordering::SeqCst);
    eprintln!(
        "sweep: {} of {} runs ok, {} failed{}; results in {}",
        outcome.ok,
        outcome.total,
        outcome.failed,
        if outcome.missing > 0 {
            format!(
                ", {} not run (run the same command again to finish)",
                outcome.missing
            )
        } else {
            String::new()
        },
        a.out.join(sweep::table::PARQUET).display()
    );
    Ok(ExitCode::from(match (sig, outcome.failed) {
        (0, 0) => 0,
        (0, _) => 1,
        (s, _) => (128 + s) as u8,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sweep_run_from_its_own_kept_file_leaves_the_file_whole() {
        let dir = std::env::temp_dir().join(format!("sweep-keep-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let kept = dir.join("sweep.toml");
        std::fs::write(&kept, "[axes]\nseed = [1, 2]\n").unwrap();
        keep_sweep_file(&kept, &dir).unwrap();
        let after = std::fs::read_to_string(&kept).unwrap();
        // And from another file, the copy replaces it.
        let other = dir.join("other.toml");
        std::fs::write(&other, "[axes]\nseed = [3]\n").unwrap();
        keep_sweep_file(&other, &dir).unwrap();
        let replaced = std::fs::read_to_string(&kept).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(after, "[axes]\nseed = [1, 2]\n");
        assert_eq!(replaced, "[axes]\nseed = [3]\n");
    }
}
