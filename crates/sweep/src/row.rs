//! One row of the results table: a run's parameters, how it ended, and the figures read from
//! its directory through the documented formats (docs/run-dir.md: `summary.json`; a demo's
//! `results.json`; the traffic programs' JSON lines of docs/apps.md in a shell run's
//! `command.out`).
//!
//! Not here: the table's files (`table`), or running anything.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use labnet::run_dir::{Results, RunDir, Summary};
use serde_json::{Map, Value};

use crate::plan::Run;

/// The most a lab's engine may deliver packets late (p99 of `engine.delivery_lateness_ms`)
/// for its timing to count as sound: 1 ms, a small part of any queue delay a sweep studies,
/// and twenty times the forwarding goal of docs/PERFORMANCE.md (50 µs), which a loaded
/// machine misses without the figures being wrong. A lab run with `--precision` may deliver
/// that much early by design: its limit is 1 ms more than its precision.
pub const LATENESS_P99_LIMIT_MS: f64 = 1.0;

/// One row, as the journal keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub run: String,
    pub rep: u32,
    /// The axes' values, by axis name.
    pub params: Value,
    /// `ok` or `failed`.
    pub status: String,
    /// Why a failed run failed (its last error line), or `None`.
    pub error: Option<String>,
    /// `ok` when the lab's engine kept its timing (see [`LATENESS_P99_LIMIT_MS`]), `late`
    /// when it did not, `None` when the run left no summary.
    pub self_check: Option<String>,
    /// Wall time of the `latencylab` process.
    pub wall_s: f64,
    /// The figures, by column name: numbers or strings.
    pub figures: BTreeMap<String, Value>,
}

impl Row {
    /// The row as a journal line's object.
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("run".into(), self.run.clone().into());
        m.insert("rep".into(), self.rep.into());
        m.insert("params".into(), self.params.clone());
        m.insert("status".into(), self.status.clone().into());
        m.insert("error".into(), self.error.clone().into());
        m.insert("self_check".into(), self.self_check.clone().into());
        m.insert("wall_s".into(), self.wall_s.into());
        m.insert(
            "figures".into(),
            Value::Object(self.figures.clone().into_iter().collect()),
        );
        Value::Object(m)
    }

    /// Reads a journal line's object back; `None` when it is not a whole row.
    pub fn from_json(v: &Value) -> Option<Row> {
        let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
        Some(Row {
            run: s("run")?,
            rep: u32::try_from(v.get("rep")?.as_u64()?).ok()?,
            params: v.get("params")?.clone(),
            status: s("status")?,
            error: s("error"),
            self_check: s("self_check"),
            wall_s: v.get("wall_s")?.as_f64()?,
            figures: v.get("figures")?.as_object()?.clone().into_iter().collect(),
        })
    }
}

/// The row of `run`, which left `dir` and ended with `error` (`None`: exit status 0) after
/// `wall_s`. A run dir that cannot be read makes the row `failed`, with the reason.
pub fn read_row(run: &Run, dir: &Path, error: Option<String>, wall_s: f64) -> Row {
    let mut figures = BTreeMap::new();
    let mut lateness = Vec::new();
    let mut problems = Vec::new();
    // A shell or run lab leaves summary.json at the top; a demo, one per lab in a
    // subdirectory (named after the lab, which prefixes its columns), or two levels down for a
    // demo whose labs are grouped (`nat64`: network, then client).
    let top = RunDir::new(dir);
    let mut labs: Vec<(String, PathBuf)> = Vec::new();
    if top.summary_json().is_file() {
        labs.push((String::new(), top.summary_json()));
    } else {
        lab_summaries(dir, "", 2, &mut labs);
    }
    for (prefix, path) in &labs {
        match read(path)
            .and_then(|t| Summary::parse(&path.display().to_string(), &t).map_err(|e| e.0))
        {
            Ok(s) => lateness.push(summary_figures(&s, prefix, &mut figures)),
            Err(e) => problems.push(e),
        }
    }
    let results = top.results_json();
    if results.is_file() {
        match read(&results)
            .and_then(|t| Results::parse(&results.display().to_string(), &t).map_err(|e| e.0))
        {
            Ok(r) => figures.extend(r.columns(2)),
            Err(e) => problems.push(e),
        }
    }
    let out = top.command_out();
    if out.is_file() {
        match read(&out) {
            Ok(text) => program_figures(&text, &mut figures),
            Err(e) => problems.push(e),
        }
    }
    if error.is_none() && labs.is_empty() {
        problems.push(format!("{} has no summary.json", dir.display()));
    }
    let error = error.or_else(|| (!problems.is_empty()).then(|| problems.join("; ")));
    let self_check = (!lateness.is_empty()).then(|| {
        let worst = lateness.iter().copied().fold(0.0, f64::max);
        if worst <= LATENESS_P99_LIMIT_MS {
            "ok".to_string()
        } else {
            "late".to_string()
        }
    });
    Row {
        run: run.id.clone(),
        rep: run.rep,
        params: run.params_json(),
        status: if error.is_none() { "ok" } else { "failed" }.into(),
        error,
        self_check,
        wall_s,
        figures,
    }
}

fn read(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

/// The `summary.json` of every lab below `dir`, `depth` levels down at most, in name order,
/// each with its column prefix (`fifo_`, `nat64_client_`).
fn lab_summaries(dir: &Path, prefix: &str, depth: u32, labs: &mut Vec<(String, PathBuf)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut subs: Vec<String> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    subs.sort();
    let here = RunDir::new(dir);
    for name in subs {
        let summary = here.lab(&name).summary_json();
        let prefix = format!("{prefix}{name}_");
        if summary.is_file() {
            labs.push((prefix, summary));
        } else if depth > 1 {
            lab_summaries(&dir.join(&name), &prefix, depth - 1, labs);
        }
    }
}

/// The figures of one `summary.json` (docs/run-dir.md): each link direction's
/// [`LINK_COLUMNS`](labnet::run_dir::LINK_COLUMNS) under `{prefix}{link}_{direction}_`, and
/// the engine's. Returns the engine's delivery lateness p99 (ms) beyond the precision it was
/// allowed (`engine.precision_ms`).
fn summary_figures(s: &Summary, prefix: &str, out: &mut BTreeMap<String, Value>) -> f64 {
    for l in &s.links {
        let p = format!("{prefix}{}_{}_", l.name, l.direction);
        for (name, v) in l.columns() {
            // Counts (the columns without a unit in their name) stay integers, so that the
            // tables' columns are integers too.
            let counted = !name.ends_with("_ms") && !name.ends_with("_mbps");
            let v: Value = if counted && v >= 0.0 && v.fract() == 0.0 {
                (v as u64).into()
            } else {
                v.into()
            };
            out.insert(format!("{p}{name}"), v);
        }
    }
    out.insert(format!("{prefix}engine_cpu_s"), s.engine.cpu_s.into());
    let p99 = s.engine.delivery_lateness_ms.p99;
    out.insert(format!("{prefix}lateness_p99_ms"), p99.into());
    (p99 - s.engine.precision_ms).max(0.0)
}

/// The summary lines of the traffic programs (docs/apps.md) in a shell run's COMMAND output:
/// `probe_summary` as `{proto}_rtt_p95_ms`, `{proto}_lost`, …; the receivers' `total` goodput
/// summed as `goodput_mbps`; `stream_summary` as `stream_*`. Other lines are not figures.
fn program_figures(text: &str, out: &mut BTreeMap<String, Value>) {
    let mut goodput = None::<f64>;
    for line in text.lines().filter(|l| l.starts_with('{')) {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        match v.get("type").and_then(Value::as_str) {
            Some("probe_summary") => {
                let proto = v.get("proto").and_then(Value::as_str).unwrap_or("probe");
                for k in [
                    "sent",
                    "received",
                    "lost",
                    "rtt_p50_ms",
                    "rtt_p95_ms",
                    "rtt_p99_ms",
                    "rtt_max_ms",
                ] {
                    if let Some(x) = v.get(k).filter(|x| x.is_number()) {
                        out.insert(format!("{proto}_{k}"), x.clone());
                    }
                }
            }
            Some("total") if v.get("role").and_then(Value::as_str) == Some("receiver") => {
                if let Some(g) = v.get("goodput_mbps").and_then(Value::as_f64) {
                    *goodput.get_or_insert(0.0) += g;
                }
            }
            Some("stream_summary") => {
                if let Value::Object(m) = &v {
                    for (k, x) in m.iter().filter(|(k, x)| *k != "t_s" && x.is_number()) {
                        out.insert(format!("stream_{k}"), x.clone());
                    }
                }
            }
            _ => {}
        }
    }
    if let Some(g) = goodput {
        out.insert("goodput_mbps".into(), g.into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::file::AxisValue;

    fn run() -> Run {
        Run {
            id: "r0003".into(),
            params: vec![("queue".into(), AxisValue::Text("codel".into()))],
            rep: 1,
        }
    }

    fn scratch(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("sweep-row-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    const SUMMARY: &str = r#"{"links":[{"name":"path","direction":"down","queue":"codel","packets_in":100,
        "packets_out":98,"bytes_out":147000,"drops":{"codel":1,"overlimit":1},"ce_marks":7,
        "queue_delay_ms":{"p50":1.5,"p95":4.25,"p99":6.0,"max":9.0},"throughput_bps":9500000}],
        "no_route":0,"engine":{"packets":300,"delivery_lateness_ms":{"p50":0.01,"p95":0.02,"p99":2.5,"max":3.0},
        "write_errors":0,"cpu_s":0.4}}"#;

    #[test]
    fn a_shell_run_row_has_the_summary_and_probe_figures() {
        let d = scratch("shell");
        std::fs::write(d.join("summary.json"), SUMMARY).unwrap();
        std::fs::write(
            RunDir::new(&d).command_out(),
            concat!(
                "{\"type\":\"start\",\"t_s\":0}\n",
                "{\"type\":\"probe_summary\",\"t_s\":5,\"proto\":\"udp\",\"sent\":50,\"received\":49,\"lost\":1,\"rtt_p50_ms\":21.0,\"rtt_p95_ms\":30.5,\"rtt_p99_ms\":null}\n",
                "{\"type\":\"total\",\"t_s\":5,\"role\":\"receiver\",\"goodput_mbps\":4.5}\n",
                "{\"type\":\"total\",\"t_s\":5,\"role\":\"receiver\",\"goodput_mbps\":4.0}\n",
                "{\"type\":\"total\",\"t_s\":5,\"role\":\"sender\",\"goodput_mbps\":99}\n",
                "{\"type\":\"probe_summ"
            ),
        )
        .unwrap();
        let r = read_row(&run(), &d, None, 6.5);
        assert_eq!(r.status, "ok", "{:?}", r.error);
        let f = |k: &str| r.figures.get(k).and_then(Value::as_f64);
        assert_eq!(f("path_down_throughput_mbps"), Some(9.5));
        assert_eq!(f("path_down_drops"), Some(2.0));
        assert_eq!(f("path_down_ce_marks"), Some(7.0));
        assert_eq!(f("path_down_queue_delay_p95_ms"), Some(4.25));
        assert_eq!(f("udp_rtt_p95_ms"), Some(30.5));
        assert_eq!(f("udp_lost"), Some(1.0));
        assert!(!r.figures.contains_key("udp_rtt_p99_ms"));
        assert_eq!(f("goodput_mbps"), Some(8.5));
        assert_eq!(f("lateness_p99_ms"), Some(2.5));
        // 2.5 ms late at p99 is more than the engine may be.
        assert_eq!(r.self_check.as_deref(), Some("late"));
        // Unless it was allowed 2 ms of precision: then 0.5 ms beyond it is sound.
        std::fs::write(
            d.join("summary.json"),
            SUMMARY.replace("\"cpu_s\":0.4", "\"cpu_s\":0.4,\"precision_ms\":2.0"),
        )
        .unwrap();
        let r2 = read_row(&run(), &d, None, 6.5);
        assert_eq!(r2.self_check.as_deref(), Some("ok"), "{:?}", r2.error);
        assert_eq!(Row::from_json(&r.to_json()), Some(r));
    }

    #[test]
    fn a_demo_row_has_each_labs_summary_and_the_results() {
        let d = scratch("demo");
        for lab in ["fifo", "codel"] {
            std::fs::create_dir_all(d.join(lab)).unwrap();
            std::fs::write(
                d.join(lab).join("summary.json"),
                SUMMARY.replace("\"p99\":2.5", "\"p99\":0.5"),
            )
            .unwrap();
        }
        std::fs::write(
            d.join("results.json"),
            r#"{"base_rtt_ms":20,"fifo":{"queue":"fifo limit 300","rtt_p95_ms":372.0}}"#,
        )
        .unwrap();
        let r = read_row(&run(), &d, None, 1.0);
        assert_eq!(r.status, "ok");
        assert_eq!(r.self_check.as_deref(), Some("ok"));
        assert_eq!(r.figures["fifo_rtt_p95_ms"], 372.0);
        assert_eq!(r.figures["fifo_queue"], "fifo limit 300");
        assert_eq!(r.figures["base_rtt_ms"], 20);
        assert!(r.figures.contains_key("codel_path_down_drops"));
    }

    #[test]
    fn a_demo_whose_labs_are_grouped_two_levels_down_has_each_labs_summary() {
        let d = scratch("grouped");
        for (net, client) in [("nat64", "client"), ("nat64", "clat"), ("dual", "client")] {
            let lab = d.join(net).join(client);
            std::fs::create_dir_all(&lab).unwrap();
            std::fs::write(lab.join("summary.json"), SUMMARY).unwrap();
        }
        std::fs::create_dir_all(d.join("empty").join("deeper").join("deepest")).unwrap();
        let r = read_row(&run(), &d, None, 1.0);
        assert_eq!(r.status, "ok", "{:?}", r.error);
        for p in ["nat64_client_", "nat64_clat_", "dual_client_"] {
            assert!(
                r.figures.contains_key(&format!("{p}path_down_drops")),
                "{p}"
            );
        }
    }

    #[test]
    fn a_run_that_left_nothing_or_failed_is_a_failed_row_with_its_reason() {
        let d = scratch("empty");
        let r = read_row(&run(), &d, None, 1.0);
        assert_eq!(r.status, "failed");
        assert!(r.error.unwrap().contains("no summary.json"));
        let r = read_row(&run(), &d, Some("exit status 1: no server".into()), 1.0);
        assert_eq!(
            (r.status.as_str(), r.error.as_deref()),
            ("failed", Some("exit status 1: no server"))
        );
        assert_eq!(r.self_check, None);
        std::fs::write(d.join("summary.json"), "{not json").unwrap();
        let r = read_row(&run(), &d, None, 1.0);
        assert!(r.error.unwrap().contains("summary.json"));
    }
}
