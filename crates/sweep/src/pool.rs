//! The local process pool: runs the plan's missing runs as `latencylab` child processes, at
//! most `jobs` at a time, records each finished run in the journal and rewrites the tables.
//! A run that fails is recorded as failed and the sweep goes on.
//!
//! Stopping: when `stop` becomes true no run starts, the running ones get SIGTERM (a lab ends
//! cleanly on it, removing what it made) and are not recorded, so that the same command later
//! runs them again.
//!
//! Not here: signal handlers or a progress bar (the CLI's), or Ray (the Python package's).

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use labnet::run_dir::RunDir;

use crate::file::SweepFile;
use crate::html;
use crate::journal::Journal;
use crate::plan::{self, Run};
use crate::row::{read_row, Row};
use crate::table::Table;

/// Where the run directories go, inside the sweep's directory.
pub const RUNS: &str = "runs";

/// What the pool tells its caller as it goes.
pub enum Event<'a> {
    /// Before anything starts: runs in the plan, and how many the journal already has.
    Plan {
        total: usize,
        done: usize,
    },
    Started(&'a Run),
    Finished(&'a Row),
}

pub struct Options {
    /// The `latencylab` binary to run.
    pub bin: PathBuf,
    /// Runs at once.
    pub jobs: usize,
    /// A command that runs `latencylab ARGS` for us, put before it (empty: run it here). The
    /// Ray backend is `python3 -m latencylab.ray_task --address ADDR --`: it runs the same
    /// command line as a Ray task on a worker node and brings the run directory back.
    pub launcher: Vec<String>,
}

/// How a sweep ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub total: usize,
    pub ok: usize,
    pub failed: usize,
    /// Runs not run because the sweep was stopped.
    pub missing: usize,
}

/// Runs `sweep` into `dir`: only what the journal does not have yet.
pub fn run(
    sweep: &SweepFile,
    dir: &Path,
    opts: &Options,
    stop: &AtomicBool,
    on: &mut dyn FnMut(Event),
) -> Result<Outcome, String> {
    let plan = plan::expand(sweep);
    let runs_dir = dir.join(RUNS);
    std::fs::create_dir_all(&runs_dir)
        .map_err(|e| format!("-o: cannot create {}: {e}", runs_dir.display()))?;
    let mut journal = Journal::open(dir, &plan)?;
    let axes: Vec<String> = sweep.axes.iter().map(|a| a.name.clone()).collect();
    let title = format!("Sweep {}", dir.display());
    let write_tables = |j: &Journal| {
        let t = Table::new(&axes, &j.rows());
        t.write(dir)?;
        let tmp = dir.join(format!(".{}.tmp", html::HTML));
        std::fs::write(&tmp, html::render(&title, &axes, &t))
            .and_then(|()| std::fs::rename(&tmp, dir.join(html::HTML)))
            .map_err(|e| format!("{}: {e}", html::HTML))
    };
    let mut todo: Vec<&Run> = plan.iter().filter(|r| !journal.is_done(r)).collect();
    todo.reverse();
    on(Event::Plan {
        total: plan.len(),
        done: plan.len() - todo.len(),
    });
    write_tables(&journal)?;
    let mut running: Vec<(&Run, Child, Instant)> = Vec::new();
    let mut result = Ok(());
    loop {
        let stopping = stop.load(Ordering::SeqCst) || result.is_err();
        while !stopping && running.len() < opts.jobs.max(1) {
            let Some(r) = todo.pop() else { break };
            match start(sweep, r, &runs_dir, opts) {
                Ok(child) => {
                    on(Event::Started(r));
                    running.push((r, child, Instant::now()));
                }
                Err(e) => {
                    let row = read_row(r, &runs_dir.join(&r.id), Some(e), 0.0);
                    on(Event::Finished(&row));
                    result = journal.record(row);
                }
            }
        }
        if running.is_empty() {
            break;
        }
        if stopping {
            for (_, child, _) in &running {
                // SAFETY: kill(2) on the pid of a child not yet waited for.
                unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
            }
            for (_, mut child, _) in running.drain(..) {
                let _ = child.wait();
            }
            break;
        }
        let mut i = 0;
        while i < running.len() {
            match running[i].1.try_wait() {
                Ok(None) => i += 1,
                done => {
                    let (r, _, started) = running.swap_remove(i);
                    let wall_s = started.elapsed().as_secs_f64();
                    if stop.load(Ordering::SeqCst) {
                        // It may have ended because of the same Ctrl-C: not a result.
                        continue;
                    }
                    let run_dir = runs_dir.join(&r.id);
                    let error = match done {
                        Ok(Some(s)) if s.success() => None,
                        Ok(Some(s)) => Some(failure(&run_dir, &s.to_string())),
                        Err(e) => Some(format!("cannot wait for latencylab: {e}")),
                        Ok(None) => unreachable!(),
                    };
                    let row = read_row(r, &run_dir, error, wall_s);
                    on(Event::Finished(&row));
                    if let Err(e) = journal.record(row).and_then(|_| write_tables(&journal)) {
                        result = Err(e);
                    }
                }
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    result?;
    write_tables(&journal)?;
    let rows = journal.rows();
    let ok = rows.iter().filter(|r| r.status == "ok").count();
    Ok(Outcome {
        total: plan.len(),
        ok,
        failed: rows.len() - ok,
        missing: plan.len() - rows.len(),
    })
}

/// Starts `latencylab` for `run` in a fresh `runs_dir/ID` (what an interrupted attempt left
/// there is removed first).
fn start(sweep: &SweepFile, run: &Run, runs_dir: &Path, opts: &Options) -> Result<Child, String> {
    let bin = opts.bin.as_path();
    let dir = runs_dir.join(&run.id);
    if dir.exists() {
        std::fs::remove_dir_all(&dir)
            .map_err(|e| format!("cannot clear {}: {e}", dir.display()))?;
    }
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let file = |path: PathBuf| {
        std::fs::File::create(&path).map_err(|e| format!("cannot create {}: {e}", path.display()))
    };
    let run_dir = RunDir::new(&dir);
    // Commands in the labs that call `latencylab` get the sweep's own.
    let mut path = std::ffi::OsString::from(bin.parent().unwrap_or(Path::new("/")));
    if let Some(p) = std::env::var_os("PATH") {
        path.push(":");
        path.push(p);
    }
    let (program, pre) = match opts.launcher.split_first() {
        Some((p, rest)) => (Path::new(p), rest),
        None => (bin, &[][..]),
    };
    let mut cmd = Command::new(program);
    if !pre.is_empty() {
        cmd.args(pre).arg(bin);
    }
    // A sweep killed outright (SIGKILL) must not leave its labs running into directories
    // that the next attempt reuses: they get the SIGTERM that ends a lab cleanly.
    // SAFETY: prctl(2) is async-signal-safe and touches only the child being started.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.args(plan::args(sweep, run, &dir))
        .env("PATH", path)
        .stdin(Stdio::null())
        .stdout(file(run_dir.command_out())?)
        .stderr(file(run_dir.latencylab_err())?)
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", program.display()))
}

/// A failed run's error: its exit status and the last line `latencylab` wrote on stderr.
fn failure(run_dir: &Path, status: &str) -> String {
    let err = std::fs::read_to_string(RunDir::new(run_dir).latencylab_err()).unwrap_or_default();
    match err.lines().rev().find(|l| !l.trim().is_empty()) {
        Some(l) => format!("{status}: {}", l.trim()),
        None => status.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// A stand-in for `latencylab` that leaves a run directory as a lab would: the seed
    /// decides the figure; seed 3 fails with a message; seed 4 hangs until it is stopped.
    const FAKE: &str = r#"#!/bin/sh
while [ $# -gt 0 ]; do
  case "$1" in
    --seed) seed=$2; shift;;
    -o) out=$2; shift;;
  esac
  shift
done
if [ "$seed" = 3 ]; then echo "latencylab: cannot start the lab" >&2; exit 1; fi
if [ "$seed" = 4 ]; then trap 'exit 143' TERM; while :; do sleep 0.05; done; fi
echo '{"type":"probe_summary","proto":"udp","rtt_p95_ms":'"$seed"'0}'
cat > "$out/summary.json" <<X
{"links":[],"no_route":0,"engine":{"packets":0,"delivery_lateness_ms":{"p50":0.1,"p95":0.1,"p99":0.1,"max":0.1},"write_errors":0,"cpu_s":0.1}}
X
"#;

    fn setup(name: &str, seeds: &str) -> (PathBuf, SweepFile, Options) {
        let d = std::env::temp_dir().join(format!("sweep-pool-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        let bin = d.join("fake-latencylab");
        std::fs::write(&bin, FAKE).unwrap();
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        let sweep = SweepFile::parse(
            &format!("[shell]\ncommand = \"true\"\n[axes]\nqueue = [\"fifo\", \"codel\"]\nseed = {seeds}\n"),
            Path::new("."),
        )
        .unwrap();
        (
            d.join("out"),
            sweep,
            Options {
                bin,
                jobs: 2,
                launcher: Vec::new(),
            },
        )
    }

    fn csv_rows(dir: &Path) -> Vec<String> {
        let csv = std::fs::read_to_string(dir.join(crate::table::CSV)).unwrap();
        csv.split("\r\n")
            .skip(1)
            .filter(|l| !l.is_empty())
            .map(String::from)
            .collect()
    }

    #[test]
    fn every_run_gets_a_row_and_a_failure_does_not_stop_the_sweep() {
        let (out, sweep, opts) = setup("all", "[1, 3]");
        let stop = AtomicBool::new(false);
        let mut finished = 0;
        let o = run(&sweep, &out, &opts, &stop, &mut |e| {
            if let Event::Finished(_) = e {
                finished += 1
            }
        })
        .unwrap();
        assert_eq!((o.total, o.ok, o.failed, o.missing), (4, 2, 2, 0));
        assert_eq!(finished, 4);
        let rows = csv_rows(&out);
        assert_eq!(rows.len(), 4);
        assert!(rows[0].starts_with("r0000,0,fifo,1,ok,,ok,"), "{}", rows[0]);
        assert!(rows[0].ends_with(",10"), "{}", rows[0]);
        assert!(
            rows[1].contains("failed,exit status: 1: latencylab: cannot start the lab"),
            "{}",
            rows[1]
        );
        // Nothing left to do: the same command again runs nothing.
        let mut started = 0;
        run(&sweep, &out, &opts, &stop, &mut |e| {
            if let Event::Started(_) = e {
                started += 1
            }
        })
        .unwrap();
        assert_eq!(started, 0);
        assert_eq!(csv_rows(&out).len(), 4);
    }

    #[test]
    fn a_stopped_sweep_records_no_stopped_run_and_resumes_with_only_the_missing_ones() {
        let (out, sweep, opts) = setup("stop", "[1, 4]");
        let stop = AtomicBool::new(false);
        // Stop as soon as the hanging run (seed 4) has started and the first run is recorded.
        let (mut hung, mut recorded) = (false, 0);
        let o = run(&sweep, &out, &opts, &stop, &mut |e| match e {
            Event::Started(r) if r.params[1].1.arg() == "4" => hung = true,
            Event::Finished(_) => {
                recorded += 1;
                if hung {
                    stop.store(true, Ordering::SeqCst);
                }
            }
            _ => {}
        })
        .unwrap();
        assert!(o.missing >= 1, "{o:?}");
        let before = csv_rows(&out);
        assert_eq!(before.len(), recorded);
        assert!(before.iter().all(|r| r.contains(",1,ok,")), "{before:?}");
        // The seed-4 runs would hang again: resume with seed 4 made to pass, by stopping
        // them once started, and see that only missing runs start.
        let stop2 = AtomicBool::new(false);
        let mut started = Vec::new();
        let _ = run(&sweep, &out, &opts, &stop2, &mut |e| {
            if let Event::Started(r) = e {
                started.push(r.id.clone());
                if r.params[1].1.arg() == "4" {
                    stop2.store(true, Ordering::SeqCst);
                }
            }
        });
        let done: Vec<String> = before.iter().map(|r| r[..5].to_string()).collect();
        assert!(
            started.iter().all(|s| !done.contains(s)),
            "{started:?} {done:?}"
        );
        assert_eq!(csv_rows(&out).len(), before.len(), "no row lost or doubled");
    }
}
