//! report: turns measurements into pictures and pages — charts (SVG and PNG), the tcptrace
//! time-sequence graph, xplot `.xpl` files and one self-contained HTML page.
//!
//! It is pure: data in, bytes (or files) out. It reads no clocks, opens no sockets and starts
//! no threads. It does not read captures or compute statistics; that is `analyze`'s job, and
//! `analysis` here only converts `analyze`'s results into the generic inputs below, so the
//! demos can draw their own measurements with the same primitives without the analyzer.
//!
//! Module map:
//! - `chart`: line, step, scatter, CDF, reference-line, I-beam and text-marker series on
//!   labelled axes with units, a legend and a caption; SVG and PNG.
//! - `tsg`: the time-sequence graph in the tcptrace tradition, built on `chart`, its close-ups
//!   of a time window and its xplot form.
//! - `xplot`: the `.xpl` text format that xplot and tcptrace use.
//! - `budget`: the time-budget bar and the exchanges table of one connection.
//! - `ladder`: the ladder (message-sequence) diagram of an exchange between two hosts.
//! - `html`: a page builder (sections of text, tables and figures) with zoom and pan.
//! - `analysis`: `analyze::Analysis` → plots, xplot files and the analyzer's HTML page.
//! - `findings`: what the analyzer named in one or more analyses, as a page's findings block.

pub mod analysis;
mod bitmap_text;
pub mod budget;
pub mod chart;
pub mod findings;
mod font;
pub mod html;
pub mod ladder;
pub mod tsg;
pub mod xplot;

/// The hand-built analysis the integration tests also use.
#[cfg(test)]
#[path = "../tests/common/mod.rs"]
mod test_fixture;

use std::fmt;
use std::path::PathBuf;

pub use chart::{
    same_scale, share_bar, svg_texts, Axis, Chart, LegendEntry, Marks, RenderedSvg, Rgb, Segment,
    Series, Swatch,
};
pub use html::{Block, DataMapping, Figure, Page, Section, Table};
pub use ladder::{Ladder, LadderArrow, LadderPacket};
pub use tsg::{TimeSequence, TsgMark, TsgMarkKind, TsgPoint, TsgSack, TsgSegment};
pub use xplot::{Xplot, XplotAxis, XplotColor, XplotCommand};

/// What can go wrong while drawing or writing a report.
#[derive(Debug)]
pub enum ReportError {
    /// The plotting library refused to draw (bad geometry, font trouble).
    Draw(String),
    /// The PNG encoder failed.
    Encode(String),
    /// The analysis has data but no time series to draw: the analyzer must be run with
    /// `Options::keep_series` for plots, xplot files and the page.
    NoSeries,
    /// A file or directory could not be written.
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl fmt::Display for ReportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReportError::Draw(m) => write!(f, "cannot draw chart: {m}"),
            ReportError::Encode(m) => write!(f, "cannot encode png: {m}"),
            ReportError::NoSeries => write!(
                f,
                "the analysis kept no time series (run the analyzer with keep_series to draw)"
            ),
            ReportError::Io { path, source } => {
                write!(f, "cannot write {}: {source}", path.display())
            }
        }
    }
}

impl std::error::Error for ReportError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ReportError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Writes `bytes` to `path`, naming the path in the error.
pub(crate) fn write_file(path: &std::path::Path, bytes: &[u8]) -> Result<(), ReportError> {
    std::fs::write(path, bytes).map_err(|source| ReportError::Io {
        path: path.to_path_buf(),
        source,
    })
}
