//! The sweep file (docs/sweeps.md): what each run is (`[shell]` options, a `[demo]` or a
//! `[run]` file), the `[axes]` whose combinations are the runs, and `repeat`. Parsed and
//! checked whole before anything runs: every value of every axis is checked as the option it
//! sets, so that a typo is one line and exit 2, not the tenth run failing an hour in.
//!
//! Not here: running anything (see `pool`), or what a run's directory holds (see `row`).

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use labnet::options::{self, Form};
use labnet::run_file::{parse_run_file_set, SetValue};

/// A mistake in the sweep file: one line naming the key, the value and what would have been
/// accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SweepError(pub String);

impl fmt::Display for SweepError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SweepError {}

fn err<T>(s: impl Into<String>) -> Result<T, SweepError> {
    Err(SweepError(s.into()))
}

/// What every run of the sweep runs.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    /// `latencylab shell OPTIONS -- sh -c COMMAND`. `options` are the fixed ones, by long name.
    Shell {
        options: BTreeMap<String, String>,
        command: String,
        /// The sweep file's directory, where the file names among the options (trace files)
        /// point.
        dir: PathBuf,
    },
    /// `latencylab demo NAME --duration .. --seed ..`.
    Demo {
        name: String,
        options: BTreeMap<String, String>,
    },
    /// `latencylab run FILE --set KEY=VALUE .. --seed ..`: the file with values set over its
    /// own (`sets`, fixed, by [`labnet::run_file::SetValue`]'s keys; the axes add theirs).
    Run {
        file: PathBuf,
        sets: BTreeMap<String, String>,
    },
}

impl Target {
    fn kind(&self) -> &'static str {
        match self {
            Target::Shell { .. } => "shell",
            Target::Demo { .. } => "demo",
            Target::Run { .. } => "run",
        }
    }
}

/// One axis: an option's name and the values it takes, in the file's order.
#[derive(Debug, Clone, PartialEq)]
pub struct Axis {
    pub name: String,
    pub values: Vec<AxisValue>,
}

/// An axis value as written: numbers stay numbers in the results table.
#[derive(Debug, Clone, PartialEq)]
pub enum AxisValue {
    Text(String),
    Int(i64),
    Float(f64),
    Bool(bool),
}

impl AxisValue {
    /// The value as a command-line argument.
    pub fn arg(&self) -> String {
        match self {
            AxisValue::Text(s) => s.clone(),
            AxisValue::Int(i) => i.to_string(),
            AxisValue::Float(f) => f.to_string(),
            AxisValue::Bool(b) => b.to_string(),
        }
    }

    pub fn json(&self) -> serde_json::Value {
        match self {
            AxisValue::Text(s) => s.clone().into(),
            AxisValue::Int(i) => (*i).into(),
            AxisValue::Float(f) => (*f).into(),
            AxisValue::Bool(b) => (*b).into(),
        }
    }
}

/// A whole sweep file, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct SweepFile {
    pub target: Target,
    pub axes: Vec<Axis>,
    /// Runs of each combination (the `rep` column counts them from 0).
    pub repeat: u32,
    /// Whether runs keep their pcaps and link logs (`capture = false`: `--no-capture`).
    pub capture: bool,
}

const TOP_KEYS: &str = "shell, demo, run, axes, repeat, capture";

/// The largest sweep file read.
const SWEEP_FILE_MAX_BYTES: u64 = 1 << 20;

impl SweepFile {
    /// Reads and checks the sweep file at `path`; relative file names in it are taken from
    /// its directory.
    pub fn load(path: &Path) -> Result<SweepFile, SweepError> {
        let cannot =
            |why: String| SweepError(format!("cannot read sweep file {}: {why}", path.display()));
        // Only a regular file of a believable size: a device (`/dev/zero`) would be read until
        // memory runs out. Real sweep files are a few kilobytes.
        let meta = std::fs::metadata(path).map_err(|e| cannot(e.to_string()))?;
        if !meta.is_file() {
            return Err(cannot("it is not a regular file".into()));
        }
        if meta.len() > SWEEP_FILE_MAX_BYTES {
            return Err(cannot(format!(
                "it is larger than {SWEEP_FILE_MAX_BYTES} bytes, more than any real one"
            )));
        }
        let text = std::fs::read_to_string(path).map_err(|e| cannot(e.to_string()))?;
        let dir = path.parent().unwrap_or(Path::new("."));
        SweepFile::parse(&text, dir).map_err(|e| SweepError(format!("{}: {e}", path.display())))
    }

    /// Parses and checks a sweep file's text. `dir` is where relative file names point.
    pub fn parse(text: &str, dir: &Path) -> Result<SweepFile, SweepError> {
        let doc: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| SweepError(one_line(&e.to_string())))?;
        for k in doc.keys() {
            if !TOP_KEYS.split(", ").any(|t| t == k) {
                return err(format!("unknown key '{k}' (known: {TOP_KEYS})"));
            }
        }
        let targets: Vec<&str> = ["shell", "demo", "run"]
            .into_iter()
            .filter(|k| doc.contains_key(*k))
            .collect();
        if targets.len() != 1 {
            return err(format!(
                "a sweep runs exactly one of [shell], [demo] or [run] (found {})",
                if targets.is_empty() {
                    "none".to_string()
                } else {
                    targets.join(" and ")
                }
            ));
        }
        let table = |k: &str| -> Result<&toml::Table, SweepError> {
            doc[k]
                .as_table()
                .ok_or_else(|| SweepError(format!("'{k}' must be a table ([{k}])")))
        };
        let target = match targets[0] {
            "shell" => {
                let mut options = BTreeMap::new();
                let mut command = None;
                for (k, v) in table("shell")? {
                    if k == "command" {
                        command = Some(string(&format!("shell.{k}"), v)?);
                        continue;
                    }
                    let v = scalar(&format!("shell.{k}"), v)?;
                    check_shell_option(k, &v, dir)
                        .map_err(|e| SweepError(format!("shell.{k}: {e}")))?;
                    // A flag set to false is the same as not given.
                    if !is_flag(k) || v == AxisValue::Bool(true) {
                        options.insert(k.clone(), v.arg());
                    }
                }
                let command = command.ok_or_else(|| {
                    SweepError("[shell] needs command = \"...\" (a shell command line run in the client, e.g. \"latencylab probe-client server --duration 5s\")".into())
                })?;
                Target::Shell {
                    options,
                    command,
                    dir: dir.to_path_buf(),
                }
            }
            "demo" => {
                let t = table("demo")?;
                let name = match t.get("name") {
                    Some(v) => string("demo.name", v)?,
                    None => {
                        return err(format!(
                            "[demo] needs name = one of {}",
                            demo::params::names().join(", ")
                        ))
                    }
                };
                if demo::params::find(&name).is_none() {
                    return err(format!(
                        "demo.name: unknown demo '{name}' (known: {})",
                        demo::params::names().join(", ")
                    ));
                }
                let mut options = BTreeMap::new();
                for (k, v) in t.iter().filter(|(k, _)| *k != "name") {
                    let v = scalar(&format!("demo.{k}"), v)?;
                    check_demo_option(&name, k, &v)
                        .map_err(|e| SweepError(format!("demo.{k}: {e}")))?;
                    options.insert(k.clone(), v.arg());
                }
                Target::Demo { name, options }
            }
            _ => {
                let t = table("run")?;
                let file = match t.get("file") {
                    Some(v) => dir.join(string("run.file", v)?),
                    None => return err("[run] needs file = \"RUN-FILE.toml\""),
                };
                if !file.is_file() {
                    return err(format!("run.file: no file {}", file.display()));
                }
                let mut sets = BTreeMap::new();
                for (k, v) in t.iter().filter(|(k, _)| *k != "file") {
                    let v = scalar(&format!("run.{k}"), v)?;
                    check_set(&file, &sets, k, &v)
                        .map_err(|e| SweepError(format!("run.{k}: {e}")))?;
                    sets.insert(k.clone(), v.arg());
                }
                Target::Run { file, sets }
            }
        };
        let mut axes = Vec::new();
        if let Some(a) = doc.get("axes") {
            let a = a
                .as_table()
                .ok_or_else(|| SweepError("'axes' must be a table ([axes])".into()))?;
            for (k, v) in a {
                let what = format!("axes.{k}");
                let list = v.as_array().ok_or_else(|| {
                    SweepError(format!("{what}: must be a list of values, e.g. [1, 2, 3]"))
                })?;
                if list.is_empty() {
                    return err(format!("{what}: an empty list would make no runs"));
                }
                let mut values = Vec::new();
                for v in list {
                    let v = scalar(&what, v)?;
                    let checked = match &target {
                        Target::Shell { options, .. } => {
                            if options.contains_key(k) {
                                return err(format!(
                                    "{what}: '{k}' is also set in [shell]; set it in one place"
                                ));
                            }
                            check_shell_option(k, &v, dir)
                        }
                        Target::Demo { name, options } => {
                            if options.contains_key(k) {
                                return err(format!(
                                    "{what}: '{k}' is also set in [demo]; set it in one place"
                                ));
                            }
                            check_demo_option(name, k, &v)
                        }
                        Target::Run { .. } if k == "seed" => check_seed(&v),
                        Target::Run { file, sets } => {
                            if sets.contains_key(k) {
                                return err(format!(
                                    "{what}: '{k}' is also set in [run]; set it in one place"
                                ));
                            }
                            check_set(file, sets, k, &v)
                        }
                    };
                    checked.map_err(|e| SweepError(format!("{what}: {e}")))?;
                    if values.contains(&v) {
                        return err(format!("{what}: '{}' is listed twice", v.arg()));
                    }
                    values.push(v);
                }
                axes.push(Axis {
                    name: k.clone(),
                    values,
                });
            }
        }
        let repeat = match doc.get("repeat") {
            None => 1,
            Some(toml::Value::Integer(n)) if (1..=10_000).contains(n) => *n as u32,
            Some(v) => {
                return err(format!(
                    "repeat: cannot read {v} (try a count from 1, e.g. 3)"
                ))
            }
        };
        let capture = match doc.get("capture") {
            None => true,
            Some(toml::Value::Boolean(b)) => *b,
            Some(v) => return err(format!("capture: cannot read {v} (try true or false)")),
        };
        if matches!(target, Target::Demo { .. }) && !capture {
            return err(format!(
                "capture: a {} sweep always keeps its captures (its analysis reads them)",
                target.kind()
            ));
        }
        let sweep = SweepFile {
            target,
            axes,
            repeat,
            capture,
        };
        sweep.check_combinations(dir)?;
        Ok(sweep)
    }

    /// Builds the lab of every combination of the axes, as its run will, so that values that
    /// are right alone but wrong together (`delay` in `[shell]`, `rtt` on an axis) are one line
    /// before anything runs.
    fn check_combinations(&self, dir: &Path) -> Result<(), SweepError> {
        for run in crate::plan::expand(self).iter().filter(|r| r.rep == 0) {
            let params = || {
                let p: Vec<String> = run
                    .params
                    .iter()
                    .map(|(k, v)| format!("{k} = {}", v.arg()))
                    .collect();
                format!("run {} ({})", run.id, p.join(", "))
            };
            let checked = match &self.target {
                Target::Shell { options, .. } => {
                    let axis = run.params.iter().map(|(k, v)| (k.clone(), v.arg()));
                    let given: Vec<(String, String)> =
                        options.clone().into_iter().chain(axis).collect();
                    let pairs = given
                        .iter()
                        .filter_map(|(k, v)| options::find(k).map(|o| (o, v.as_str())));
                    let rooted = |p: &Path| read_file(&dir.join(p));
                    options::shell_options(pairs)
                        .and_then(|o| labnet::shell::shell_config(&o, &rooted))
                        .map(|_| ())
                        .map_err(|e| e.0)
                }
                Target::Run { file, sets } => {
                    let axis = run
                        .params
                        .iter()
                        .filter(|(k, _)| k != "seed")
                        .map(|(k, v)| (k.clone(), v.arg()));
                    sets.clone()
                        .into_iter()
                        .chain(axis)
                        .map(|(k, v)| SetValue::parse(&format!("{k}={v}")).map_err(|e| e.0))
                        .collect::<Result<Vec<_>, _>>()
                        .and_then(|sets| lab_of_run_file(file, &sets).map(|_| ()))
                }
                Target::Demo { .. } => Ok(()),
            };
            checked.map_err(|e| SweepError(format!("{}: {e}", params())))?;
        }
        Ok(())
    }
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn string(what: &str, v: &toml::Value) -> Result<String, SweepError> {
    v.as_str()
        .map(str::to_string)
        .ok_or_else(|| SweepError(format!("{what}: must be a string in quotes, not {v}")))
}

fn scalar(what: &str, v: &toml::Value) -> Result<AxisValue, SweepError> {
    Ok(match v {
        toml::Value::String(s) => AxisValue::Text(s.clone()),
        toml::Value::Integer(i) => AxisValue::Int(*i),
        toml::Value::Float(f) => AxisValue::Float(*f),
        toml::Value::Boolean(b) => AxisValue::Bool(*b),
        _ => {
            return err(format!(
                "{what}: cannot use {v} (a string, number or true/false)"
            ))
        }
    })
}

fn check_seed(v: &AxisValue) -> Result<(), String> {
    match v {
        AxisValue::Int(i) if *i >= 0 => Ok(()),
        _ => Err(format!("cannot read seed {} (try 0, 1, 2)", v.arg())),
    }
}

/// Whether the `shell` option `flag` is given or not, with no value.
pub(crate) fn is_flag(flag: &str) -> bool {
    options::find(flag).is_some_and(|o| o.form == Form::Flag)
}

/// Reads a trace file a `[shell]` option names, as `latencylab shell` will.
fn read_file(p: &Path) -> Result<(String, String), String> {
    std::fs::read_to_string(p)
        .map(|t| (p.display().to_string(), t))
        .map_err(|e| e.to_string())
}

/// Checks one `shell` option's value as `latencylab shell` will read it (labnet's table of
/// options: every option of `shell` can be set).
fn check_shell_option(name: &str, v: &AxisValue, dir: &Path) -> Result<(), String> {
    if name == "seed" {
        return check_seed(v);
    }
    let form = options::find(name).map(|o| o.form);
    match (form, v) {
        (Some(Form::Flag), AxisValue::Bool(_)) | (Some(Form::ZeroOne), _) | (None, _) => {}
        (Some(Form::Flag), _) => {
            return Err(format!("cannot read '{}' (try true or false)", v.arg()))
        }
        (Some(_), AxisValue::Bool(_)) => {
            return Err(format!(
                "must be a value such as \"{}\", not {}",
                example(name),
                v.arg()
            ))
        }
        _ => {}
    }
    options::check_value(name, &v.arg(), dir, &read_file)
}

fn example(flag: &str) -> &'static str {
    options::find(flag).map_or("", |o| o.example)
}

/// Checks one value set over a run file (`KEY = VALUE` in `[run]` or an axis), together with
/// the fixed ones, by reading the whole run file as `latencylab run --set` will.
fn check_set(
    file: &Path,
    fixed: &BTreeMap<String, String>,
    key: &str,
    v: &AxisValue,
) -> Result<(), String> {
    let mut sets = Vec::new();
    for (k, x) in fixed {
        sets.push(SetValue::parse(&format!("{k}={x}")).map_err(|e| e.0)?);
    }
    sets.push(SetValue::parse(&format!("{key}={}", v.arg())).map_err(|e| e.0)?);
    lab_of_run_file(file, &sets).map(|_| ())
}

/// The lab of a run file with values set over it, read as `latencylab run` reads it.
pub(crate) fn lab_of_run_file(file: &Path, sets: &[SetValue]) -> Result<labnet::LabConfig, String> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| format!("cannot read run file {}: {e}", file.display()))?;
    let dir = file.parent().unwrap_or(Path::new("."));
    parse_run_file_set(
        &file.display().to_string(),
        &text,
        dir,
        None,
        sets,
        &read_file,
    )
    .map_err(|e| e.0)
}

/// A value of a demo's parameter, checked as the demo's declaration reads it (the same
/// check as `latencylab demo NAME --PARAM`), so every parameter of every demo can be swept.
fn check_demo_option(demo: &str, name: &str, v: &AxisValue) -> Result<(), String> {
    if name == "seed" {
        return check_seed(v);
    }
    let d = demo::params::find(demo).expect("the demo's name was checked");
    d.read(name, &v.arg()).map(|_| ()).map_err(|e| e.0)
}

/// Whether `name` is an on/off parameter of `demo`: given as a bare `--NAME` when true.
pub fn demo_flag(demo: &str, name: &str) -> bool {
    demo::params::find(demo)
        .and_then(|d| d.param(name))
        .is_some_and(|p| matches!(p.kind, demo::params::Kind::Flag))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(t: &str) -> Result<SweepFile, SweepError> {
        SweepFile::parse(t, Path::new("."))
    }

    const SMALL: &str = r#"
[shell]
down = "10mbit"
rtt = "20ms"
command = "latencylab probe-client server --duration 5s"
[axes]
queue = ["fifo limit 300", "codel ecn"]
seed = [1, 2]
"#;

    #[test]
    fn a_shell_sweep_keeps_its_options_and_axes_in_file_order() {
        let s = parse(SMALL).unwrap();
        let Target::Shell {
            options, command, ..
        } = &s.target
        else {
            panic!("{:?}", s.target)
        };
        assert_eq!(options["down"], "10mbit");
        assert_eq!(command, "latencylab probe-client server --duration 5s");
        assert_eq!(s.axes[0].name, "queue");
        assert_eq!(s.axes[1].values, vec![AxisValue::Int(1), AxisValue::Int(2)]);
        assert_eq!((s.repeat, s.capture), (1, true));
    }

    #[test]
    fn axes_come_in_the_order_they_were_written_not_by_name() {
        let text = SMALL.replace(
            "queue = [\"fifo limit 300\", \"codel ecn\"]\nseed = [1, 2]",
            "seed = [1, 2]\nqueue = [\"fifo limit 300\", \"codel ecn\"]",
        );
        assert_ne!(text, SMALL);
        let s = parse(&text).unwrap();
        let names: Vec<&str> = s.axes.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["seed", "queue"]);
    }

    #[test]
    fn a_bad_queue_in_an_axis_names_the_axis_and_the_value() {
        let e = parse(&SMALL.replace("codel ecn", "codle")).unwrap_err().0;
        assert!(e.starts_with("axes.queue: "), "{e}");
        assert!(e.contains("codle"), "{e}");
        assert!(!e.contains('\n'), "{e}");
    }

    #[test]
    fn a_bad_rate_in_shell_is_refused() {
        let e = parse(&SMALL.replace("10mbit", "10 mbits")).unwrap_err().0;
        assert!(e.starts_with("shell.down: "), "{e}");
    }

    #[test]
    fn unknown_options_keys_and_demos_are_refused_with_what_is_known() {
        let e = parse(&SMALL.replace("seed = [1, 2]", "sede = [1, 2]"))
            .unwrap_err()
            .0;
        assert!(
            e.contains("unknown shell option 'sede'") && e.contains("seed"),
            "{e}"
        );
        let e = parse(&format!("repeats = 3\n{SMALL}")).unwrap_err().0;
        assert!(e.contains("unknown key 'repeats'"), "{e}");
        let e = parse("[demo]\nname = \"bufferbloot\"\n").unwrap_err().0;
        assert!(
            e.contains("bufferbloot") && e.contains("bufferbloat"),
            "{e}"
        );
    }

    #[test]
    fn a_sweep_needs_exactly_one_target_and_a_command_for_shell() {
        assert!(parse("[axes]\nseed = [1]\n")
            .unwrap_err()
            .0
            .contains("none"));
        let e = parse("[shell]\nrate = \"1mbit\"\n").unwrap_err().0;
        assert!(e.contains("command"), "{e}");
        let both = format!("{SMALL}\n[demo]\nname = \"l4s\"\n");
        assert!(parse(&both).unwrap_err().0.contains("shell and demo"));
    }

    #[test]
    fn an_option_set_twice_or_a_value_listed_twice_is_refused() {
        let e = parse(&SMALL.replace("rtt = \"20ms\"", "seed = 3"))
            .unwrap_err()
            .0;
        assert!(e.contains("also set in [shell]"), "{e}");
        let e = parse(&SMALL.replace("[1, 2]", "[1, 1]")).unwrap_err().0;
        assert!(e.contains("listed twice"), "{e}");
        let e = parse(&SMALL.replace("[1, 2]", "[]")).unwrap_err().0;
        assert!(e.contains("no runs"), "{e}");
    }

    #[test]
    fn a_demo_sweep_checks_its_duration_and_seed() {
        let s = parse("[demo]\nname = \"bufferbloat\"\nduration = \"10s\"\n[axes]\nseed = [1, 2, 3]\nrepeat = 2\n");
        // `repeat` below [axes] is in the axes table: refused, not silently ignored.
        assert!(s.unwrap_err().0.starts_with("axes.repeat: "));
        let s = parse("repeat = 2\n[demo]\nname = \"bufferbloat\"\nduration = \"10s\"\n[axes]\nseed = [1, 2, 3]\n").unwrap();
        assert_eq!(s.repeat, 2);
        let e = parse("[demo]\nname = \"l4s\"\nduration = \"ten\"\n")
            .unwrap_err()
            .0;
        assert!(e.starts_with("demo.duration: ") && e.contains("ten"), "{e}");
        let e = parse("[demo]\nname = \"l4s\"\n[axes]\nseed = [-1]\n")
            .unwrap_err()
            .0;
        assert!(e.contains("seed -1"), "{e}");
    }

    #[test]
    fn every_parameter_of_every_demo_is_checked_as_the_demo_declares_it() {
        let s = parse("[demo]\nname = \"cwnd-reuse\"\nrtt = \"100ms\"\n[axes]\nidle = [\"1s\", \"3s\"]\nno-control = [true, false]\n").unwrap();
        let runs = crate::plan::expand(&s);
        assert_eq!(runs.len(), 4);
        let args = crate::plan::args(&s, &runs[0], Path::new("o"));
        assert!(args.windows(2).any(|w| w == ["--rtt", "100ms"]), "{args:?}");
        assert!(args.iter().any(|a| a == "--no-control"), "{args:?}");
        let off = crate::plan::args(&s, &runs[1], Path::new("o"));
        assert!(!off.iter().any(|a| a == "--no-control"), "{off:?}");
        let e = parse("[demo]\nname = \"pipelining\"\n[axes]\nrtt = [100]\n")
            .unwrap_err()
            .0;
        assert!(
            e.starts_with("axes.rtt: cannot use '100'") && e.contains("100ms"),
            "{e}"
        );
        let e = parse("[demo]\nname = \"nagle\"\njitter = \"5ms\"\n")
            .unwrap_err()
            .0;
        assert_eq!(
            e,
            "demo.jitter: demo nagle has no parameter 'jitter' (known: duration, seed)"
        );
        let e = parse("[demo]\nname = \"pps\"\n[axes]\npps = [50]\n")
            .unwrap_err()
            .0;
        assert!(e.contains("from 100 to 100000"), "{e}");
    }

    #[test]
    fn the_example_sweep_files_are_valid_and_have_the_runs_they_promise() {
        let ex = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
        let count = |name: &str| {
            let s = SweepFile::load(&ex.join(name)).unwrap_or_else(|e| panic!("{e}"));
            crate::plan::expand(&s).len()
        };
        assert_eq!(count("sweep-small.toml"), 4);
        assert_eq!(count("sweep-bufferbloat.toml"), 90);
        assert_eq!(count("sweep-nagle.toml"), 2);
        assert_eq!(count("sweep-l4s.toml"), 2);
        assert_eq!(count("sweep-jitter-queue.toml"), 6);
    }

    #[test]
    fn every_shell_option_can_be_an_axis_and_a_fixed_option() {
        let dir = std::env::temp_dir().join(format!("sweep-file-{}-all", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("cell.trace"), "1\n2\n").unwrap();
        for o in options::table() {
            let v = match o.form {
                Form::Flag => "true".to_string(),
                Form::U32 | Form::U64 | Form::ZeroOne => o.example.to_string(),
                _ => format!("\"{}\"", o.example),
            };
            // A CLAT needs the NAT64 it translates for.
            let nat64 = if o.flag.starts_with("clat") {
                "nat64 = true\n"
            } else {
                ""
            };
            let axis = format!(
                "[shell]\ncommand = \"true\"\n{nat64}[axes]\n{} = [{v}]\n",
                o.flag
            );
            let s = SweepFile::parse(&axis, &dir).unwrap_or_else(|e| panic!("{}: {e}", o.flag));
            assert_eq!(s.axes[0].name, o.flag);
            let fixed = format!("[shell]\ncommand = \"true\"\n{nat64}{} = {v}\n", o.flag);
            SweepFile::parse(&fixed, &dir).unwrap_or_else(|e| panic!("{}: {e}", o.flag));
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn values_right_alone_but_wrong_together_are_refused_naming_the_run() {
        let e = parse("[shell]\ncommand = \"true\"\nrtt = \"40ms\"\n[axes]\nqueue = [\"fifo\"]\ndelay = [\"5ms\"]\n")
            .unwrap_err()
            .0;
        assert_eq!(
            e,
            "run r0000 (queue = fifo, delay = 5ms): --rtt and --delay both set the delay: give one of them"
        );
        let e = parse("[shell]\ncommand = \"true\"\n[axes]\nclat = [true]\n")
            .unwrap_err()
            .0;
        assert!(e.contains("--clat needs --nat64"), "{e}");
    }

    #[test]
    fn a_run_file_sweep_sets_any_key_by_link_and_host_name() {
        let ex = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
        let text = "[run]\nfile = \"wifi-cellular.toml\"\n\"link.wifi.rate\" = \"20mbit\"\n[axes]\n\"link.wifi.down.queue\" = [\"fifo limit 100\", \"fq_codel\"]\n\"host.phone.cc\" = [\"reno\"]\nseed = [1, 2]\n";
        let s = SweepFile::parse(text, &ex).unwrap();
        let runs = crate::plan::expand(&s);
        assert_eq!(runs.len(), 4);
        let a = crate::plan::args(&s, &runs[3], Path::new("d"));
        let want: Vec<String> = [
            "--set",
            "link.wifi.rate=20mbit",
            "--set",
            "link.wifi.down.queue=fq_codel",
            "--set",
            "host.phone.cc=reno",
            "--seed",
            "2",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(a[2..10], want[..]);
        let e = |t: &str| {
            SweepFile::parse(&text.replace("\"fq_codel\"", t), &ex)
                .unwrap_err()
                .0
        };
        assert!(
            e("\"codle\"").starts_with("axes.link.wifi.down.queue: "),
            "{}",
            e("\"codle\"")
        );
        assert!(e("\"codle\"").contains("codle"));
        let e = SweepFile::parse(&text.replace("link.wifi.down", "link.wlan.down"), &ex)
            .unwrap_err()
            .0;
        assert!(
            e.contains("no [[link]] named 'wlan' (the file has wifi, cell"),
            "{e}"
        );
        let e = SweepFile::parse(
            &text.replace("\"host.phone.cc\"", "\"link.wifi.rate\""),
            &ex,
        )
        .unwrap_err()
        .0;
        assert!(e.contains("also set in [run]"), "{e}");
    }

    #[test]
    fn toml_syntax_errors_are_one_line() {
        let e = parse("[shell\nrate = 1").unwrap_err().0;
        assert!(!e.contains('\n'), "{e}");
    }

    #[test]
    fn a_sweep_file_that_is_a_device_or_a_directory_is_refused_in_one_line() {
        let e = SweepFile::load(Path::new("/dev/zero")).unwrap_err().0;
        assert!(e.contains("/dev/zero: it is not a regular file"), "{e}");
        let e = SweepFile::load(&std::env::temp_dir()).unwrap_err().0;
        assert!(e.contains("not a regular file") && !e.contains('\n'), "{e}");
    }
}
