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
    after_help = "Examples:\n  latencylab sweep examples/sweep-small.toml -o out/small\n  latencylab sweep examples/sweep-bufferbloat.toml -o out/bb --jobs 1\n\nLeaves DIR/results.csv, DIR/results.parquet, DIR/journal.jsonl and each run's directory in DIR/runs/ID. Run the same command again to finish a sweep that was stopped."
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

/// Asks the Python that will drive Ray for Ray and the latencylab package, each imported as a
/// run would, and prints what is missing (nothing when both import).
const DRIVER_PROBE: &str = r#"
import importlib.util
missing = []
try:
    import ray
except ModuleNotFoundError:
    missing.append("ray")
except Exception as e:
    missing.append(f"ray ({type(e).__name__}: {e})")
try:
    if importlib.util.find_spec("latencylab.ray_task") is None:
        raise ModuleNotFoundError(name="latencylab")
except ModuleNotFoundError as e:
    missing.append("latencylab" if e.name.startswith("latencylab") else f"latencylab (it needs {e.name})")
except Exception as e:
    missing.append(f"latencylab ({type(e).__name__}: {e})")
print(" and ".join(missing).replace("\n", " "))
"#;

/// The line for a driver Python that lacks `missing` (as the probe printed it).
fn driver_refusal(python: &str, missing: &str) -> String {
    format!(
        "--ray: the Python that drives Ray ('{python}', from LATENCYLAB_PYTHON or else python3) \
         cannot import {missing}: install both into it (`{python} -m pip install './python[ray]'` \
         from the repository, in a virtual environment on Debian and Ubuntu) or set \
         LATENCYLAB_PYTHON to a Python that has them"
    )
}

/// Checks, before any run, that `python` can drive the sweep's Ray tasks: otherwise each run
/// would start and fail with a traceback.
fn check_ray_driver(python: &str) -> Result<(), lab::UsageError> {
    let out = std::process::Command::new(python)
        .args(["-c", DRIVER_PROBE])
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| {
            lab::UsageError(format!(
                "--ray: cannot run the Python that drives Ray ('{python}': {e}): set \
                 LATENCYLAB_PYTHON to a Python with Ray and the latencylab package"
            ))
        })?;
    let missing = String::from_utf8_lossy(&out.stdout).trim().to_string();
    match (out.status.success(), missing.is_empty()) {
        (true, true) => Ok(()),
        (true, false) => Err(lab::UsageError(driver_refusal(python, &missing))),
        (false, _) => Err(lab::UsageError(driver_refusal(
            python,
            &format!(
                "ray or latencylab (it exited with {}: {})",
                out.status,
                String::from_utf8_lossy(&out.stderr)
                    .lines()
                    .last()
                    .unwrap_or("")
            ),
        ))),
    }
}

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
            check_ray_driver(&python)?;
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
    lab::files::check_out_dir(&a.out)?;
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

    #[test]
    fn a_driver_without_ray_or_the_package_is_named_before_any_run() {
        // A Python with no site directory has neither; `-S` is passed through a script.
        let dir = std::env::temp_dir().join(format!("sweep-driver-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fake = dir.join("python");
        std::fs::write(&fake, "#!/bin/sh\nexec python3 -S -I \"$@\"\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        let line = check_ray_driver(fake.to_str().unwrap()).unwrap_err().0;
        let missing = check_ray_driver("/nonexistent/python3").unwrap_err().0;
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(line.contains("cannot import ray and latencylab"), "{line}");
        assert!(line.contains("pip install './python[ray]'"), "{line}");
        assert!(!line.contains('\n'), "{line}");
        assert!(missing.contains("'/nonexistent/python3'"), "{missing}");
    }
}
