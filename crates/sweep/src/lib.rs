//! Grids of labs: a sweep file (`file`) names what each run runs and the axes whose every
//! combination is one run (`plan`); the runs go to a local pool of `latencylab` processes
//! (`pool`), each leaving its own run directory, and each finished run's row (`row`) goes to a
//! journal that makes the sweep resumable (`journal`) and into the results table, CSV and
//! Parquet (`table`), and drawn as small multiples in `sweep.html` (`html`).
//!
//! Labs are driven only through the `latencylab` binary and read only through the documented
//! run directory (docs/run-dir.md); Ray scheduling lives in the Python package, which runs the
//! same binary on each worker.

pub mod file;
pub mod html;
pub mod journal;
pub mod plan;
pub mod pool;
pub mod row;
pub mod table;

pub use file::{SweepError, SweepFile};
