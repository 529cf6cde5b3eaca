//! The sweep file (docs/sweeps.md): what each run is (`[shell]` options, a `[demo]` or a
//! `[run]` file), the `[axes]` whose combinations are the runs, and `repeat`. Parsed and
//! checked whole before anything runs: every value of every axis is checked as the option it
//! sets, so that a typo is one line and exit 2, not the tenth run failing an hour in.
//!
//! Not here: running anything (see `pool`), or what a run's directory holds (see `row`).

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use labnet::Setting;

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
    },
    /// `latencylab demo NAME --duration .. --seed ..`.
    Demo {
        name: String,
        options: BTreeMap<String, String>,
    },
    /// `latencylab run FILE --seed ..`: the file as written, only the seed varies.
    Run { file: PathBuf },
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

/// `shell` options a sweep may set, and the `labnet` setting each one's value is checked as
/// (`None`: checked here).
const SHELL_OPTIONS: &[(&str, Option<&str>)] = &[
    ("rate", Some("rate")),
    ("down", Some("rate")),
    ("up", Some("rate")),
    ("delay", Some("delay")),
    ("rtt", Some("rtt")),
    ("down-delay", Some("delay")),
    ("up-delay", Some("delay")),
    ("queue", Some("queue")),
    ("down-queue", Some("queue")),
    ("up-queue", Some("queue")),
    ("loss", Some("loss")),
    ("down-loss", Some("loss")),
    ("up-loss", Some("loss")),
    ("down-trace", Some("trace")),
    ("up-trace", Some("trace")),
    ("overhead", Some("overhead")),
    ("bleach-ecn", None),
    ("nat64", None),
    ("server", None),
    ("cc", None),
    ("ecn", None),
    ("mtu", None),
    ("seed", None),
];

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
                    options.insert(k.clone(), v.arg());
                }
                let command = command.ok_or_else(|| {
                    SweepError("[shell] needs command = \"...\" (a shell command line run in the client, e.g. \"latencylab probe-client server --duration 5s\")".into())
                })?;
                Target::Shell { options, command }
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
                if let Some(k) = t.keys().find(|k| *k != "file") {
                    return err(format!("run.{k}: unknown key (known: file)"));
                }
                if !file.is_file() {
                    return err(format!("run.file: no file {}", file.display()));
                }
                Target::Run { file }
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
                        Target::Run { .. } => Err(format!(
                            "a [run] sweep varies only 'seed' (the run file says the rest; not '{k}')"
                        )),
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
        Ok(SweepFile {
            target,
            axes,
            repeat,
            capture,
        })
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

/// Checks one `shell` option's value as `latencylab shell` will read it.
fn check_shell_option(name: &str, v: &AxisValue, dir: &Path) -> Result<(), String> {
    let Some((_, setting)) = SHELL_OPTIONS.iter().find(|(n, _)| *n == name) else {
        let known: Vec<&str> = SHELL_OPTIONS.iter().map(|(n, _)| *n).collect();
        return Err(format!(
            "unknown shell option '{name}' (known: {})",
            known.join(", ")
        ));
    };
    let text = v.arg();
    match (*setting, name) {
        (Some(key), _) => {
            let read = |p: &Path| {
                std::fs::read_to_string(p)
                    .map(|t| (p.display().to_string(), t))
                    .map_err(|e| e.to_string())
            };
            Setting::parse(key, &text, dir, &read).map(|_| ())
        }
        (None, "bleach-ecn" | "nat64") => match v {
            AxisValue::Bool(_) => Ok(()),
            _ => Err(format!("cannot read '{text}' (try true or false)")),
        },
        (None, "seed") => check_seed(v),
        (None, "mtu") => match v {
            AxisValue::Int(i) if (1280..=65535).contains(i) => Ok(()),
            _ => Err(format!("cannot read mtu '{text}' (try 1500, 1280, 9000)")),
        },
        (None, "ecn") => match text.as_str() {
            "on" | "off" | "passive" => Ok(()),
            _ => Err(format!("cannot read ecn '{text}' (try on, off, passive)")),
        },
        _ => match v {
            AxisValue::Text(s) if !s.is_empty() => Ok(()),
            _ => Err(format!("must be a string in quotes, not {text}")),
        },
    }
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
        let Target::Shell { options, command } = &s.target else {
            panic!("{:?}", s.target)
        };
        assert_eq!(options["down"], "10mbit");
        assert_eq!(command, "latencylab probe-client server --duration 5s");
        assert_eq!(s.axes[0].name, "queue");
        assert_eq!(s.axes[1].values, vec![AxisValue::Int(1), AxisValue::Int(2)]);
        assert_eq!((s.repeat, s.capture), (1, true));
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
