//! The expansion of a sweep file into runs: every combination of the axes' values (the first
//! axis varies slowest), `repeat` times each, and the `latencylab` command line of each run.
//!
//! Not here: starting the commands (`pool`) or remembering which ran (`journal`).

use std::path::Path;

use crate::file::{AxisValue, SweepFile, Target};

/// One run of a sweep.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    /// `r0000`, `r0001`, …: the run's number in the plan, and the name of its directory.
    pub id: String,
    /// Each axis's name and this run's value of it, in the file's order.
    pub params: Vec<(String, AxisValue)>,
    /// Which repetition of the combination this is, from 0.
    pub rep: u32,
}

impl Run {
    /// The params as a JSON object (journal lines carry them, to recognise the same run).
    pub fn params_json(&self) -> serde_json::Value {
        serde_json::Value::Object(
            self.params
                .iter()
                .map(|(k, v)| (k.clone(), v.json()))
                .collect(),
        )
    }
}

/// Every run of `sweep`, in order.
pub fn expand(sweep: &SweepFile) -> Vec<Run> {
    let mut combos: Vec<Vec<(String, AxisValue)>> = vec![Vec::new()];
    for axis in &sweep.axes {
        combos = combos
            .into_iter()
            .flat_map(|c| {
                axis.values.iter().map(move |v| {
                    let mut c = c.clone();
                    c.push((axis.name.clone(), v.clone()));
                    c
                })
            })
            .collect();
    }
    let mut runs = Vec::new();
    for params in combos {
        for rep in 0..sweep.repeat {
            runs.push(Run {
                id: format!("r{:04}", runs.len()),
                params: params.clone(),
                rep,
            });
        }
    }
    runs
}

/// Whether shell option `flag` names a file (a trace).
fn is_file_option(flag: &str) -> bool {
    labnet::options::find(flag).is_some_and(|o| o.value_name == "FILE")
}

/// The arguments of `latencylab` for `run` of `sweep`, writing into `run_dir`.
pub fn args(sweep: &SweepFile, run: &Run, run_dir: &Path) -> Vec<String> {
    let dir = run_dir.display().to_string();
    let mut a: Vec<String> = Vec::new();
    match &sweep.target {
        Target::Shell {
            options,
            command,
            dir: file_dir,
        } => {
            a.push("shell".into());
            let axis = run.params.iter().map(|(k, v)| (k.clone(), v.clone()));
            let fixed = options
                .iter()
                .map(|(k, v)| (k.clone(), AxisValue::Text(v.clone())));
            for (k, v) in fixed.chain(axis) {
                // Flags (checked as true/false by the file) are there or not.
                if crate::file::is_flag(&k) {
                    if v.arg() == "true" {
                        a.push(format!("--{k}"));
                    }
                } else if is_file_option(&k) {
                    // Named from the sweep file's directory, wherever the sweep runs.
                    a.push(format!("--{k}"));
                    a.push(file_dir.join(v.arg()).display().to_string());
                } else {
                    a.push(format!("--{k}"));
                    a.push(v.arg());
                }
            }
            a.extend(["--quiet".into(), "-o".into(), dir]);
            if !sweep.capture {
                a.push("--no-capture".into());
            }
            a.extend(["--".into(), "sh".into(), "-c".into(), command.clone()]);
        }
        Target::Demo { name, options } => {
            a.extend(["demo".into(), name.clone()]);
            let axis = run.params.iter().map(|(k, v)| (k.clone(), v.arg()));
            for (k, v) in options.clone().into_iter().chain(axis) {
                if crate::file::demo_flag(name, &k) {
                    if v == "true" {
                        a.push(format!("--{k}"));
                    }
                } else {
                    a.push(format!("--{k}"));
                    a.push(v);
                }
            }
            a.extend(["--quiet".into(), "-o".into(), dir]);
        }
        Target::Run { file, sets } => {
            a.extend(["run".into(), file.display().to_string()]);
            let axis = run.params.iter().map(|(k, v)| (k.clone(), v.arg()));
            for (k, v) in sets.clone().into_iter().chain(axis) {
                if k == "seed" {
                    a.extend(["--seed".into(), v]);
                } else {
                    a.extend(["--set".into(), format!("{k}={v}")]);
                }
            }
            a.extend(["--quiet".into(), "-o".into(), dir]);
            if !sweep.capture {
                a.push("--no-capture".into());
            }
        }
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sweep(t: &str) -> SweepFile {
        SweepFile::parse(t, Path::new(".")).unwrap()
    }

    #[test]
    fn every_combination_is_one_run_repeated_with_the_first_axis_slowest() {
        let s = sweep(
            "repeat = 2\n[shell]\ncommand = \"true\"\n[axes]\nqueue = [\"fifo\", \"codel\"]\nseed = [1, 2, 3]\n",
        );
        let runs = expand(&s);
        assert_eq!(runs.len(), 12);
        assert_eq!(runs[0].id, "r0000");
        assert_eq!(runs[11].id, "r0011");
        let key = |r: &Run| (r.params[0].1.arg(), r.params[1].1.arg(), r.rep);
        assert_eq!(key(&runs[0]), ("fifo".into(), "1".into(), 0));
        assert_eq!(key(&runs[1]), ("fifo".into(), "1".into(), 1));
        assert_eq!(key(&runs[2]), ("fifo".into(), "2".into(), 0));
        assert_eq!(key(&runs[6]), ("codel".into(), "1".into(), 0));
    }

    #[test]
    fn no_axes_is_one_run() {
        let runs = expand(&sweep("[demo]\nname = \"l4s\"\n"));
        assert_eq!(runs.len(), 1);
        assert!(runs[0].params.is_empty());
    }

    #[test]
    fn a_shell_run_passes_fixed_options_then_axes_then_the_command() {
        let s = sweep(
            "capture = false\n[shell]\ndown = \"10mbit\"\nnat64 = true\ncommand = \"echo hi\"\n[axes]\nqueue = [\"codel ecn\"]\nbleach-ecn = [false]\n",
        );
        let runs = expand(&s);
        let a = args(&s, &runs[0], Path::new("/tmp/x/r0000"));
        let want = [
            "shell",
            "--down",
            "10mbit",
            "--nat64",
            "--queue",
            "codel ecn",
            "--quiet",
            "-o",
            "/tmp/x/r0000",
            "--no-capture",
            "--",
            "sh",
            "-c",
            "echo hi",
        ];
        assert_eq!(a, want);
    }

    #[test]
    fn a_demo_run_passes_its_options() {
        let s = sweep("[demo]\nname = \"bufferbloat\"\nduration = \"5s\"\n[axes]\nseed = [7]\n");
        let a = args(&s, &expand(&s)[0], Path::new("d"));
        assert_eq!(
            a,
            [
                "demo",
                "bufferbloat",
                "--duration",
                "5s",
                "--seed",
                "7",
                "--quiet",
                "-o",
                "d"
            ]
        );
    }

    #[test]
    fn a_trace_file_is_named_from_the_sweep_files_directory() {
        let dir = std::env::temp_dir().join(format!("sweep-trace-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("traces")).unwrap();
        std::fs::write(dir.join("traces/cell.trace"), "1\n2\n").unwrap();
        let s = SweepFile::parse(
            "[shell]\ncommand = \"true\"\ndown-trace = \"traces/cell.trace\"\n[axes]\nseed = [1]\n",
            &dir,
        )
        .unwrap();
        let a = args(&s, &expand(&s)[0], Path::new("d"));
        let at = a.iter().position(|x| x == "--down-trace").unwrap();
        assert_eq!(Path::new(&a[at + 1]), dir.join("traces/cell.trace"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
