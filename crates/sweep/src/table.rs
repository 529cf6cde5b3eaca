//! The results table, one row per finished run, as `DIR/results.csv` and `DIR/results.parquet`:
//! first `run`, `rep`, the axes in the sweep file's order, `status`, `error`, `self_check`,
//! `wall_s`, then every figure any run has, by name. A column whose values are all integers
//! (seeds, counts) is an integer column (INT64 in Parquet, digits alone in CSV); one whose
//! values are all numbers is a number column (a double in Parquet); any other is text. A run without a figure has an
//! empty cell (null in Parquet). Both files are written whole to a temporary name and renamed,
//! so a reader never sees half a table.

use std::collections::BTreeSet;
use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use parquet::basic::{LogicalType, Repetition, Type as Physical};
use parquet::data_type::{ByteArray, ByteArrayType, DoubleType, Int64Type};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::Type;
use serde_json::Value;

use crate::row::Row;

pub const CSV: &str = "results.csv";
pub const PARQUET: &str = "results.parquet";

/// What a column holds, and so its type in Parquet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Integer,
    Number,
    Text,
}

/// The table: column names and, per row, one cell per column.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<Value>>,
}

impl Table {
    /// The table of `rows`, with the axes' columns in `axes` order.
    pub fn new(axes: &[String], rows: &[&Row]) -> Table {
        let figures: BTreeSet<&String> = rows.iter().flat_map(|r| r.figures.keys()).collect();
        let mut columns: Vec<String> = vec!["run".into(), "rep".into()];
        columns.extend(axes.iter().cloned());
        columns.extend(["status", "error", "self_check", "wall_s"].map(String::from));
        let rest: Vec<String> = figures
            .into_iter()
            .filter(|f| !columns.contains(f))
            .cloned()
            .collect();
        columns.extend(rest);
        let rows = rows
            .iter()
            .map(|r| {
                columns
                    .iter()
                    .map(|c| match c.as_str() {
                        "run" => r.run.clone().into(),
                        "rep" => r.rep.into(),
                        "status" => r.status.clone().into(),
                        "error" => r.error.clone().into(),
                        "self_check" => r.self_check.clone().into(),
                        "wall_s" => r.wall_s.into(),
                        _ => r
                            .params
                            .get(c)
                            .or_else(|| r.figures.get(c))
                            .cloned()
                            .unwrap_or(Value::Null),
                    })
                    .collect()
            })
            .collect();
        Table { columns, rows }
    }

    /// What column `i` holds (nulls aside): only integers that fit an i64, only numbers, or
    /// anything else.
    fn kind(&self, i: usize) -> Kind {
        let cells = || self.rows.iter().map(|r| &r[i]).filter(|v| !v.is_null());
        if cells().all(Value::is_i64) {
            Kind::Integer
        } else if cells().all(Value::is_number) {
            Kind::Number
        } else {
            Kind::Text
        }
    }

    /// RFC 4180: fields with a comma, quote or line break are quoted, quotes doubled; CRLF
    /// ends each record.
    pub fn to_csv(&self) -> String {
        fn field(v: &Value) -> String {
            let s = match v {
                Value::Null => String::new(),
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            if s.contains([',', '"', '\r', '\n']) {
                format!("\"{}\"", s.replace('"', "\"\""))
            } else {
                s
            }
        }
        let mut out = String::new();
        let header: Vec<String> = self
            .columns
            .iter()
            .map(|c| field(&c.clone().into()))
            .collect();
        out.push_str(&header.join(","));
        out.push_str("\r\n");
        for r in &self.rows {
            out.push_str(&r.iter().map(field).collect::<Vec<_>>().join(","));
            out.push_str("\r\n");
        }
        out
    }

    /// The table as one Parquet row group: optional 64-bit integers, doubles and UTF-8
    /// strings.
    pub fn write_parquet(&self, out: impl Write + Send) -> Result<(), String> {
        let e = |e: parquet::errors::ParquetError| e.to_string();
        let kinds: Vec<Kind> = (0..self.columns.len()).map(|i| self.kind(i)).collect();
        let fields = self
            .columns
            .iter()
            .zip(&kinds)
            .map(|(c, k)| {
                let t = match k {
                    Kind::Integer => Type::primitive_type_builder(c, Physical::INT64),
                    Kind::Number => Type::primitive_type_builder(c, Physical::DOUBLE),
                    Kind::Text => Type::primitive_type_builder(c, Physical::BYTE_ARRAY)
                        .with_logical_type(Some(LogicalType::String)),
                };
                t.with_repetition(Repetition::OPTIONAL)
                    .build()
                    .map(Arc::new)
                    .map_err(e)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let schema = Type::group_type_builder("sweep")
            .with_fields(fields)
            .build()
            .map_err(e)?;
        let props = WriterProperties::builder()
            .set_created_by("latencylab sweep".into())
            .build();
        let mut w = SerializedFileWriter::new(out, Arc::new(schema), Arc::new(props)).map_err(e)?;
        let mut rg = w.next_row_group().map_err(e)?;
        let mut i = 0;
        while let Some(mut col) = rg.next_column().map_err(e)? {
            let cells = self.rows.iter().map(|r| &r[i]);
            let defs: Vec<i16> = cells.clone().map(|v| i16::from(!v.is_null())).collect();
            if kinds[i] == Kind::Integer {
                let vals: Vec<i64> = cells.filter_map(Value::as_i64).collect();
                col.typed::<Int64Type>()
                    .write_batch(&vals, Some(&defs), None)
                    .map_err(e)?;
            } else if kinds[i] == Kind::Number {
                let vals: Vec<f64> = cells.filter_map(Value::as_f64).collect();
                col.typed::<DoubleType>()
                    .write_batch(&vals, Some(&defs), None)
                    .map_err(e)?;
            } else {
                let vals: Vec<ByteArray> = cells
                    .filter(|v| !v.is_null())
                    .map(|v| match v {
                        Value::String(s) => ByteArray::from(s.as_str()),
                        other => ByteArray::from(other.to_string().as_str()),
                    })
                    .collect();
                col.typed::<ByteArrayType>()
                    .write_batch(&vals, Some(&defs), None)
                    .map_err(e)?;
            }
            col.close().map_err(e)?;
            i += 1;
        }
        rg.close().map_err(e)?;
        w.close().map_err(e)?;
        Ok(())
    }

    /// Writes `results.csv` and `results.parquet` into `dir`, each whole or not at all.
    pub fn write(&self, dir: &Path) -> Result<(), String> {
        let put = |name: &str, write: &dyn Fn(File) -> Result<(), String>| {
            let tmp = dir.join(format!(".{name}.tmp"));
            let f = File::create(&tmp).map_err(|e| format!("{}: {e}", tmp.display()))?;
            write(f)?;
            std::fs::rename(&tmp, dir.join(name)).map_err(|e| format!("{name}: {e}"))
        };
        put(CSV, &|mut f| {
            f.write_all(self.to_csv().as_bytes())
                .map_err(|e| format!("{CSV}: {e}"))
        })?;
        put(PARQUET, &|f| self.write_parquet(f))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: &str, queue: &str, rtt: Option<f64>, error: Option<&str>) -> Row {
        let mut figures = std::collections::BTreeMap::new();
        if let Some(r) = rtt {
            figures.insert("udp_rtt_p95_ms".to_string(), r.into());
        }
        Row {
            run: id.into(),
            rep: 0,
            params: serde_json::json!({"queue": queue, "seed": 1}),
            status: if error.is_some() { "failed" } else { "ok" }.into(),
            error: error.map(String::from),
            self_check: Some("ok".into()),
            wall_s: 5.5,
            figures,
        }
    }

    #[test]
    fn columns_come_fixed_then_axes_then_figures_and_missing_cells_are_empty() {
        let a = row("r0000", "fifo limit 300", Some(300.5), None);
        let b = row("r0001", "codel, ecn \"x\"", None, Some("exit status 1"));
        let t = Table::new(&["queue".into(), "seed".into()], &[&a, &b]);
        assert_eq!(
            t.columns,
            [
                "run",
                "rep",
                "queue",
                "seed",
                "status",
                "error",
                "self_check",
                "wall_s",
                "udp_rtt_p95_ms"
            ]
        );
        let csv = t.to_csv();
        let lines: Vec<&str> = csv.split("\r\n").collect();
        assert_eq!(lines[1], "r0000,0,fifo limit 300,1,ok,,ok,5.5,300.5");
        assert_eq!(
            lines[2],
            "r0001,0,\"codel, ecn \"\"x\"\"\",1,failed,exit status 1,ok,5.5,"
        );
        assert_eq!(
            [t.kind(1), t.kind(3), t.kind(8), t.kind(2)],
            [Kind::Integer, Kind::Integer, Kind::Number, Kind::Text]
        );
    }

    #[test]
    fn the_parquet_file_has_the_magic_and_every_column_name() {
        let a = row("r0000", "fifo", Some(1.0), None);
        let t = Table::new(&["queue".into(), "seed".into()], &[&a]);
        let mut buf = Vec::new();
        t.write_parquet(&mut buf).unwrap();
        // A Parquet file starts and ends with "PAR1" (the format's specification).
        assert_eq!(&buf[..4], b"PAR1");
        assert_eq!(&buf[buf.len() - 4..], b"PAR1");
        let footer = String::from_utf8_lossy(&buf);
        for c in &t.columns {
            assert!(footer.contains(c.as_str()), "{c}");
        }
    }

    #[test]
    fn integer_columns_are_int64_in_parquet_and_digits_in_csv() {
        let mut a = row("r0000", "fifo", Some(1.5), None);
        a.figures.insert("path_down_drops".into(), 12u64.into());
        let mut b = row("r0001", "fifo", Some(2.0), None);
        b.figures.insert("path_down_drops".into(), 0u64.into());
        let t = Table::new(&["queue".into(), "seed".into()], &[&a, &b]);
        let csv = t.to_csv();
        let lines: Vec<&str> = csv.split("\r\n").collect();
        assert_eq!(
            lines[0],
            "run,rep,queue,seed,status,error,self_check,wall_s,path_down_drops,udp_rtt_p95_ms"
        );
        assert_eq!(lines[1], "r0000,0,fifo,1,ok,,ok,5.5,12,1.5");
        assert_eq!(lines[2], "r0001,0,fifo,1,ok,,ok,5.5,0,2.0");
        let path = std::env::temp_dir().join(format!("sweep-int-{}.parquet", std::process::id()));
        t.write_parquet(File::create(&path).unwrap()).unwrap();
        use parquet::file::reader::{FileReader, SerializedFileReader};
        let reader = SerializedFileReader::new(File::open(&path).unwrap()).unwrap();
        std::fs::remove_file(&path).unwrap();
        let schema = reader.metadata().file_metadata().schema_descr_ptr();
        let physical = |name: &str| {
            schema
                .columns()
                .iter()
                .find(|c| c.name() == name)
                .unwrap()
                .physical_type()
        };
        assert_eq!(physical("seed"), Physical::INT64);
        assert_eq!(physical("rep"), Physical::INT64);
        assert_eq!(physical("path_down_drops"), Physical::INT64);
        assert_eq!(physical("udp_rtt_p95_ms"), Physical::DOUBLE);
        assert_eq!(physical("wall_s"), Physical::DOUBLE);
        assert_eq!(physical("queue"), Physical::BYTE_ARRAY);
    }
}
