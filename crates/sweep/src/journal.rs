//! The journal that makes a sweep resumable: `DIR/journal.jsonl`, one JSON line per finished
//! run (its whole row), appended with one `write` and synced before the next run is counted
//! as done. A run stopped by SIGINT, SIGKILL or a power cut has no line and runs again; a line
//! torn by a crash mid-write is not a row (it is ignored and the run runs again); a run listed
//! twice (which only a crash between two syncs could leave) counts once, the last line winning.
//!
//! Not here: the tables (`table`), which are rebuilt from the journal.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::plan::Run;
use crate::row::Row;

pub const JOURNAL: &str = "journal.jsonl";

pub struct Journal {
    path: PathBuf,
    file: File,
    /// Finished runs by id.
    rows: BTreeMap<String, Row>,
}

impl Journal {
    /// Opens (or starts) the journal in `dir`. Rows of runs that `plan` does not have with the
    /// same parameters mean `dir` holds another sweep: an error naming the first such run.
    pub fn open(dir: &Path, plan: &[Run]) -> Result<Journal, String> {
        let path = dir.join(JOURNAL);
        let mut rows = BTreeMap::new();
        if path.exists() {
            let text = std::fs::read_to_string(&path)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            for line in text.lines() {
                let Some(row) = serde_json::from_str(line)
                    .ok()
                    .as_ref()
                    .and_then(Row::from_json)
                else {
                    continue;
                };
                let same = plan
                    .iter()
                    .any(|r| r.id == row.run && r.rep == row.rep && r.params_json() == row.params);
                if !same {
                    return Err(format!(
                        "{} holds a different sweep (its run {} was {}); use another -o DIR",
                        dir.display(),
                        row.run,
                        row.params
                    ));
                }
                rows.insert(row.run.clone(), row);
            }
        }
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
        // A torn last line (no newline) must not glue itself to the next row.
        let len = file.metadata().map(|m| m.len()).unwrap_or(0);
        if len > 0 && !std::fs::read(&path).unwrap_or_default().ends_with(b"\n") {
            file.write_all(b"\n")
                .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        }
        Ok(Journal { path, file, rows })
    }

    pub fn is_done(&self, run: &Run) -> bool {
        self.rows.contains_key(&run.id)
    }

    /// Records a finished run, durably, before returning.
    pub fn record(&mut self, row: Row) -> Result<(), String> {
        let mut line = row.to_json().to_string();
        line.push('\n');
        self.file
            .write_all(line.as_bytes())
            .and_then(|_| self.file.sync_data())
            .map_err(|e| format!("cannot write {}: {e}", self.path.display()))?;
        self.rows.insert(row.run.clone(), row);
        Ok(())
    }

    /// Every finished run's row, in run order.
    pub fn rows(&self) -> Vec<&Row> {
        self.rows.values().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::file::AxisValue;

    fn plan() -> Vec<Run> {
        (0..3)
            .map(|i| Run {
                id: format!("r{i:04}"),
                params: vec![("seed".into(), AxisValue::Int(i))],
                rep: 0,
            })
            .collect()
    }

    fn row(r: &Run, wall_s: f64) -> Row {
        Row {
            run: r.id.clone(),
            rep: r.rep,
            params: r.params_json(),
            status: "ok".into(),
            error: None,
            self_check: Some("ok".into()),
            wall_s,
            figures: Default::default(),
        }
    }

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("sweep-journal-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_reopened_journal_knows_what_ran_and_ignores_a_torn_line() {
        let d = scratch("torn");
        let p = plan();
        let mut j = Journal::open(&d, &p).unwrap();
        j.record(row(&p[0], 1.0)).unwrap();
        drop(j);
        // A crash in the middle of writing the second row.
        let mut f = OpenOptions::new()
            .append(true)
            .open(d.join(JOURNAL))
            .unwrap();
        f.write_all(b"{\"run\":\"r0001\",\"rep\":0,\"par").unwrap();
        let mut j = Journal::open(&d, &p).unwrap();
        assert!(j.is_done(&p[0]));
        assert!(!j.is_done(&p[1]));
        j.record(row(&p[1], 2.0)).unwrap();
        j.record(row(&p[1], 3.0)).unwrap();
        let j = Journal::open(&d, &p).unwrap();
        let rows = j.rows();
        assert_eq!(rows.len(), 2, "one row per run, never two");
        assert_eq!(rows[1].wall_s, 3.0);
    }

    #[test]
    fn a_journal_of_another_sweep_is_refused() {
        let d = scratch("other");
        let p = plan();
        Journal::open(&d, &p)
            .unwrap()
            .record(row(&p[2], 1.0))
            .unwrap();
        let mut other = plan();
        other[2].params = vec![("seed".into(), AxisValue::Int(9))];
        let e = Journal::open(&d, &other).err().unwrap();
        assert!(e.contains("different sweep") && e.contains("r0002"), "{e}");
    }
}
